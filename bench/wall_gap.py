"""The series the escaped-work check reads, per timed case and block, for honest ranked runs, to see
whether an honest file can fail it on a host (the H100 rejected triton_mxfp4 in some blocks when the
check read each sample's whole host wall time: "host wall time exceeds the event time by 21-28 us per
call beyond the normal gap"; it now reads the sample's tail, end event seen complete -> device idle).

It runs ``run_submission`` ranked, with a fresh secret and a fresh compile cache per run, in this
process or (``--fresh-processes``, as ``python -m harness run`` does) each run in a process of its own,
and records what ``TimingJudge.finish`` is given: every sample's event time, its tail,
device-clock window, whether the gate held, the host time it did not hide, a second synchronize of
the idle device right after the tail's and the device clock's tail, with the block's own calibrated gaps. One JSON line per judged
case, after a first line with the machine (device, versions, date, commit), and after each run's cases a line with
the run's own verdict (``run_result``: a block rejected by the escaped-work check alone is measured again, so a run
may pass with a case that did not), score, wall time and phases (among them what each worker's start cost):

  python bench/wall_gap.py --runs 4 --out probe.jsonl submissions/triton_mxfp4.py --task mxfp4_mm
  python bench/wall_gap.py --runs 4 --fresh-processes --out probe.jsonl submissions/triton_mxfp4.py --task mxfp4_mm
  python bench/wall_gap.py --runs 1 --out probe.jsonl submissions/torch_mxfp4.py \
      --task tests/fixtures/tasks/mxfp4_small/task.yml --device cpu        # CPU: the plumbing
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import machine  # puts the repository root on sys.path

from harness import protocol
from harness.api import RunOptions, run_submission
from harness.engine import timing_checks

SERIES = tuple(k for k in protocol.TIMING_SERIES if k != "samples_ns")  # the samples are the judge's own argument


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    p.add_argument("file")
    p.add_argument("--task", required=True)
    p.add_argument("--runs", type=int, default=4)
    p.add_argument("--device", default=None)
    p.add_argument("--out", required=True, help="JSON lines, one per judged case")
    p.add_argument("--fresh-processes", action="store_true", help="each run in a process of its own")
    p.add_argument("--append", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--first-run", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if not args.append:
        Path(args.out).write_text(json.dumps({"machine": machine(args.device)}) + "\n")
    if args.fresh_processes:
        for i in range(args.runs):
            one = ["--runs", "1", "--append", "--first-run", str(i), "--out", args.out, "--task", args.task]
            subprocess.run(
                [sys.executable, __file__, *one, *(["--device", args.device] if args.device else []), args.file]
            )
        return 0
    out = open(args.out, "a")
    run_no = args.first_run
    original = timing_checks.TimingJudge.finish

    def finish(self, result, samples, series, batch):  # type: ignore[no-untyped-def]
        judged = original(self, result, samples, series, batch)
        tails = list(series.get("tail_ns") or [])
        row = {
            "run": run_no,
            "spec": {k: v for k, v in result.spec.items() if k != "seed"},
            "verdict": judged.verdict,
            "message": judged.message,
            "gap_ns": self.session.gap_ns,
            "window_gap_ns": self.session.window_gap_ns,
            "batch": batch,
            "samples_ns": list(samples),
            **{k: list(series.get(k) or []) for k in SERIES},
        }
        if tails:
            row["median_tail_ns"] = statistics.median(tails)
        out.write(json.dumps(row) + "\n")
        out.flush()
        return judged

    timing_checks.TimingJudge.finish = finish  # type: ignore[method-assign]
    with out:
        for run_no in range(args.first_run, args.first_run + args.runs):
            with tempfile.TemporaryDirectory() as cache:
                Path(cache).chmod(0o711)  # a worker that runs as 'nobody' reaches its entry beneath it
                opts = RunOptions(device=args.device, secret=secrets.token_hex(16), triton_cache_dir=cache)
                result = run_submission(args.file, args.task, "leaderboard", opts)
                end = {
                    "verdict": result.verdict,
                    "message": result.message,
                    "warnings": list(result.warnings),
                    "wall_s": result.wall_s,
                    "phases_s": result.phases_s,
                    "score_us": result.score_us,
                }
                out.write(json.dumps({"run": run_no, "run_result": end}) + "\n")
                print(f"run {run_no}: {result.verdict} {result.message or ''}"[:300], file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
