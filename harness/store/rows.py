"""Rows read back from the store: runs and cases as dataclasses (what the leaderboard, history,
compare and export read), built from either backend's rows."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from harness.results import Stats


@dataclass
class RunRow:
    """One row of ``runs``: what the leaderboard, history and export read."""

    id: int
    task: str
    mode: str
    submission_path: str
    submission_sha256: str
    submission_name: str
    display_name: str
    device_name: str | None
    device_kind: str | None
    software: dict[str, Any]
    harness_version: str | None
    git_commit: str | None
    started_at: str
    finished_at: str | None
    wall_s: float | None
    verdict: str
    message: str
    score_us: float | None
    complete: bool


@dataclass
class CaseRow:
    run_id: int
    idx: int
    kind: str
    spec: dict[str, Any]
    verdict: str
    message: str = ""
    stats: Stats | None = None
    baseline_us: float | None = None


@dataclass
class Filter:
    clauses: list[str] = field(default_factory=list)
    params: list[Any] = field(default_factory=list)

    def add(self, clause: str, value: Any) -> None:
        self.clauses.append(clause)
        self.params.append(value)

    def sql(self) -> str:
        return (" WHERE " + " AND ".join(self.clauses)) if self.clauses else ""


def run_row(r: Any) -> RunRow:
    return RunRow(
        id=r["id"],
        task=r["task"],
        mode=r["mode"],
        submission_path=r["submission_path"],
        submission_sha256=r["submission_sha256"],
        submission_name=r["submission_name"],
        display_name=r["display_name"] or r["submission_name"],
        device_name=r["device_name"],
        device_kind=r["device_kind"],
        software=json.loads(r["software"] or "{}"),
        harness_version=r["harness_version"],
        git_commit=r["git_commit"],
        started_at=r["started_at"],
        finished_at=r["finished_at"],
        wall_s=r["wall_s"],
        verdict=r["verdict"],
        message=r["message"],
        score_us=r["score_us"],
        complete=bool(r["complete"]),
    )


def _nan_if_none(x: float | None) -> float:
    return float("nan") if x is None else x


def case_row(r: Any) -> CaseRow:
    stats = None
    if r["samples_ns"] is not None:
        stats = Stats(
            samples_ns=json.loads(r["samples_ns"]),
            runs=r["runs"],
            mean=_nan_if_none(r["mean_ns"]),
            std=_nan_if_none(r["std_ns"]),
            stderr=_nan_if_none(r["stderr_ns"]),
            median=_nan_if_none(r["median_ns"]),
            min=_nan_if_none(r["min_ns"]),
            max=_nan_if_none(r["max_ns"]),
        )
    return CaseRow(
        run_id=r["run_id"],
        idx=r["idx"],
        kind=r["kind"],
        spec=json.loads(r["spec"]),
        verdict=r["verdict"],
        message=r["message"],
        stats=stats,
        baseline_us=r["baseline_us"],
    )
