"""Which cases each mode runs, and how case verdicts make a run's verdict and score (no process)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from harness.engine import verdicts
from harness.engine.modes import Mode
from harness.errors import UsageError
from harness.messages import Failed, Integrity
from harness.results import ERROR, FAIL, NOT_RUN, PASS, REJECTED, TIMEOUT, CaseResult, Stats

TESTS = [{"m": 1, "seed": 1}, {"m": 2, "seed": 2}]
BENCHES = [{"m": 8, "seed": 8}, {"m": 16, "seed": 16}, {"m": 32, "seed": 32}]
TASK = SimpleNamespace(
    tests=TESTS, benchmarks=BENCHES, test_timeout=11.0, benchmark_timeout=22.0, ranked_timeout=33.0, ranking_by="geom"
)


def _kinds(mode, ranked=False):
    return [(kind, case["m"]) for kind, case in verdicts.planned_cases(TASK, mode, ranked)]


def test_each_mode_plans_its_cases():
    tests = [("test", 1), ("test", 2)]
    timed = [("benchmark", 8), ("benchmark", 16), ("benchmark", 32)]
    assert _kinds(Mode.TEST) == tests
    assert _kinds(Mode.BENCHMARK) == timed
    assert _kinds(Mode.PROFILE) == timed
    assert _kinds(Mode.TEST_BENCHMARK) == tests + timed
    assert _kinds(Mode.LEADERBOARD, ranked=True) == tests + [("leaderboard", m) for _, m in timed]
    assert _kinds(Mode.LEADERBOARD, ranked=False) == tests + timed  # --no-defenses


def test_mode_properties_and_timeouts():
    assert [m for m in Mode if m.runs_tests] == [Mode.TEST, Mode.TEST_BENCHMARK, Mode.LEADERBOARD]
    assert [m for m in Mode if m.scored] == [Mode.BENCHMARK, Mode.TEST_BENCHMARK, Mode.LEADERBOARD]
    assert [m for m in Mode if m.ranked] == [Mode.LEADERBOARD]
    assert [m for m in Mode if m.tests_gate_benchmarks] == [Mode.TEST_BENCHMARK, Mode.LEADERBOARD]
    timeouts = {m: verdicts.first_timeout(TASK, m, ranked=m.ranked) for m in Mode}
    assert timeouts == {
        Mode.TEST: 11.0,
        Mode.BENCHMARK: 22.0,
        Mode.TEST_BENCHMARK: 11.0,
        Mode.LEADERBOARD: 33.0,
        Mode.PROFILE: 22.0,
    }
    assert verdicts.first_timeout(TASK, Mode.LEADERBOARD, ranked=False) == 11.0  # --no-defenses
    assert Mode.parse("test+benchmark") is Mode.TEST_BENCHMARK
    with pytest.raises(UsageError, match="unknown mode 'fast'; choose one of test, benchmark"):
        Mode.parse("fast")


def _case(verdict, kind="test", message=""):
    return CaseResult(kind, {"m": 1, "seed": 1}, verdict, message)


@pytest.mark.parametrize(
    "verdicts_in, expected",
    [
        ([PASS, PASS], PASS),
        ([PASS, FAIL, PASS], FAIL),
        ([FAIL, ERROR], ERROR),
        ([ERROR, TIMEOUT], TIMEOUT),
        ([TIMEOUT, REJECTED, FAIL], REJECTED),
        ([PASS, NOT_RUN], ERROR),  # a pass with cases not run is not a pass
        ([FAIL, NOT_RUN], FAIL),
        ([NOT_RUN], ERROR),
        ([], ERROR),
    ],
)
def test_run_verdict_is_the_worst_case(verdicts_in, expected):
    assert verdicts.run_verdict([_case(v) for v in verdicts_in]) == expected


def test_cases_after_a_failure_are_not_run_unless_the_import_failed():
    planned = verdicts.planned_cases(TASK, Mode.TEST_BENCHMARK, False)
    done = [_case(PASS), _case(TIMEOUT)]
    rest = verdicts.not_run_cases(planned, done, dict)
    assert [(c.kind, c.spec["m"], c.verdict) for c in rest] == [("benchmark", m, NOT_RUN) for m in (8, 16, 32)]
    assert verdicts.not_run_cases(planned, [CaseResult("import", {}, ERROR, "no module")], dict) == []
    assert verdicts.running_case(planned, done, lambda c: dict(c, seed=0)) == ("benchmark", {"m": 8, "seed": 0})
    assert verdicts.running_case(planned, [_case(PASS)] * 5, dict) == ("run", {})


def test_a_case_ends_rejected_for_a_reason_else_with_the_submissions_error():
    failed = Failed(error="ValueError: no", integrity=Integrity(), traceback="Traceback ...")
    ended = verdicts.end_case(_case(PASS, "benchmark"), failed, None, samples=[5.0, 7.0])
    assert (ended.verdict, ended.message, ended.extra["traceback"], ended.stats.runs) == (
        ERROR,
        "ValueError: no",
        "Traceback ...",
        2,
    )
    rejected = verdicts.end_case(_case(PASS, "benchmark"), failed, "tampered")
    assert (rejected.verdict, rejected.message, rejected.stats, rejected.extra) == (REJECTED, "tampered", None, {})


def test_summary_counts_verdicts_and_names_the_first_problem():
    cases = [_case(PASS), _case(FAIL, message="wrong at 3"), _case(ERROR, message="boom"), _case(NOT_RUN)]
    assert verdicts.summary(cases) == "1 pass, 1 fail, 1 error, 1 not_run; first problem: wrong at 3"
    assert verdicts.summary([_case(PASS)]) == "1 pass"


def _bench(mean_ns, verdict=PASS):
    case = _case(verdict, "benchmark")
    case.stats = Stats.from_samples([mean_ns - 1.0, mean_ns + 1.0])
    return case


def test_score_only_when_every_case_passed():
    cases = [_case(PASS), _bench(2000.0), _bench(8000.0)]
    assert math.isclose(verdicts.score(TASK, cases), 4.0)  # geometric mean of 2 us and 8 us
    assert verdicts.score(TASK, [_case(FAIL), _bench(2000.0)]) is None
    assert verdicts.score(TASK, [_bench(2000.0), _bench(8000.0, FAIL)]) is None
    assert verdicts.score(TASK, [_case(PASS)]) is None  # no benchmark case
    no_stats = _case(PASS, "benchmark")
    assert verdicts.score(TASK, [_bench(2000.0), no_stats]) is None
