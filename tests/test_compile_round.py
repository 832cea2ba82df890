"""Compile rounds (harness.engine.compile_round): with the serial executor, the new files of a run-all
are compiled ahead together before the first job, none of their code runs while a job runs, each file's
workers reach its own compile-cache entry only, and nothing a round meets decides a verdict."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch

from harness.engine import compile_ahead
from harness.engine.compile_cache import CacheEntry, isolation_possible
from harness.engine.compile_round import share_workers
from harness.engine.folder import run_folder
from harness.engine.options import RunOptions
from harness.results import PASS, TIMEOUT
from tasks import load_task
from tests.helpers import FIX, LOGS_EVERY_CALL, MXFP4_SMALL, SECRET, cheat_with_correct_kernel

needs_isolation = pytest.mark.skipif(not isolation_possible(), reason="needs Landlock (no compile cache without it)")


@pytest.mark.parametrize(
    "shapes, cores, expected",
    [
        ([10, 10], 16, [8, 8]),
        ([10] * 10, 16, [2] * 10),  # rounded up: the round waits for its slowest file
        ([2, 10], 16, [2, 10]),  # one worker a shape at most
        ([3, 3, 3], 2, [1, 1, 1]),  # at least one a file
        ([4], 16, [4]),
    ],
)
def test_the_cores_are_shared_by_shapes_per_worker(shapes, cores, expected):
    assert share_workers(shapes, cores) == expected


def _options(cache: Path, **kw) -> RunOptions:
    kw = {"compile_ahead": "on", **kw}
    return RunOptions(device="cpu", secret=SECRET, max_repeats=3, triton_cache_dir=str(cache), **kw)


def _events(entry: Path) -> list[dict]:
    log = entry / "triton" / "events.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@needs_isolation
def test_a_round_compiles_every_new_file_before_the_first_job_and_the_jobs_compile_nothing_ahead(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    for i in range(3):  # byte-different copies: three entries
        cheat_with_correct_kernel(subs, LOGS_EVERY_CALL + f"\n# copy {i}\n", name=f"copy{i}")
    cache = tmp_path / "cache"
    report = run_folder(subs, MXFP4_SMALL, "leaderboard", _options(cache), results_dir=str(tmp_path / "store"))

    assert [e.result.verdict for e in report.entries] == [PASS] * 3, [e.result.message for e in report.entries]
    [round_] = report.compile_rounds
    assert sorted(round_.files) == sorted(round_.compiled) == ["copy0.py", "copy1.py", "copy2.py"], round_
    assert all(e.result.compile_ahead is None for e in report.entries), "a job compiled ahead again"

    task = load_task(MXFP4_SMALL)
    cases = task.tests + task.benchmarks
    shapes = {(c["m"], c["n"], c["k"]) for c in cases}
    public = {float(task.generate_input(dict(c), torch.device("cpu"))[0].float().sum()) for c in cases}
    entries = [log.parent.parent for log in cache.glob("*/triton/events.jsonl")]  # the harness's own entry aside
    assert len(entries) == 3
    round_calls, job_imports = [], []
    for entry in entries:
        events = _events(entry)
        calls = [e for e in events if e["event"] == "call"]
        mine = [e for e in calls if e["a"] in public]  # the round's workers: public inputs only
        assert len(mine) == len(shapes), f"{entry.name}: the round called {len(mine)} of {len(shapes)} shapes"
        job_pids = {e["pid"] for e in calls if e["a"] not in public}  # the job's workers: the secret's
        assert job_pids and not job_pids & {e["pid"] for e in mine}
        round_calls += [e["t"] for e in mine]
        job_imports += [e["t"] for e in events if e["event"] == "import" and e["pid"] in job_pids]
        assert compile_ahead.marker(CacheEntry(str(entry), entry.name)).exists()
    # nothing of any file ran in the round once the first job's worker had imported its file
    assert max(round_calls) < min(job_imports)


ATTACKS_ANOTHER_ENTRY = """
import os as _os

_VICTIM = __VICTIM__


def custom_kernel(data):
    outcome = "planted"
    try:
        with open(_os.path.join(_VICTIM, "planted.txt"), "w") as f:
            f.write("planted by the attacker")
    except OSError as exc:
        outcome = type(exc).__name__
    with open(_os.path.join(_os.environ["TRITON_CACHE_DIR"], "attempts.txt"), "a") as f:
        f.write(outcome + "\\n")
    return _correct_kernel(data)
"""


@needs_isolation
def test_a_file_in_a_round_cannot_write_into_another_files_entry(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    victim = cheat_with_correct_kernel(subs, LOGS_EVERY_CALL, name="b_victim")
    cache = tmp_path / "cache"
    # the victim's entry exists before the round (a run without compile-ahead), so the attacker can name it
    from harness.api import run_submission

    first = run_submission(victim, MXFP4_SMALL, "test", _options(cache, compile_ahead="off"))
    assert first.verdict == PASS, first.message
    [victim_entry] = [log.parent.parent for log in cache.glob("*/triton/events.jsonl")]
    attacker = cheat_with_correct_kernel(
        subs, ATTACKS_ANOTHER_ENTRY.replace("__VICTIM__", repr(str(victim_entry / "triton"))), name="a_attacker"
    )
    report = run_folder(subs, MXFP4_SMALL, "test", _options(cache), results_dir=str(tmp_path / "store"))

    [round_] = report.compile_rounds
    assert sorted(round_.files) == [attacker.name, victim.name], round_  # side by side in one round
    [log] = cache.glob("*/triton/attempts.txt")
    attempts = log.read_text().split()
    assert attempts and set(attempts) == {"PermissionError"}, attempts  # it tried, in the round and its job
    assert not (victim_entry / "triton" / "planted.txt").exists()


@needs_isolation
@pytest.mark.slow
def test_a_file_that_hangs_in_a_round_is_not_marked_and_its_job_ends_as_timeout(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "a_hang.py").write_text((FIX / "submissions" / "hang.py").read_text())
    good = cheat_with_correct_kernel(subs, LOGS_EVERY_CALL, name="b_good")
    cache = tmp_path / "cache"
    t0 = time.monotonic()
    report = run_folder(
        subs, MXFP4_SMALL, "test", _options(cache, timeout_scale=0.25), results_dir=str(tmp_path / "store")
    )
    wall = time.monotonic() - t0
    [round_] = report.compile_rounds
    assert round_.compiled == [good.name] and "a_hang.py" in round_.left, round_
    assert round_.wall_s < 2 * 5 + 5, f"the round waited {round_.wall_s:.1f} s for a hang (limit 5 s a call)"
    verdicts = {e.path.name: e.result for e in report.entries}
    assert verdicts["a_hang.py"].verdict == TIMEOUT, verdicts["a_hang.py"].message
    assert verdicts["a_hang.py"].compile_ahead is not None  # its own job compiled ahead again and met the hang
    assert verdicts["b_good.py"].verdict == PASS and verdicts["b_good.py"].compile_ahead is None
    assert wall < 60, f"run-all took {wall:.1f} s"


@needs_isolation
def test_a_file_the_scan_rejects_runs_in_no_round(tmp_path):
    pytest.importorskip("kernelguard")
    subs = tmp_path / "subs"
    subs.mkdir()
    replays = LOGS_EVERY_CALL.replace(
        "def custom_kernel(data):",
        "_cache = {}\n\n\ndef custom_kernel(data):\n    key = data[0].data_ptr()\n"
        "    if key in _cache:\n        return _cache[key]\n    _cache[key] = _correct_kernel(data)",
    )
    cheat = cheat_with_correct_kernel(subs, replays, name="a_replays")
    good = cheat_with_correct_kernel(subs, LOGS_EVERY_CALL, name="b_good")
    cache = tmp_path / "cache"
    report = run_folder(
        subs, MXFP4_SMALL, "leaderboard", _options(cache, scan_policy="reject"), results_dir=str(tmp_path / "store")
    )
    [round_] = report.compile_rounds
    assert round_.files == round_.compiled == [good.name], round_
    verdicts = {e.path.name: e.result for e in report.entries}
    assert verdicts[cheat.name].verdict == "rejected" and [c.kind for c in verdicts[cheat.name].cases] == ["scan"]
    assert verdicts[good.name].verdict == PASS, verdicts[good.name].message
    assert len(list(cache.glob("*/triton/events.jsonl"))) == 1, "the rejected file ran somewhere"
