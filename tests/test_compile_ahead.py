"""Compile ahead (harness.engine.compile_ahead): a file's first call on every shape made by parallel
workers after the run's worker started and before it imports the file, with public inputs only, none of
them alive when the run's own calls begin; a failure there is the run's worker's to report, a hang ends
the run at the first call's limit once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from harness.api import RunOptions, run_submission
from harness.engine import compile_ahead
from harness.engine.compile_cache import CacheEntry
from harness.results import ERROR, NOT_RUN, PASS, TIMEOUT
from tasks import load_task
from tests.helpers import FIX, LOGS_EVERY_CALL, MXFP4_SMALL, SECRET, cheat_with_correct_kernel


def _events(cache_root: Path) -> list[dict]:
    [log] = cache_root.glob("*/triton/events.jsonl")
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_a_ranked_run_compiles_ahead_on_public_inputs_and_imports_only_after_every_helper_ended(tmp_path):
    sub = cheat_with_correct_kernel(tmp_path, LOGS_EVERY_CALL, name="logs")
    cache = tmp_path / "cache"
    opts = RunOptions(device="cpu", secret=SECRET, max_repeats=3, compile_ahead="on", triton_cache_dir=str(cache))
    r = run_submission(sub, MXFP4_SMALL, "leaderboard", opts)
    assert r.verdict == PASS, r.message
    task = load_task(MXFP4_SMALL)
    shapes = {(c["m"], c["n"], c["k"]) for c in task.tests + task.benchmarks}
    assert r.compile_ahead is not None
    assert r.compile_ahead["shapes"] == len(shapes) == r.compile_ahead["compiled"], r.compile_ahead
    assert r.compile_ahead["failures"] == [] and not r.compile_ahead["timed_out"]
    assert r.phases_s is not None and "compile_ahead" in r.phases_s

    events = _events(cache)
    calls_by_pid: dict[int, int] = {}
    for e in events:
        if e["event"] == "call":
            calls_by_pid[e["pid"]] = calls_by_pid.get(e["pid"], 0) + 1
    ranked_pids = {pid for pid, n in calls_by_pid.items() if n > len(shapes)}  # the run's own workers (blocks)
    helpers = set(calls_by_pid) - ranked_pids
    assert helpers, f"no compile-ahead worker called the file: {calls_by_pid}"
    assert sum(calls_by_pid[p] for p in helpers) == len(shapes)
    # every helper had ended its calls before the run's first worker imported the file
    first_import = min(e["t"] for e in events if e["event"] == "import" and e["pid"] in ranked_pids)
    assert max(e["t"] for e in events if e["pid"] in helpers) < first_import
    # the helpers saw the cases' public inputs; the run's own calls the secret's
    public = {
        float(task.generate_input(dict(c), torch.device("cpu"))[0].float().sum()) for c in task.tests + task.benchmarks
    }
    helper_inputs = {e["a"] for e in events if e["event"] == "call" and e["pid"] in helpers}
    assert helper_inputs <= public, helper_inputs - public
    ranked_inputs = {e["a"] for e in events if e["event"] == "call" and e["pid"] in ranked_pids}
    assert not ranked_inputs & public, "the ranked run's inputs should derive from the secret"
    # the entry is marked: the next run of this file on a GPU would not compile ahead again
    [entry] = [p.parent.parent for p in cache.glob("*/triton/events.jsonl")]
    assert compile_ahead.marker(CacheEntry(str(entry), entry.name)).exists()


def test_auto_compiles_ahead_only_on_a_gpu_and_only_for_an_entry_not_marked(tmp_path):
    entry = CacheEntry(str(tmp_path / "key"), "key")
    assert compile_ahead.wanted("auto", gpu=True, entry=entry)
    assert compile_ahead.wanted("auto", gpu=True, entry=None)  # caches in the run's folder: empty every time
    assert not compile_ahead.wanted("auto", gpu=False, entry=entry)  # the interpreter compiles nothing
    assert compile_ahead.wanted("on", gpu=False, entry=entry)
    assert not compile_ahead.wanted("off", gpu=True, entry=entry)
    compile_ahead.marker(entry).touch()
    assert not compile_ahead.wanted("auto", gpu=True, entry=entry)
    assert not compile_ahead.wanted("on", gpu=False, entry=entry)  # compiled ahead once: a round's, say


def test_a_failure_while_compiling_ahead_is_left_to_the_run_which_reports_it(tmp_path):
    r = run_submission(
        FIX / "submissions" / "import_error.py", MXFP4_SMALL, "test", RunOptions(device="cpu", compile_ahead="on")
    )
    assert r.verdict == ERROR, r.message
    assert r.cases[0].kind == "import", [c.kind for c in r.cases]  # the run's own import, as without it
    assert r.compile_ahead is not None and r.compile_ahead["failures"], r.compile_ahead
    assert r.compile_ahead["compiled"] == 0


@pytest.mark.slow
def test_a_hang_while_compiling_ahead_ends_the_run_at_the_first_calls_limit_once(tmp_path):
    scale = 0.25  # the CPU's first-call budget, 20 s, becomes 5 s
    t0 = time.monotonic()
    r = run_submission(
        FIX / "submissions" / "hang.py",
        MXFP4_SMALL,
        "test",
        RunOptions(device="cpu", compile_ahead="on", timeout_scale=scale),
    )
    wall = time.monotonic() - t0
    assert r.verdict == TIMEOUT, r.message
    first = r.cases[0]
    assert first.kind == "compile_ahead" and first.verdict == TIMEOUT, first
    assert "per-call limit of 5.0 s" in first.message and "--compile-ahead off" in first.message, first.message
    task = load_task(MXFP4_SMALL)
    assert [c.verdict for c in r.cases[1:]] == [NOT_RUN] * len(task.tests)  # the run's worker never called it
    assert r.compile_ahead is not None and r.compile_ahead["timed_out"]
    assert wall < 5 + 20, f"took {wall:.1f} s: the hang was waited for twice?"


def test_a_file_the_scan_rejects_is_imported_by_no_compile_ahead_worker(tmp_path):
    pytest.importorskip("kernelguard")
    replays = LOGS_EVERY_CALL.replace(
        "def custom_kernel(data):",
        "_cache = {}\n\n\ndef custom_kernel(data):\n    key = data[0].data_ptr()\n"
        "    if key in _cache:\n        return _cache[key]\n    _cache[key] = _correct_kernel(data)",
    )
    sub = cheat_with_correct_kernel(tmp_path, replays, name="replays")
    cache = tmp_path / "cache"
    opts = RunOptions(
        device="cpu", secret=SECRET, compile_ahead="on", scan_policy="reject", triton_cache_dir=str(cache)
    )
    r = run_submission(sub, MXFP4_SMALL, "leaderboard", opts)
    assert r.verdict == "rejected" and [c.kind for c in r.cases] == ["scan"], r.message
    assert not list(cache.glob("*/triton/events.jsonl")), "a compile-ahead worker imported a rejected file"
    warned = run_submission(sub, MXFP4_SMALL, "leaderboard", RunOptions(**{**vars(opts), "scan_policy": "warn"}))
    assert warned.compile_ahead is not None and _events(cache), "the same file is imported where the scan only warns"


def test_a_sibling_worker_is_no_supervisors_stray_and_a_reused_id_is_one_again(tmp_path):
    from harness.engine.supervisor import Siblings, Supervisor
    from harness.worker.config import WorkerConfig

    cfg = WorkerConfig("s.py", ".", "cpu", None, 0, str(tmp_path / "out"), str(tmp_path / "err"))
    siblings = Siblings()
    sup = Supervisor(cfg, 1 << 30, siblings=siblings)  # its _before is empty: every child of ours is new
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert other.pid in {p.pid for p in sup._new_children(but=None)}  # a child it did not start: a stray
        siblings.pids.add(other.pid)  # what a sibling's fork does, under siblings.lock
        assert other.pid not in {p.pid for p in sup._new_children(but=None)}
        siblings.pids.clear()  # CompileAhead.close(), once they are reaped
        assert other.pid in {p.pid for p in sup._new_children(but=None)}
    finally:
        other.kill()
        other.wait()


TUNES_AND_STORES_IT = """
import json as _json
import os as _os

_STORED = _os.path.join(_os.environ["TRITON_CACHE_DIR"], "somekey", "_kernel.autotune.json")
with open(_os.path.join(_os.environ["TRITON_CACHE_DIR"], "imports.jsonl"), "a") as _f:
    _f.write(_json.dumps({"pid": _os.getpid(), "found_tuning": _os.path.exists(_STORED)}) + "\\n")


def custom_kernel(data):
    # what Triton's autotuner does with cache_results: the best config, measured here, kept on disk
    _os.makedirs(_os.path.dirname(_STORED), exist_ok=True)
    with open(_STORED, "w") as f:
        f.write(_json.dumps({"pid": _os.getpid()}))
    return _correct_kernel(data)
"""


def test_tuning_stored_while_compiling_ahead_is_deleted_before_the_run_imports_the_file(tmp_path):
    sub = cheat_with_correct_kernel(tmp_path, TUNES_AND_STORES_IT, name="tunes")
    cache = tmp_path / "cache"
    opts = RunOptions(device="cpu", max_repeats=3, compile_ahead="on", triton_cache_dir=str(cache), blocks=1)
    r = run_submission(sub, MXFP4_SMALL, "test+benchmark", opts)
    assert r.verdict == PASS, r.message
    assert r.compile_ahead is not None and r.compile_ahead["discarded_tunings"] == 1, r.compile_ahead
    [log] = cache.glob("*/triton/imports.jsonl")
    imports = [json.loads(line) for line in log.read_text().splitlines()]
    assert not imports[-1]["found_tuning"], "the run's worker found a tuning measured beside the others"
    [stored] = cache.glob("*/triton/somekey/_kernel.autotune.json")
    assert json.loads(stored.read_text())["pid"] not in {i["pid"] for i in imports[:-1]}  # the run's own, kept


@pytest.mark.parametrize(
    "shapes, cores, gpus, expected",
    [
        (10, 16, 1, 8),  # one GPU: half the cores, at most 8
        (6, 16, 1, 6),  # one worker a shape
        (10, 64, 8, 4),  # eight GPUs, each running a job: 8 cores each, half of them
        (10, 128, 8, 8),
        (10, 2, 1, 1),  # always one
        (10, 16, 16, 1),
    ],
)
def test_the_workers_take_half_of_one_gpus_share_of_the_cores(shapes, cores, gpus, expected):
    assert compile_ahead.worker_count(shapes, cores, gpus) == expected


def test_the_host_gpu_count_includes_gpus_hidden_from_this_process(monkeypatch):
    from harness.engine import device

    class FakeNvml:
        shut = False

        @staticmethod
        def nvmlInit():
            pass

        @staticmethod
        def nvmlDeviceGetCount():
            return 8

        @classmethod
        def nvmlShutdown(cls):
            cls.shut = True

    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml)
    assert device.host_gpu_count() == 8 and FakeNvml.shut
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed: torch's count, at least 1
    assert device.host_gpu_count() == max(1, torch.cuda.device_count())
