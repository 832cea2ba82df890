"""What ``Run`` executes for each mode matches its plan (``verdicts.planned_cases``): the worker, the
inputs and the benchmark loop are stand-ins here, so no process is started."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.engine import verdicts
from harness.engine.modes import Mode
from harness.engine.options import RunOptions
from harness.engine.run import Run
from harness.messages import Called, Failed, Integrity, Output, Profiled
from harness.results import ERROR, FAIL, PASS, REJECTED, CaseResult

TASK = SimpleNamespace(
    name="toy",
    tests=[{"m": 1, "seed": 1}, {"m": 2, "seed": 2}],
    benchmarks=[{"m": 8, "seed": 8}, {"m": 16, "seed": 16}],
    test_timeout=10.0,
    benchmark_timeout=20.0,
    ranked_timeout=30.0,
    ranking_by="geom",
)
OUT = Output("object", type="int")


class FakeSession:
    """Answers every call with one output and every profile with a table; ``fail_call`` makes the
    test case of that index raise in the submission."""

    def __init__(self, fail_call=None):
        self.fail_call, self.calls = fail_call, 0

    def request(self, phase, msg, deadline, what, reply, **expect):
        if msg.OP == "call":
            self.calls += 1
            if self.calls == self.fail_call:
                return Failed(error="ValueError: boom", integrity=Integrity())
            return Called(OUT, Integrity((), 1))
        assert msg.OP == "profile"
        return Profiled("table", Integrity((), 1))

    def rejection(self, reply):
        return None

    # a fresh worker for every block after the first (harness.engine.blocks.renew_worker)
    def renew(self, deadline):
        self.renewals = getattr(self, "renewals", 0) + 1

    starts_ahead = True  # each renewal's worker started while the block before it runs

    def start_next_ahead(self):
        self.started_ahead = getattr(self, "started_ahead", 0) + 1

    def load(self, deadline, what=""):
        return SimpleNamespace(ok=True)


class FakeInputs:
    def one(self, what, i, cases, deadline, fresh=False):
        return dict(cases[i]), f"{what} {i}", None, i


class FakeChecker:
    def __init__(self, ok=True):
        self.ok = ok

    def outputs(self, outputs):
        return outputs

    def check(self, data, out):
        return (True, "") if self.ok else (False, "wrong")


class FakeBenchmarks:
    def __init__(self, verdict=PASS):
        self.verdict = verdict

    def run_case(self, i, case, deadline, block=0, kernel_only=True, first=True, defer_check=False):
        self.blocks_seen = max(getattr(self, "blocks_seen", 0), block + 1)
        return CaseResult("leaderboard" if self.ranked else "benchmark", dict(case), self.verdict)

    def settle(self):
        return None  # no deferred check failed

    def read_clocks(self):
        return {"note": "not available on CPU"}

    def use_blocks(self, blocks):
        self.blocks = blocks


def _run(mode: Mode, session=None, checker=None, benchmarks=None) -> Run:
    run = Run(Path("sub.py"), TASK, mode, RunOptions(device="cpu", secret="s"))
    run.session = session or FakeSession()
    run.benchmarks = benchmarks or FakeBenchmarks()
    run.benchmarks.ranked = run.ctx.ranked
    run._run_cases(FakeInputs(), checker or FakeChecker(), deadline=1e12)
    return run


def _kinds(cases):
    return [(c.kind, c.spec["m"]) for c in cases]


@pytest.mark.parametrize("mode", list(Mode), ids=lambda m: m.value)
def test_each_mode_runs_what_it_plans(mode):
    run = _run(mode)
    assert _kinds(run.cases) == [(kind, case["m"]) for kind, case in verdicts.planned_cases(TASK, mode, mode.ranked)]
    assert all(c.verdict == PASS for c in run.cases)
    if mode is Mode.PROFILE:
        assert all(c.extra["profile_table"] == "table" for c in run.cases)


@pytest.mark.parametrize("mode", [Mode.TEST_BENCHMARK, Mode.LEADERBOARD], ids=lambda m: m.value)
def test_a_failed_test_skips_the_benchmarks(mode):
    run = _run(mode, checker=FakeChecker(ok=False))
    assert _kinds(run.cases) == [("test", 1), ("test", 2)] and {c.verdict for c in run.cases} == {FAIL}
    assert "benchmarks skipped: a test did not pass" in run.ctx.warnings
    rest = verdicts.not_run_cases(run.planned, run.cases, run.ctx.case_spec)
    assert [c.spec["m"] for c in rest] == [8, 16]


def test_a_test_the_submission_raised_in_is_an_error_and_the_other_tests_still_run():
    run = _run(Mode.TEST, session=FakeSession(fail_call=1))
    assert [(c.verdict, c.message) for c in run.cases] == [(ERROR, "ValueError: boom"), (PASS, "")]


def test_a_rejected_benchmark_stops_the_run():
    run = _run(Mode.BENCHMARK, benchmarks=FakeBenchmarks(REJECTED))
    assert _kinds(run.cases) == [("benchmark", 8), ("benchmark", 16)]
    assert [c.verdict for c in run.cases] == [REJECTED, "not_run"]


def test_a_ranked_run_times_every_shape_in_fresh_workers_block_after_block():
    session, benchmarks = FakeSession(), FakeBenchmarks()
    run = _run(Mode.LEADERBOARD, session=session, benchmarks=benchmarks)
    assert benchmarks.blocks == 3 and benchmarks.blocks_seen == 3  # the CPU's ranked default
    assert session.renewals == 2  # a fresh worker for blocks 2 and 3
    assert session.started_ahead == 2  # each started during the block before it, none after the last
    assert [r.index for r in run.blocks.records] == [0, 1, 2]
    assert all(sorted(r.order) == [0, 1] for r in run.blocks.records)


def test_a_rejection_in_the_first_block_ends_the_blocks():
    session, benchmarks = FakeSession(), FakeBenchmarks(REJECTED)
    run = _run(Mode.LEADERBOARD, session=session, benchmarks=benchmarks)
    assert benchmarks.blocks_seen == 1 and not getattr(session, "renewals", 0)
    assert sorted(c.verdict for c in run.cases if c.kind == "leaderboard") == ["not_run", REJECTED]


class ThrottledBenchmarks(FakeBenchmarks):
    def read_clocks(self):
        return {"sm_mhz": 1500, "temp_c": 88, "throttle": ["hw_thermal"]}


def test_a_block_measured_while_throttled_is_flagged():
    run = _run(Mode.LEADERBOARD, benchmarks=ThrottledBenchmarks())
    assert all(r.throttled == ["hw_thermal"] for r in run.blocks.records)
    assert any("measured while the GPU throttled" in w and "hw_thermal" in w for w in run.ctx.warnings)
    calm = _run(Mode.LEADERBOARD)
    assert not any(r.throttled for r in calm.blocks.records)
    assert not any("throttled" in w for w in calm.ctx.warnings)


def test_worker_restarts_extend_the_deadline(monkeypatch):
    import time as time_mod

    class SlowStart(FakeSession):
        def renew(self, deadline):
            clock[0] += 5.0  # each restart takes 5 s of the harness's own time

    clock = [1000.0]
    monkeypatch.setattr(time_mod, "monotonic", lambda: clock[0])
    run = Run(Path("sub.py"), TASK, Mode.LEADERBOARD, RunOptions(device="cpu", secret="s"))
    run.session, run.benchmarks = SlowStart(), FakeBenchmarks()
    run.benchmarks.ranked = True
    run._run_cases(FakeInputs(), FakeChecker(), deadline=1100.0)
    assert run.blocks.deadline == 1110.0  # two restarts of 5 s each
