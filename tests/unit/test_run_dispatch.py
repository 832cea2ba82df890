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

    def run_case(self, i, case, deadline):
        return CaseResult("leaderboard" if self.ranked else "benchmark", dict(case), self.verdict)


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
    assert _kinds(run.cases) == [("benchmark", 8)]
