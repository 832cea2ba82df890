"""``python -m harness tasks``: the tasks this harness knows, with shapes and targets."""
from __future__ import annotations

import json

from harness.cli.options import READ_ONLY_EXIT_CODES
from harness.report.tables import format_rows

EXIT_CODES = READ_ONLY_EXIT_CODES
EXAMPLES = """  python -m harness tasks
  python -m harness tasks --json
"""


def add_arguments(p) -> None:
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args) -> int:
    from tasks import list_tasks, load_task
    loaded = [load_task(name) for name in list_tasks()]
    if args.json:
        print(json.dumps([{"name": t.name, "target_gpu": t.target_gpu, "ranking_by": t.ranking_by,
                           "timing_protocol": t.timing_protocol, "rtol": t.rtol, "atol": t.atol,
                           "tests": t.tests, "benchmarks": t.benchmarks, "baseline_label": t.baseline_label,
                           "baseline_us": t.baseline_us} for t in loaded], indent=2, sort_keys=True))
        return 0
    blocks = []
    for t in loaded:
        rows = [["test", " ".join(f"{k}={v}" for k, v in c.items()), "-"] for c in t.tests]
        rows += [["benchmark", " ".join(f"{k}={v}" for k, v in c.items()),
                  f"{t.baseline_for(c):.3f}" if t.baseline_for(c) is not None else "-"] for c in t.benchmarks]
        blocks.append(f"{t.name}: target {t.target_gpu}; ranking {t.ranking_by}; protocol {t.timing_protocol}"
                      f"{f' ({t.inputs_per_measurement} inputs per measurement)' if t.inputs_per_measurement > 1 else ''};"
                      f" rtol={t.rtol} atol={t.atol}; timeouts test/benchmark/ranked "
                      f"{t.test_timeout:g}/{t.benchmark_timeout:g}/{t.ranked_timeout:g} s\n"
                      + format_rows(["kind", "case", f"baseline us ({t.baseline_label or 'none'})"], rows).rstrip("\n"))
    print("\n\n".join(blocks))
    return 0
