#!/usr/bin/env python
"""The cost of the worker's sandbox (Landlock, network namespace, no capabilities) on honest scores.

Runs each honest example in leaderboard mode N times with the worker's sandbox on and N times with it
off (``WorkerConfig.confine=False``, set only here: there is no option or flag for it), interleaved
(on, off, on, off, ...) so that drift hits both equally, and writes a JSON file: device, date, the score
lists per example, the ratio of the medians (on / off) and the sandbox report of the "on" runs. The
expectation: the sandbox costs nothing measurable (ratio within the runs' own spread).

GPU (default): the torch and Triton examples of both tasks. Without a GPU, or with --quick, the small
CPU fixture and the torch example, one run each (a smoke test of the script, not a measurement).

Examples:
  python bench/sandbox_overhead.py --out results/h200_sandbox_overhead.json        # on the H200
  python bench/sandbox_overhead.py --quick --out /tmp/sandbox_overhead.json        # CPU smoke test
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, doc_parser  # _common puts the repository root on sys.path
from onoff import add_arguments, interleaved, median_ratio

VERSION = 1  # 1 - first version
GPU_EXAMPLES = [
    ("torch_mxfp4.py", "mxfp4_mm"),
    ("triton_mxfp4.py", "mxfp4_mm"),
    ("torch_nvfp4.py", "nvfp4_gemm"),
    ("triton_nvfp4.py", "nvfp4_gemm"),
]
CPU_EXAMPLES = [("torch_mxfp4.py", str(ROOT / "tests/fixtures/tasks/mxfp4_small/task.yml"))]


def _unconfined(enabled: bool):
    """Makes the engine's worker configs unconfined while ``enabled`` (this process only)."""
    from harness.engine import sandbox

    original = sandbox.Sandbox.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.config.confine = not enabled

    setattr(sandbox.Sandbox, "__init__", init)  # noqa: B010 - mypy refuses a plain assignment to a method
    return lambda: setattr(sandbox.Sandbox, "__init__", original)


def main(argv=None) -> int:
    import torch

    from harness.api import RunOptions, run_submission

    p = doc_parser(__doc__)
    add_arguments(p, 3, "each way per example")
    args = p.parse_args(argv)

    gpu = torch.cuda.is_available() and not args.quick
    examples, n = (GPU_EXAMPLES, args.n) if gpu else (CPU_EXAMPLES, 1)
    doc: dict[str, Any] = {
        "version": VERSION,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "mode": "leaderboard",
        "runs_each": n,
        "examples": {},
        "note": "interleaved sandbox on/off runs; medians" if gpu else "CPU smoke test, not a measurement",
    }
    ok = True
    for sub, task in examples:

        def run(label, i, sub=sub, task=task):
            restore = _unconfined(label == "off")
            try:
                r = run_submission(
                    str(ROOT / "submissions" / sub),
                    task,
                    "leaderboard",
                    RunOptions(
                        device="cuda" if gpu else "cpu",
                        secret=f"sandbox-overhead-{i}",
                        max_repeats=args.max_repeats or (3 if not gpu else None),
                        scan_policy="off",
                    ),
                )
            finally:
                restore()
            print(
                f"[sandbox] {sub} run {i + 1}/{n} sandbox {label}: {r.verdict} score {r.score_us} us", file=sys.stderr
            )
            return r

        runs = interleaved(n, run)
        scores = {label: [r.score_us for r in rs] for label, rs in runs.items()}
        ratio = median_ratio(scores)
        done = ratio is not None
        ok = ok and done
        spread = {
            k: (max(v) - min(v)) / statistics.median(v) if done and len(v) > 1 else None for k, v in scores.items()
        }
        doc["examples"][f"{sub} on {Path(task).parent.name if task.endswith('.yml') else task}"] = {
            "scores_us": scores,
            "ratio_on_over_off": ratio,
            "relative_spread": spread,
            "sandbox_on": runs["on"][-1].sandbox,
        }
        doc["device"] = runs["off"][-1].device.__dict__
        print(f"[sandbox] {sub}: ratio (on / off, medians) {ratio}", file=sys.stderr)
    Path(args.out).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
