"""The believability checks on synthetic samples (the GPU supplies such samples on the device)."""

from harness.analysis.plausibility import implausible, noise_warnings
from harness.results import Stats


def test_work_hidden_from_the_events_is_caught():
    events = Stats.from_samples([30e3] * 20)  # 30 us between the events
    honest_tails = [4e3] * 20  # end event seen complete -> device idle: the usual 4 us (stamp kernel, sync)
    hidden_tails = [4e3 + 400e3] * 20  # 400 us of GPU work left running on another stream
    assert implausible(events, honest_tails, gap_ns=4e3, floor_ns=None, gpu=True) is None
    assert "escaped" in implausible(events, hidden_tails, gap_ns=4e3, floor_ns=None, gpu=True)
    assert implausible(events, hidden_tails, gap_ns=4e3, floor_ns=None, gpu=False) is None  # CPU: no events


def test_the_escaped_work_check_reads_the_tail_not_the_samples():
    """What a slow host adds before the end event (a late wake-up, the gate's release) is not in the
    tail, so a long sample with a short tail passes; 25 us left running after the end event, in most
    samples, is escaped work whatever the sample's length (the median: one hiccup does not decide)."""
    long = Stats.from_samples([300e3] * 10)
    assert implausible(long, [4e3] * 10, gap_ns=4e3, floor_ns=None, gpu=True) is None
    short = Stats.from_samples([10e3] * 10)
    assert "escaped" in implausible(short, [29e3] * 10, gap_ns=4e3, floor_ns=None, gpu=True)
    one_hiccup = [4e3] * 9 + [500e3]
    assert implausible(short, one_hiccup, gap_ns=4e3, floor_ns=None, gpu=True) is None
    # batched: tails are per input, the gap per sample (divided by the sample's 8 inputs)
    assert implausible(short, [0.5e3] * 10, gap_ns=4e3, floor_ns=None, gpu=True, inputs_per_sample=8) is None


def test_the_escaped_work_finding_names_the_idle_devices_synchronize():
    """The second synchronize of each sample, right after the tail's, is in the finding: a slow host
    lengthens both, work left running the tail alone. It decides nothing: the same tails are rejected
    with or without it, and an honest tail passes whatever it says."""
    short = Stats.from_samples([10e3] * 10)
    found = implausible(short, [29e3] * 10, 4e3, None, True, idle_syncs_ns=[21e3] * 8 + [None] * 2)
    assert "escaped" in found and "of the idle device, took 21.0 us" in found
    assert "idle device" not in implausible(short, [29e3] * 10, 4e3, None, True, idle_syncs_ns=[21e3] + [None] * 9)
    found = implausible(short, [29e3] * 10, 4e3, None, True, device_tails_ns=[24e3] * 10)
    assert "every SM was free 24.0 us after the end" in found  # the device's own clock: no host in it
    assert implausible(short, [4e3] * 10, 4e3, None, True, idle_syncs_ns=[50e3] * 10) is None


def test_faster_than_physics_is_impossible():
    stats = Stats.from_samples([1e3, 1.1e3, 0.9e3])
    assert "physical floor" in implausible(stats, [], 0.0, floor_ns=5e3, gpu=True)
    assert implausible(stats, [], 0.0, floor_ns=0.5e3, gpu=True) is None


def test_noise_warnings_name_the_problem():
    steady = Stats.from_samples([100e3 + i for i in range(50)])
    assert noise_warnings(steady, gpu=True, strict_per_call=True) == []
    noisy = Stats.from_samples([100e3, 300e3] * 5)
    text = " ".join(noise_warnings(noisy, gpu=True, strict_per_call=True))
    assert "unstable" in text and "outliers" in text
    tiny = Stats.from_samples([3e3] * 10)
    assert any("launch overhead" in w for w in noise_warnings(tiny, gpu=True, strict_per_call=True))
    assert noise_warnings(tiny, gpu=True, strict_per_call=False) == []


def test_events_moved_against_the_device_clock_are_caught():
    """A submission that re-records the start event after its work: the events shrink to ~1 us, the
    device clock's window around them (two harness kernels) still holds the work."""
    held, opened = [True] * 20, [False] * 20
    cal = {"held": 1.5e3, "opened": 9e3}  # honest excess: the stamp kernels (+ the host's launch of the 2nd)
    honest = Stats.from_samples([30e3] * 20)
    honest_windows = [30e3 + 1.5e3] * 20  # the stamp kernels' own ~1.5 us
    assert implausible(honest, [], 0.0, None, True, honest_windows, held, cal) is None
    moved = Stats.from_samples([1e3] * 20)
    assert "re-recorded" in implausible(moved, [], 0.0, None, True, [31.5e3] * 20, held, cal)
    # under the limit (3 us, or 5% of the time): jitter, not a finding
    assert implausible(honest, [], 0.0, None, True, [30e3 + 1.5e3 + 1.4e3] * 20, held, cal) is None
    # the gate opened by itself (the host took longer than its cap: the re-record cheat's gc scan does):
    # the window also holds the host's launch of the second stamp, so the 20 us limit applies (15 us of
    # launch jitter beyond the calibration is no finding) ...
    assert implausible(honest, [], 0.0, None, True, [30e3 + 9e3 + 15e3] * 20, opened, cal) is None
    # ... and a start event moved past work the device ran while the host was still busy is caught
    assert "re-recorded" in implausible(moved, [], 0.0, None, True, [80e6] * 20, opened, cal)
    # no calibration, or windows for too few samples: no verdict from them
    assert implausible(moved, [], 0.0, None, True, [31.5e3] * 20, held, {}) is None
    assert implausible(moved, [], 0.0, None, True, [31.5e3] * 5 + [None] * 15, held, cal) is None


def test_batched_samples_share_the_per_sample_calibration():
    """Batched timing: samples, tails and windows are per input (a sample over 50 inputs divided by
    50), the calibrations per sample. Subtracting a whole sample's calibration from each input's
    share would let 50 x that much hide per sample (nvfp4_gemm's honest ranked run read -28 us)."""
    from harness.analysis.plausibility import device_clock_excess_ns

    b, cal = 50, {"held": 1.5e3, "opened": 28e3}
    honest = Stats.from_samples([130e3] * 20)
    opened = [False] * 20
    honest_windows = [130e3 + 28e3 / b] * 20
    assert abs(device_clock_excess_ns(honest, honest_windows, opened, cal, b)) < 1
    assert implausible(honest, [], 0.0, None, True, honest_windows, opened, cal, b) is None
    hidden = [w + 25e3 for w in honest_windows]  # 25 us per call moved out of the events
    assert "re-recorded" in implausible(honest, [], 0.0, None, True, hidden, opened, cal, b)
    assert implausible(honest, [], 0.0, None, True, hidden, opened, cal) is None  # the old, loose reading
    tails = [12e3 / b + 70e3] * 20  # the tail check: 70 us per call left running after the end event
    assert "escaped" in implausible(honest, tails, 12e3, None, True, inputs_per_sample=b)
    assert implausible(honest, tails, 12e3, None, True) is None


def test_device_window_knows_whether_the_gate_held():
    """The sampler's bookkeeping around its two device timestamps (the kernels themselves run on a GPU)."""
    from types import SimpleNamespace

    import torch

    from harness.worker.sampler import Sampler

    s = Sampler(torch.device("cpu"), None)
    s._stamp, s._stamps, s.gate = object(), torch.tensor([1_000, 51_000, 53_000]), SimpleNamespace(cap_ns=21.5e6)
    s._device_window(200e3)  # the host enqueued the call in 0.2 ms: well inside the cap
    assert (s.window_ns, s.window_held) == (50e3, True)
    assert s.device_tail_ns is None  # no occupancy stamp: not read
    s._occupancy = object()
    s._device_window(200e3)
    assert s.device_tail_ns == 2e3  # the end stamp -> the last SM free for the occupancy stamp's blocks
    s._device_window(20e6)  # 20 ms: close to the cap, the gate may have opened by itself
    assert (s.window_ns, s.window_held) == (50e3, False)
    s._closing_cap = 1  # calibration of the opened case: a gate that opens at once
    s._device_window(200e3)
    assert s.window_held is False


def test_host_bound_is_said_when_the_gpu_waited_for_the_host():
    """triton_nvfp4 at k=2048 on the H200: 32 us of kernel-only time per call, batched samples of
    35-59 us: the host's launch of 50 calls outlasts the GPU's work once the gate's cap is spent."""
    from harness.analysis.plausibility import host_bound_warnings, median_measured

    assert median_measured([45e3, 47e3, None]) == 46e3  # the median of the two measured
    assert median_measured([45e3, 47e3, 52e3, None]) == 47e3
    assert median_measured([45e3, None, None]) is None  # measured on too few samples
    assert "host-bound" in host_bound_warnings(47e3, 32e3)[0]
    assert host_bound_warnings(20e3, 32e3) == []  # the GPU was the slower one
    assert host_bound_warnings(0.0, 5e3) == []  # the gate hid all of it
    assert host_bound_warnings(None, 32e3) == []
    assert host_bound_warnings(47e3, None) == []  # no kernel-only figure to compare with


def test_sampler_counts_the_host_time_the_gate_did_not_hide(monkeypatch):
    """The gated sample's bookkeeping, with a stand-in gate and clocks (the real ones need a GPU):
    host time beyond the gate's cap is what the events saw of it, shared by a batch's inputs."""
    from types import SimpleNamespace

    import torch

    from harness.worker import sampler as timing

    now = [0]  # the host clock moves only in the call
    monkeypatch.setattr(timing, "_perf_counter_ns", lambda: now[0])
    monkeypatch.setattr(timing, "_event_record", lambda e: None, raising=False)
    monkeypatch.setattr(timing, "_event_elapsed", lambda a, b: 0.05, raising=False)
    polls = []  # the end event: complete at the third query

    def query(event):
        polls.append(event)
        now[0] += 1_000  # 1 us a query: the device is still busy with the timed call
        return len(polls) % 3 == 0

    syncs = []

    def sync():  # 7 us until the device is idle after the end event; then 2 us, what the host charges for one
        syncs.append(now[0])
        now[0] += 7_000 if len(syncs) % 2 else 2_000

    monkeypatch.setattr(timing, "_event_query", query, raising=False)
    monkeypatch.setattr(timing, "_c_sync", sync, raising=False)
    s = timing.Sampler(torch.device("cpu"), None)
    s.start = s.end = object()
    s.gate = SimpleNamespace(cap_ns=15_000, close=lambda cap: True, open=lambda: None)

    def slow_call(data):  # 30 us of host time per call
        now[0] += 30_000

    _, tail, _ = s.per_call(slow_call, None)
    assert s.unhidden_host_ns == 30_000 - 15_000
    assert tail == 7_000 and polls == [s.end] * 3  # neither the call's host time nor the polls count
    assert s.idle_sync_ns == 2_000 and len(syncs) == 2  # the second synchronize, of the idle device
    _, tail, _ = s.batched(slow_call, [None] * 5)
    assert s.unhidden_host_ns == (5 * 30_000 - 15_000) / 5
    assert tail == 7_000 / 5 and s.idle_sync_ns == 2_000 / 5
