"""Persisting L2: reset before every sample (harness.worker.persisting_l2); a submission that reserves
it is warned in benchmark mode and rejected in ranked runs. The driver calls need a GPU (tests marked
gpu); on the CPU they are no-ops, and the parent's decision is tested from the worker's report."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harness.api import RunOptions, run_submission
from harness.engine.context import RunContext
from harness.engine.device import device_info
from harness.engine.modes import Mode
from harness.engine.session import WorkerSession
from harness.messages import Loaded
from harness.protocol import ProtocolError
from harness.results import PASS, REJECTED
from harness.worker.persisting_l2 import PersistingL2, reserved
from tasks import load_task

ROOT = Path(__file__).resolve().parent.parent
MXFP4_SMALL = ROOT / "tests" / "fixtures" / "tasks" / "mxfp4_small" / "task.yml"
RAISED = {"limit": 0, "raised": 39 << 20, "window": 0}


def test_on_the_cpu_the_reset_is_a_no_op():
    l2 = PersistingL2(torch.device("cpu"))
    l2.reset()
    assert l2.report() == {} and l2.limit() is None and l2.window_bytes() == 0


def test_reserved_names_the_limit_and_the_window():
    assert reserved({}) is None and reserved(None) is None
    assert reserved({"limit": 0, "raised": 0, "window": 0}) is None
    assert "to 40894464 bytes" in reserved(RAISED)
    assert "access-policy window over 4096 bytes" in reserved({"limit": 0, "raised": 0, "window": 4096})
    assert reserved({"limit": "39MB", "raised": None, "window": 0}) is None  # malformed: nothing to report


@pytest.mark.parametrize("mode, verdict", [("benchmark", None), ("leaderboard", REJECTED)])
def test_the_parent_warns_in_benchmark_mode_and_rejects_in_ranked_runs(mode, verdict):
    device = torch.device("cpu")
    ctx = RunContext(
        load_task(str(MXFP4_SMALL)),
        Mode(mode),
        RunOptions(device="cpu", secret="s"),
        device,
        device_info(device),
        lambda _msg: None,
    )
    session = WorkerSession(ctx, None, 0)
    reason = session.rejection(_loaded(RAISED))
    if verdict == REJECTED:
        assert reason and "ranked runs reject it" in reason and "persisting-L2 limit" in reason
    else:
        assert reason is None
        assert any("persisting-L2 limit" in w for w in ctx.warnings), ctx.warnings
    assert session.rejection(_loaded({"limit": 0, "raised": 0, "window": 0})) is None


def _loaded(l2: dict) -> Loaded:
    return Loaded.decode({"timing_method": "t", "gated": False, "tampered": [], "threads": 1, "l2_persisting": l2}, [])


def test_a_malformed_report_is_a_malformed_reply():
    with pytest.raises(ProtocolError):
        _loaded({"limit": "39MB"})
    assert _loaded(RAISED).integrity.l2_persisting == RAISED


RESERVES = """
import ctypes

import torch

_cu = ctypes.CDLL("libcuda.so.1")


def _limit():
    value = ctypes.c_size_t(0)
    _cu.cuCtxGetLimit(ctypes.byref(value), 0x06)
    return value.value


def custom_kernel(data):
    print("L2LIMIT-ON-ENTRY", _limit(), flush=True)
    for mib in (39, 30, 24, 20, 16):       # the largest carve-out this device takes (its maximum varies)
        rc = _cu.cuCtxSetLimit(0x06, ctypes.c_size_t(mib << 20))
        print("L2LIMIT-TRY", mib, rc, flush=True)
        if rc == 0:
            break
    print("L2LIMIT-SET", _limit(), flush=True)
    return _correct_kernel(data)
"""


WINDOW = """
import ctypes

import torch

_cu = ctypes.CDLL("libcuda.so.1")


class _Window(ctypes.Structure):   # CUaccessPolicyWindow, at the start of a 64-byte CUstreamAttrValue
    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hitRatio", ctypes.c_float),
                ("hitProp", ctypes.c_int), ("missProp", ctypes.c_int)]


def custom_kernel(data):
    value = ctypes.create_string_buffer(64)
    w = _Window.from_buffer(value)
    w.base_ptr, w.num_bytes, w.hitRatio, w.hitProp, w.missProp = data[0].data_ptr(), 1 << 20, 1.0, 2, 1
    stream = torch.cuda.current_stream().cuda_stream
    print("WINDOW-SET", _cu.cuStreamSetAttribute(ctypes.c_void_p(stream), 1, value), flush=True)
    return _correct_kernel(data)
"""


def _reserving_submission(tmp_path, body=RESERVES):
    src = (ROOT / "submissions" / "torch_mxfp4.py").read_text().replace("def custom_kernel(", "def _correct_kernel(")
    path = tmp_path / "reserves_l2.py"
    path.write_text(src + "\n\n" + body)
    return path


@pytest.mark.gpu
def test_gpu_a_submission_that_reserves_persisting_l2_is_caught(tmp_path):
    sub = _reserving_submission(tmp_path)
    bench = run_submission(sub, str(MXFP4_SMALL), "benchmark", RunOptions(device="cuda", max_repeats=3))
    set_to = [int(ln.split()[1]) for ln in bench.stdout.splitlines() if ln.startswith("L2LIMIT-SET")]
    entries = [int(ln.split()[1]) for ln in bench.stdout.splitlines() if ln.startswith("L2LIMIT-ON-ENTRY")]
    # the attack ran when it raised the limit above what the first call found; the harness's reset brought
    # it down before every later call (the driver keeps a granule when set to 0: 11796480 bytes on the H200)
    assert set_to and min(set_to) > entries[0], (set_to, entries, bench.stdout[-2000:])
    assert len(entries) > 1 and min(entries[1:]) < min(set_to), (set_to, entries)  # a reset before a sample
    assert any("persisting-L2 limit" in w for w in bench.warnings), bench.warnings
    ranked = run_submission(
        sub, str(MXFP4_SMALL), "leaderboard", RunOptions(device="cuda", secret="l2-secret", max_repeats=3)
    )
    assert ranked.verdict == REJECTED, ranked.message
    assert any("persisting-L2 limit" in c.message for c in ranked.cases), [c.message for c in ranked.cases]


@pytest.mark.gpu
def test_gpu_an_honest_run_reports_no_persisting_l2():
    r = run_submission(
        ROOT / "submissions" / "torch_mxfp4.py",
        str(MXFP4_SMALL),
        "leaderboard",
        RunOptions(device="cuda", secret="l2-secret", max_repeats=3),
    )
    assert r.verdict == PASS, r.message
    assert not any("persisting" in w for w in r.warnings), r.warnings


@pytest.mark.gpu
def test_gpu_an_access_policy_window_on_the_current_stream_is_rejected(tmp_path):
    r = run_submission(
        _reserving_submission(tmp_path, WINDOW),
        str(MXFP4_SMALL),
        "leaderboard",
        RunOptions(device="cuda", secret="l2-secret", max_repeats=3),
    )
    assert "WINDOW-SET 0" in r.stdout, r.stdout[-2000:]  # the driver took the window (CUDA_SUCCESS)
    assert r.verdict == REJECTED and any("access-policy window" in c.message for c in r.cases), r.message


def test_integrity_watches_the_reset():
    """Shadowing the reset on the instance, or swapping the driver function it calls, is tampering."""
    import multiprocessing
    import types

    from harness.worker import originals

    persisting = PersistingL2(torch.device("cpu"))
    persisting._reset = object()  # stands in for the driver's cuCtxResetPersistingL2Cache
    sampler = types.SimpleNamespace(start=None, end=None, flush=None, gate=None, persisting=persisting)
    conn, _other = multiprocessing.Pipe()
    worker = types.SimpleNamespace(sampler=sampler, conn=conn, cfg=None)
    snap = originals.snapshot(worker)
    persisting.raised_bytes = 1 << 20  # moves by design
    assert originals.changed(snap, worker) == []
    persisting.reset = lambda: None
    assert originals.changed(snap, worker) == ["worker.sampler.persisting.reset"]
    del persisting.reset
    persisting._reset = lambda: 0
    assert originals.changed(snap, worker) == ["worker.sampler.persisting._reset"]
