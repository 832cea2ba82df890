"""``export``: every stored run of a task, as JSON (whole results) or CSV (one row per run and case)."""

from __future__ import annotations

import argparse
import json
import sys

from harness.cli.options import READ_ONLY_EXIT_CODES, add_results_dir_argument
from harness.engine.preflight import check_output_file, check_store_exists
from harness.errors import UsageError
from harness.report.board import resolve_task
from harness.report.tables import format_rows
from harness.results import shape_label
from harness.store.database import open_store

EXIT_CODES = READ_ONLY_EXIT_CODES
EXAMPLES = """  python -m harness export --task mxfp4_mm --format json --output runs.json
  python -m harness export --task mxfp4_mm --format csv > runs.csv

JSON (version 1): {"version", "task", "runs": [run row fields..., "result": the stored RunResult or
null for an interrupted run]}; raw samples are in result.cases[].stats.samples_ns.
CSV: one row per run and case (an interrupted run has one row with empty case columns); times in ns,
unrounded; no raw samples (use JSON for those)."""

EXPORT_JSON_VERSION = 1  # 1 - first version
RUN_COLUMNS = [
    "run_id",
    "task",
    "mode",
    "name",
    "submission_path",
    "sha256",
    "device",
    "device_kind",
    "harness_version",
    "git_commit",
    "started_at",
    "finished_at",
    "wall_s",
    "verdict",
    "message",
    "score_us",
    "complete",
]
CASE_COLUMNS = [
    "case",
    "kind",
    "shape",
    "spec",
    "case_verdict",
    "case_message",
    "runs",
    "mean_ns",
    "std_ns",
    "stderr_ns",
    "median_ns",
    "min_ns",
    "max_ns",
    "baseline_us",
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", default=None, help="task name (default: every task in the store)")
    parser.add_argument("--format", choices=("json", "csv"), default="json")
    parser.add_argument("--output", "-o", default="-", metavar="FILE", help="file to write, or - for stdout (default)")
    add_results_dir_argument(parser)


def export_text(fmt: str, task: str | None = None, results_dir: str | None = None) -> str:
    with open_store(results_dir) as st:
        runs = st.runs(task=task)
        if not runs:  # exit 2, as the help says: no matching runs
            known = ", ".join(st.tasks()) or "none"
            raise UsageError(
                f"no stored runs{f' of task {task!r}' if task else ''} (tasks with runs: {known}); store runs "
                "first with 'python -m harness run FILE --task TASK --save' or 'run-all'"
            )
        if fmt == "json":
            items = [dict(vars(r), result=st.result_dict(r.id)) for r in runs]
            return (
                json.dumps(
                    {"version": EXPORT_JSON_VERSION, "task": task, "runs": items},
                    indent=2,
                    sort_keys=True,
                    allow_nan=False,
                )
                + "\n"
            )
        cases = st.cases(r.id for r in runs)
    rows = []
    for r in runs:
        base = [
            r.id,
            r.task,
            r.mode,
            r.display_name,
            r.submission_path,
            r.submission_sha256,
            r.device_name,
            r.device_kind,
            r.harness_version,
            r.git_commit,
            r.started_at,
            r.finished_at,
            r.wall_s,
            r.verdict,
            r.message,
            r.score_us,
            int(r.complete),
        ]
        if not cases.get(r.id):  # an interrupted run: one row, the case columns empty
            rows.append(base + [None] * len(CASE_COLUMNS))
        for c in cases.get(r.id) or []:
            s = c.stats
            nums = [s.runs, s.mean, s.std, s.stderr, s.median, s.min, s.max] if s else [None] * 7
            rows.append(
                base
                + [c.idx, c.kind, shape_label(c.spec), json.dumps(c.spec, sort_keys=True), c.verdict, c.message]
                + [None if isinstance(v, float) and v != v else v for v in nums]
                + [c.baseline_us]
            )
    return format_rows(RUN_COLUMNS + CASE_COLUMNS, rows, "csv")


def run(args: argparse.Namespace) -> int:
    task = resolve_task(args.task)[0] if args.task else None
    check_store_exists(args.results_dir)
    if args.output != "-":
        check_output_file(args.output, "--output")
    text = export_text(args.format, task, args.results_dir)
    if args.output == "-":
        sys.stdout.write(text)
        return 0
    try:
        with open(args.output, "w", encoding="utf-8", newline="") as f:
            f.write(text)
    except OSError as exc:
        raise UsageError(f"cannot write {args.output}: {exc}; choose another --output") from exc
    print(f"wrote {args.output}", file=sys.stderr)
    return 0
