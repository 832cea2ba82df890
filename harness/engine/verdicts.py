"""Which cases a mode runs, how a case and a run end, and the run's score."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from harness.analysis.ranking import RankRule, ShapeTime
from harness.analysis.ranking import score as rank_score
from harness.engine.modes import Mode
from harness.messages import Failed
from harness.results import ERROR, NOT_RUN, PASS, REJECTED, CaseResult, Stats, shape_label, worst_verdict
from tasks.registry import Task

Case = dict[str, Any]
Planned = list[tuple[str, Case]]  # (kind, case) in the order the run takes them
CaseSpec = Callable[[Case], Case]


def planned_cases(task: Task, mode: Mode, ranked: bool) -> Planned:
    """(kind, case) of every case the mode runs, in order: tests, then the benchmark shapes (timed, or
    profiled in the profile mode); timed cases are of kind "leaderboard" in ranked runs."""
    tests = [("test", c) for c in task.tests] if mode.runs_tests else []
    timed = mode.runs_benchmarks or mode is Mode.PROFILE
    kind = "leaderboard" if ranked else "benchmark"
    return tests + ([(kind, c) for c in task.benchmarks] if timed else [])


def first_timeout(task: Task, mode: Mode, ranked: bool) -> float:
    """Seconds for the part of the run that starts with the import. A leaderboard run without defenses
    (measurement only) has the test timeout, like test+benchmark."""
    return (mode if ranked or not mode.ranked else Mode.TEST_BENCHMARK).first_timeout(task)


def not_run_cases(planned: Planned, done: list[CaseResult], case_spec: CaseSpec) -> list[CaseResult]:
    """The planned cases after ``done``, as NOT_RUN (none when the scan rejected the submission or its
    import failed: nothing could run; all of them after a compile-ahead timeout)."""
    if done and done[0].kind in ("scan", "import"):
        return []
    ran = [c for c in done if c.kind != "compile_ahead"]  # not a planned case (harness.engine.compile_ahead)
    return [
        CaseResult(kind, case_spec(case), NOT_RUN, "not run: an earlier case ended the run")
        for kind, case in planned[len(ran) :]
    ]


def running_case(planned: Planned, done: list[CaseResult], case_spec: CaseSpec) -> tuple[str, Case]:
    """(kind, spec) of the case that was running when the worker failed."""
    if len(done) < len(planned):
        kind, case = planned[len(done)]
        return kind, case_spec(case)
    return "run", {}


def tracebacks(reply: Failed) -> dict[str, str]:
    """A failed reply's tracebacks: the submission's own frames, and every frame (shown with --verbose)."""
    return {"traceback": reply.traceback, "traceback_full": reply.traceback_full}


def end_case(result: CaseResult, reply: Any, reason: str | None, samples: Sequence[float] = ()) -> CaseResult:
    """A case the worker's reply ended: rejected for ``reason``, else (``reply`` is then a
    ``messages.Failed``) the submission's error."""
    if reason:
        result.verdict, result.message = REJECTED, reason
    else:
        result.verdict, result.message = ERROR, reply.error
        result.extra.update(tracebacks(reply))
    if samples:
        result.stats = Stats.from_samples(samples)
    return result


def run_verdict(cases: list[CaseResult]) -> str:
    """The worst verdict of the cases that ran; ERROR when none ran, or a PASS with cases not run."""
    ran = [c.verdict for c in cases if c.verdict != NOT_RUN]
    verdict = worst_verdict(ran) if ran else ERROR
    if any(c.verdict == NOT_RUN for c in cases) and verdict == PASS:
        verdict = ERROR
    return verdict


def summary(cases: Sequence[CaseResult]) -> str:
    counts: dict[str, int] = {}
    for c in cases:
        counts[c.verdict] = counts.get(c.verdict, 0) + 1
    first_bad = next((c for c in cases if c.verdict not in (PASS, NOT_RUN)), None)
    text = ", ".join(f"{n} {v}" for v, n in counts.items())
    return f"{text}; first problem: {first_bad.message}" if first_bad else text


def score(task: Task, cases: Sequence[CaseResult]) -> float | None:
    """The task's ranking rule over benchmark means, in microseconds; None unless every case passed."""
    bench = [c for c in cases if c.kind in ("benchmark", "leaderboard")]
    timed = [(c.spec, c.stats) for c in bench if c.stats is not None]
    if not bench or any(c.verdict != PASS for c in cases) or len(timed) < len(bench):
        return None
    shapes = [ShapeTime(shape_label(spec), stats.mean / 1e3, stats.stderr / 1e3) for spec, stats in timed]
    return rank_score(shapes, RankRule(task.ranking_by)).value_us
