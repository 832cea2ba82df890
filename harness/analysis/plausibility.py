"""Is a measured case believable? Pure functions on its samples (no device, no submission).

- ``implausible``: a reason the time cannot be honest: below the physical floor of the device, the
  device's own clock seeing more time around the call than the events (the events were re-recorded or
  moved), or the host still waiting for the device long after the end event (work escaped the events:
  another stream, a thread). In ranked runs such a case is rejected; otherwise it is a warning.
- ``noise_warnings``: why a figure may not be reliable, and what to do.
- ``host_bound_warnings``: when the score measures the host's launch path rather than the GPU.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from harness.results import Stats

ESCAPE_MIN_NS = 20e3  # a sample's tail beyond the calibrated gap that always counts as escaped work
ESCAPE_FRACTION = 0.5  # ... or beyond this fraction of the median sample, whichever is larger
# The device clock's window around the events (gated samples) is free of host jitter: tighter limits
# where the gate held for most samples; where it opened by itself (host time past its cap) the window
# also holds the host's launch of the second timestamp kernel, and the tail check's limit applies.
MOVED_MIN_NS = 3e3
MOVED_FRACTION = 0.05
ESCAPED_WORK = "work escaped the timed region"


def device_clock_excess_ns(
    stats: Stats,
    windows_ns: Sequence[float | None],
    held: Sequence[bool | None],
    window_gap_ns: dict,
    inputs_per_sample: int = 1,
) -> float | None:
    """Median over the samples of (device clock window - event time - the honest calibration for the
    sample's regime, the gate held or opened by itself); about 0 for an honest call. None without
    windows and calibrations for more than half the samples. Samples and windows are per input; the
    calibration, a constant per sample, is shared by its ``inputs_per_sample`` inputs (batched timing)."""
    window_gap_ns = {k: v / inputs_per_sample for k, v in window_gap_ns.items() if v is not None}
    excess = [
        w - s - window_gap_ns["held" if h else "opened"]
        for w, s, h in zip(windows_ns, stats.samples_ns, held)
        if w is not None and window_gap_ns.get("held" if h else "opened") is not None
    ]
    if len(excess) * 2 <= len(stats.samples_ns):
        return None
    return statistics.median(excess)


def tail_excess_ns(tails_ns: Sequence[float], gap_ns: float, inputs_per_sample: int = 1) -> float | None:
    """The escaped-work check's figure: the median per input of the samples' tails beyond the tail of a
    trivial honest call (``gap_ns``, per sample); None without tails."""
    return statistics.median(tails_ns) - gap_ns / inputs_per_sample if tails_ns else None


def implausible(
    stats: Stats,
    tails_ns: Sequence[float],
    gap_ns: float,
    floor_ns: float | None,
    gpu: bool,
    windows_ns: Sequence[float | None] = (),
    held: Sequence[bool | None] = (),
    window_gap_ns: dict | None = None,
    inputs_per_sample: int = 1,
    idle_syncs_ns: Sequence[float | None] = (),
    device_tails_ns: Sequence[float | None] = (),
) -> str | None:
    """``tails_ns``: per sample, the host time from the end event seen complete to the device idle
    (``harness.worker.sampler``), and ``gap_ns`` its median for a trivial honest call;
    ``windows_ns``: per sample, the device clock's time from just before the start event to just
    after the end event (None where not read); ``held``: per sample, whether the launch gate held
    until the host had enqueued everything; ``window_gap_ns``: {"held", "opened"}: what the window
    exceeds the events by for an honest trivial call in each case, measured before the import.
    Samples, tails and windows are per input (a batched sample's divided by its ``inputs_per_sample``
    inputs); ``gap_ns`` and ``window_gap_ns`` are per sample, and are divided the same way.
    ``idle_syncs_ns``: per sample (per input), a second synchronize right after the tail's: named in the
    escaped-work finding, it tells a slow host (both long) from work left running (the tail alone);
    ``device_tails_ns``: per sample (per input), the device clock's time from the end stamp until every
    SM had room again, also named: a kernel left running lengthens it until it ends, the host does not.
    Neither decides: a thread of the submission can lengthen the one, and side-stream work made of short
    kernels leaves the other at an honest call's figure (docs/security.md)."""
    if floor_ns is not None and stats.mean < floor_ns:
        return (
            f"measured {stats.mean / 1e3:.3f} us is below the physical floor of {floor_ns / 1e3:.3f} us "
            "(datasheet bandwidth and matrix peak): impossible, so not ranked"
        )
    excess = device_clock_excess_ns(stats, windows_ns, held, window_gap_ns or {}, inputs_per_sample) if gpu else None
    if excess is not None:
        limit = MOVED_MIN_NS if sum(map(bool, held)) * 2 > len(stats.samples_ns) else ESCAPE_MIN_NS
        if excess > max(limit, MOVED_FRACTION * stats.median):
            return (
                f"the device's own clock saw {excess / 1e3:.1f} us more per call than the timing events: "
                "the events were re-recorded or moved, not the work timed"
            )
    escaped = tail_excess_ns(tails_ns, gap_ns, inputs_per_sample) if gpu else None
    if escaped is not None and escaped > max(ESCAPE_MIN_NS, ESCAPE_FRACTION * stats.median):
        finding = [
            f"the device was still busy {escaped / 1e3:.1f} us per call after the end event, beyond the "
            f"normal gap: {ESCAPED_WORK} (another stream or thread)"
        ]
        idle, device = median_measured(idle_syncs_ns), median_measured(device_tails_ns)
        if idle is not None:
            finding.append(f"a second synchronize right after, of the idle device, took {idle / 1e3:.1f} us")
        if device is not None:
            finding.append(f"by the device's clock every SM was free {device / 1e3:.1f} us after the end")
        return "; ".join(finding)
    return None


def escaped_work(reason: str | None) -> bool:
    """Whether ``reason`` (from :func:`implausible`) is the escaped-work check's. It is the one finding
    that the host alone may produce: when it measured the whole host wall time of a sample, a stretch of
    slow host wake-ups (seen on an H100 host, 21-28 us a call in one block of an honest run) looked like
    work that ran outside the events. It now measures only the tail after the end event, but a ranked
    run still measures such a block again before it rejects (``harness.engine.blocks``)."""
    return reason is not None and ESCAPED_WORK in reason


# CPU timings (host clock, shared cores, no clock control) spread far more than GPU ones: their limits
# are wider, and the advice differs (more samples do not make a loaded CPU quiet).
UNSTABLE_REL_ERR = {True: 0.01, False: 0.10}  # by gpu
OUTLIER_RATIO = {True: 2.0, False: 10.0}


def noise_warnings(stats: Stats, gpu: bool, strict_per_call: bool) -> list[str]:
    """Why a figure may not be reliable, and what to do; on the CPU at most one line per case."""
    unstable = stats.relative_error > UNSTABLE_REL_ERR[gpu]
    outliers = stats.min > 0 and stats.max / stats.min > OUTLIER_RATIO[gpu]
    if not gpu:
        if not (unstable or outliers):
            return []
        return [
            f"noisy CPU timing: the standard error is {100 * stats.relative_error:.1f}% of the mean and the "
            f"slowest of {stats.runs} samples {stats.max / stats.min if stats.min > 0 else float('inf'):.1f}x "
            "the fastest (shared cores, no clock control); compare medians, and time on a GPU for figures "
            "that mean something"
        ]
    out = []
    if unstable:
        out.append(
            f"unstable: the standard error is {100 * stats.relative_error:.1f}% of the mean; close other "
            "work on this device or raise --max-repeats and --max-time"
        )
    if outliers:
        out.append(
            f"outliers: the slowest sample is {stats.max / stats.min:.1f}x the fastest "
            "(clock changes or interference); the median is the more robust figure"
        )
    if strict_per_call and stats.mean < 5e3:
        out.append("shorter than 5 us: per-call launch overhead dominates this figure")
    return out


def median_measured(per_sample: Sequence[float | None]) -> float | None:
    """Median over the samples of a figure not every sample has (None where it was not measured), per
    input; None when measured on half the samples or fewer (on the CPU: never). The host's launch time
    that the launch gate did not hide (all of it without a gate) is one (``unhidden_host_ns``)."""
    measured = [u for u in per_sample if u is not None]
    return statistics.median(measured) if measured and len(measured) * 2 > len(per_sample) else None


def host_bound_warnings(unhidden_ns: float | None, kernel_only_ns: float | None) -> list[str]:
    """When the host time the events saw (:func:`unhidden_host_ns`) exceeds the kernel-only time, the
    GPU waited for the host: the figure measures the submission's Python launch path more than its
    kernels (and moves with the host's jitter)."""
    if unhidden_ns is None or not kernel_only_ns or unhidden_ns <= kernel_only_ns:
        return []
    return [
        f"host-bound: launching a call took {unhidden_ns / 1e3:.1f} us of host time that nothing hid, more "
        f"than its {kernel_only_ns / 1e3:.1f} us of kernel-only time, so the GPU waited for the host; cut "
        "the Python work per call (fewer launches, launch arguments prepared once per shape)"
    ]
