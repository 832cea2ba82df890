"""``python -m harness tasks``: the tasks this harness knows, with shapes and targets."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.cli.options import READ_ONLY_EXIT_CODES
from harness.errors import UsageError
from harness.report.tables import format_rows

if TYPE_CHECKING:
    from tasks import Task

EXIT_CODES = READ_ONLY_EXIT_CODES
EXAMPLES = """  python -m harness tasks
  python -m harness tasks mxfp4_mm          # its description, shapes and a minimal correct submission
  python -m harness tasks nvfp4_gemm:small  # the small-shape copy for quick CPU checks
  python -m harness tasks --json
"""

DOCS_DIR = Path(__file__).resolve().parents[2] / "docs" / "tasks"
_FENCE = re.compile(r"^## A minimal correct submission\n.*?^```python\n(.*?)^```$", re.M | re.S)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "task",
        nargs="?",
        help="one task (a name, NAME:small, or a task.yml path): its description, "
        "shapes and a minimal correct submission",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def minimal_submission(task_name: str) -> str | None:
    """The minimal correct submission that docs/tasks/<task>.md shows, or None."""
    doc = DOCS_DIR / f"{task_name}.md"
    if not doc.is_file():
        return None
    m = _FENCE.search(doc.read_text(encoding="utf-8"))
    return m.group(1) if m else None


def _load(name: str) -> Task:
    from tasks import TaskSpecError, load_task

    try:
        return load_task(name, import_code=False)  # a listing: no torch
    except TaskSpecError as exc:
        raise UsageError(str(exc)) from exc


def _one_task(t: Task, as_json: bool) -> int:
    from tasks.registry import small_copy_name

    implements = t.compat_dir.parent.name
    example = minimal_submission(implements)
    if as_json:
        print(
            json.dumps(
                dict(
                    _summary(t),
                    description=t.description,
                    implements=implements,
                    docs=f"docs/tasks/{implements}.md",
                    minimal_submission=example,
                ),
                indent=2,
                sort_keys=True,
            )
        )
        return 0
    print(_block(t))
    print("\n" + t.description.rstrip())
    small = small_copy_name(t.name)
    print(f"\ncontract: docs/tasks/{implements}.md" + (f"; quick CPU check: --task {small}" if small else ""))
    if example:
        print(f"\nminimal correct submission (python -m harness run sub.py --task {small or t.name} --mode test):\n")
        print(example.rstrip())
    return 0


def _summary(t: Task) -> dict[str, Any]:
    return {
        "name": t.name,
        "target_gpu": t.target_gpu,
        "ranking_by": t.ranking_by,
        "timing_protocol": t.timing_protocol,
        "rtol": t.rtol,
        "atol": t.atol,
        "tests": t.tests,
        "benchmarks": t.benchmarks,
        "baseline_label": t.baseline_label,
        "baseline_us": t.baseline_us,
    }


def _block(t: Task) -> str:
    rows = [["test", " ".join(f"{k}={v}" for k, v in c.items()), "-"] for c in t.tests]
    rows += [
        [
            "benchmark",
            " ".join(f"{k}={v}" for k, v in c.items()),
            f"{t.baseline_for(c):.3f}" if t.baseline_for(c) is not None else "-",
        ]
        for c in t.benchmarks
    ]
    return (
        f"{t.name}: target {t.target_gpu}; ranking {t.ranking_by}; protocol {t.timing_protocol}"
        f"{f' ({t.inputs_per_measurement} inputs per measurement)' if t.inputs_per_measurement > 1 else ''};"
        f" rtol={t.rtol} atol={t.atol}; timeouts test/benchmark/ranked "
        f"{t.test_timeout:g}/{t.benchmark_timeout:g}/{t.ranked_timeout:g} s\n"
        + format_rows(["kind", "case", f"baseline us ({t.baseline_label or 'none'})"], rows).rstrip("\n")
    )


def run(args: argparse.Namespace) -> int:
    from tasks import list_tasks, load_task

    if args.task:
        return _one_task(_load(args.task), args.json)
    loaded = [load_task(name, import_code=False) for name in list_tasks()]  # a listing: no torch
    if args.json:
        print(json.dumps([_summary(t) for t in loaded], indent=2, sort_keys=True))
        return 0
    print("\n\n".join(_block(t) for t in loaded))
    print(
        "\n(one task in full, with a minimal submission: python -m harness tasks TASK; small copies for quick "
        "CPU checks: mxfp4_mm:small, nvfp4_gemm:small)",
        file=sys.stderr,
    )
    return 0
