#!/usr/bin/env python
"""The cost of the anti-cheating defenses on an honest submission's score.

Runs one honest example in leaderboard mode N times with the defenses on and N times with them off
(``RunOptions(defenses=False)``, measurement only), interleaved (on, off, on, off, ...) so that drift
hits both equally, and writes a JSON file: device, versions, date, both score lists, and the ratio of
the medians (on / off). The target: within 5% (ratio <= 1.05).

GPU (default): submissions/triton_mxfp4.py on mxfp4_mm. Without a GPU, or with --quick, it falls back
to the small CPU fixture task and the torch example (a smoke test of the script, not a measurement).

Examples:
  python bench/defense_overhead.py --out results/defense_overhead.json              # on the H200
  python bench/defense_overhead.py --quick --out /tmp/overhead.json                 # CPU smoke test
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, doc_parser  # _common puts the repository root on sys.path
from onoff import add_arguments, interleaved, median_ratio
from relative_paths import repo_relative

VERSION = 1  # 1 - first version


def main(argv=None) -> int:
    import torch

    from harness.api import RunOptions, run_submission

    p = doc_parser(__doc__)
    add_arguments(p, 5)
    p.add_argument("--submission", help="default: triton_mxfp4.py on the GPU, torch_mxfp4.py on the CPU")
    p.add_argument("--task", help="default: mxfp4_mm on the GPU, the small CPU fixture otherwise")
    args = p.parse_args(argv)

    gpu = torch.cuda.is_available() and not args.quick
    device = "cuda" if gpu else "cpu"
    sub = args.submission or str(ROOT / "submissions" / ("triton_mxfp4.py" if gpu else "torch_mxfp4.py"))
    task = args.task or ("mxfp4_mm" if gpu else str(ROOT / "tests/fixtures/tasks/mxfp4_small/task.yml"))
    n = 1 if args.quick else args.n

    def run(label, i):
        opts = RunOptions(
            device=device,
            secret=f"overhead-{i}",
            defenses=label == "on",
            max_repeats=args.max_repeats or (3 if args.quick else None),
            scan_policy="off",
        )
        r = run_submission(sub, task, "leaderboard", opts)
        print(f"[overhead] run {i + 1}/{n} defenses {label}: {r.verdict} score {r.score_us}", file=sys.stderr)
        return r

    runs = interleaved(n, run)
    scores = {label: [r.score_us for r in rs] for label, rs in runs.items()}
    verdicts = {label: [r.verdict for r in rs] for label, rs in runs.items()}
    ratio = median_ratio(scores)
    ok = ratio is not None
    doc = {
        "version": VERSION,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "device": runs["off"][-1].device.__dict__,
        "submission": repo_relative(sub),
        "task": repo_relative(task),
        "mode": "leaderboard",
        "runs_each": n,
        "scores_us": scores,
        "verdicts": verdicts,
        "ratio_on_over_off": ratio,
        "within_5_percent": None if ratio is None else ratio <= 1.05,
        "note": "CPU smoke test, not a measurement" if not gpu else "interleaved on/off runs; medians",
    }
    Path(args.out).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(f"ratio (defenses on / off, medians): {ratio}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
