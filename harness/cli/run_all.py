"""``run-all``: evaluate every submission in a folder and store each result (see harness.engine.folder)."""
from __future__ import annotations

import sys

from harness.api import RunOptions, run_folder
from harness.cli.options import add_results_dir_argument
from harness.engine.modes import STORED_MODES
from harness.errors import EXIT_INTERNAL, EXIT_OK, UsageError

EXIT_CODES = {0: "every submission was run and stored, whatever their verdicts (see 'leaderboard', 'history')",
              2: "usage error: bad arguments, unknown task, missing folder, unwritable results store",
              70: "the harness itself failed on a submission (stored with verdict 'error'; the rest still ran)",
              141: "the output pipe closed early: the rest of the output was dropped, quietly"}
EXAMPLES = """  python -m harness run-all submissions/ --task mxfp4_mm
  python -m harness run-all submissions/ --task mxfp4_mm --secret-file secret.txt
  python -m harness run-all submissions/ --task mxfp4_mm --mode test --results-dir /tmp/res
  python -m harness leaderboard --task mxfp4_mm        # then look at the ranking

Which files: every *.py directly in the folder, sorted, except __init__.py, files starting with '_',
and files meant for another task. A file says which task it is for with a header line
'# task: mxfp4_mm' or '#!POPCORN leaderboard amd-mxfp4-mm'; without one, a file name containing a
task's keyword decides ('mxfp4' or 'gluon' -> mxfp4_mm, 'nvfp4' -> nvfp4_gemm); a file with no hint
at all is run. --all runs every file regardless. The name shown on the leaderboard comes from a
'# name: Fast Kernel' (or '#!POPCORN name ...') header line, else the file stem."""

def add_arguments(parser) -> None:
    parser.add_argument("folder", metavar="DIR", help="folder holding the submissions (*.py)")
    parser.add_argument("--task", required=True, help="task name or path to a task.yml")
    parser.add_argument("--mode", choices=STORED_MODES, default="leaderboard", help="what to run (default: leaderboard)")
    parser.add_argument("--device", default=None, help="auto (default), cpu, or cuda[:N]")
    parser.add_argument("--max-repeats", type=int, help="most samples per benchmark case (default 100 GPU, 10 CPU)")
    parser.add_argument("--max-time", type=float, metavar="S", help="measured seconds per case before stopping")
    parser.add_argument("--timeout-scale", type=float, default=1.0, help="multiply the task's timeouts by this")
    parser.add_argument("--all", action="store_true", help="also run files whose header or name says another task")
    parser.add_argument("--secret-file", metavar="FILE",
                        help="leaderboard mode: read the secret seed from FILE (else $HARNESS_SECRET_SEED, else "
                             "random); taken once for every submission")
    add_results_dir_argument(parser)


def run(args) -> int:
    options = RunOptions(device=args.device, max_repeats=args.max_repeats, max_time_s=args.max_time,
                         timeout_scale=args.timeout_scale).validate()
    _say_cpu_note(args, options)
    report = run_folder(args.folder, args.task, args.mode, options, results_dir=args.results_dir,
                        secret_file=args.secret_file, everything=args.all,
                        progress=lambda line: print(line, file=sys.stderr, flush=True))
    return EXIT_INTERNAL if report.internal_errors else EXIT_OK


def _say_cpu_note(args, options) -> None:
    from harness.cli.run import cpu_note
    from harness.engine.submission import discover

    def files(task):
        try:
            return discover(args.folder, (task.name, task.compat_dir.parent.name), everything=args.all)[0]
        except UsageError:
            return []
    note = cpu_note(args.task, args.mode, args.device, options, files)
    if note:
        print(note, file=sys.stderr, flush=True)
