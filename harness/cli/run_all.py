"""``run-all``: evaluate every submission in a folder and store each result (see harness.engine.folder)."""

from __future__ import annotations

import sys

from harness.api import RunOptions, run_folder
from harness.cli.options import add_results_dir_argument
from harness.engine.modes import STORED_MODES
from harness.errors import EXIT_INTERNAL, EXIT_OK, UsageError

EXIT_CODES = {
    0: "every submission was run and stored, whatever their verdicts (see 'leaderboard', 'history')",
    2: "usage error: bad arguments, unknown task, missing folder, unwritable results store",
    70: "the harness or the machine failed on a job more often than --retries allows (stored with "
    "verdict 'error', its job 'failed'; the rest still ran)",
    141: "the output pipe closed early: the rest of the output was dropped, quietly",
}
EXAMPLES = """  python -m harness run-all submissions/ --task mxfp4_mm
  python -m harness run-all submissions/ --task mxfp4_mm --secret-file secret.txt
  python -m harness run-all submissions/ --task mxfp4_mm --mode test --results-dir /tmp/res
  python -m harness run-all submissions/ --task mxfp4_mm --executor ray            # every local GPU
  python -m harness run-all submissions/ --task mxfp4_mm --executor ray --address auto --gpu-type H200 \\
      --store postgresql://harness:pw@db-host/harness                             # a Ray cluster
  python -m harness jobs --task mxfp4_mm                # where each job stands
  python -m harness leaderboard --task mxfp4_mm        # then look at the ranking

Jobs: one per submission file contents, task, mode and harness version, kept in the store's job
table. A job already done is skipped (and said so; --rerun measures it again); a rerun after a killed run-all resumes the jobs
it left. Only failures of the machine or the harness are retried (a Ray worker or node that died, a
GPU that could not be used, an internal error); a submission's own failure is its verdict.

Which files: every *.py directly in the folder, sorted, except __init__.py, files starting with '_',
and files meant for another task. A file says which task it is for with a header line
'# task: mxfp4_mm' or '#!POPCORN leaderboard amd-mxfp4-mm'; without one, a file name containing a
task's keyword decides ('mxfp4' or 'gluon' -> mxfp4_mm, 'nvfp4' -> nvfp4_gemm); a file with no hint
at all is run. --all runs every file regardless. The name shown on the leaderboard comes from a
'# name: Fast Kernel' (or '#!POPCORN name ...') header line, else the file stem."""


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def add_arguments(parser) -> None:
    parser.add_argument("folder", metavar="DIR", help="folder holding the submissions (*.py)")
    parser.add_argument("--task", required=True, help="task name or path to a task.yml")
    parser.add_argument(
        "--mode", choices=STORED_MODES, default="leaderboard", help="what to run (default: leaderboard)"
    )
    parser.add_argument("--device", default=None, help="auto (default), cpu, or cuda[:N] (serial executor)")
    parser.add_argument("--max-repeats", type=int, help="most samples per benchmark case (default 100 GPU, 10 CPU)")
    parser.add_argument("--max-time", type=float, metavar="S", help="measured seconds per case before stopping")
    parser.add_argument(
        "--blocks",
        type=int,
        metavar="B",
        help="timed blocks, each a fresh worker with fresh inputs and its own shape order; the score's interval comes from their spread (default: leaderboard 10 on a GPU, 3 on the CPU; other modes 1)",
    )
    parser.add_argument("--timeout-scale", type=float, default=1.0, help="multiply the task's timeouts by this")
    parser.add_argument("--all", action="store_true", help="also run files whose header or name says another task")
    parser.add_argument(
        "--secret-file",
        metavar="FILE",
        help="leaderboard mode: read the secret seed from FILE (else $HARNESS_SECRET_SEED, else "
        "random); taken once for every submission",
    )
    parser.add_argument(
        "--executor",
        choices=("serial", "ray"),
        default="serial",
        help="serial: one job after another on this machine (default); ray: one Ray task per job, one GPU each",
    )
    parser.add_argument(
        "--address",
        metavar="ADDR",
        help="ray: join this cluster ('auto', or ray://HOST:10001); default: start a local one",
    )
    parser.add_argument(
        "--jobs",
        type=_positive,
        metavar="N",
        help="ray: at most N jobs at once (a local cluster without GPUs: N CPU jobs; default 1)",
    )
    parser.add_argument("--gpu-type", metavar="T", help="ray: only GPUs of this accelerator type (H200, B200, MI355X)")
    parser.add_argument(
        "--rerun",
        action="store_true",
        help="run the jobs already done again (new runs beside the old ones) instead of skipping them",
    )
    parser.add_argument(
        "--retries",
        type=int,
        default=2,
        metavar="N",
        help="retries of a job the machine or the harness failed on (default 2)",
    )
    add_results_dir_argument(parser)


def _ray_executor(args):
    if args.device not in (None, "auto", "cpu", "cuda"):
        raise UsageError(
            f"--device {args.device} with --executor ray: Ray picks each job's GPU; use --device cpu "
            "to run the jobs on CPUs, or leave --device out"
        )
    from harness.engine.executors.ray_executor import RayExecutor

    return RayExecutor(
        address=args.address,
        jobs=args.jobs,
        gpu_type=args.gpu_type,
        retries=args.retries,
        gpus_per_job=0 if args.device == "cpu" else None,
    )


def run(args) -> int:
    if args.retries < 0:
        raise UsageError("--retries must be 0 or more")
    if args.executor == "serial" and (args.address or args.gpu_type or args.jobs):
        raise UsageError("--address, --gpu-type and --jobs belong to --executor ray; add --executor ray")
    options = RunOptions(
        device=args.device,
        max_repeats=args.max_repeats,
        max_time_s=args.max_time,
        blocks=args.blocks,
        timeout_scale=args.timeout_scale,
    ).validate()
    if args.executor == "serial":
        from harness.engine.pool import warm_shared_pool

        warm_shared_pool(args.device)  # the warm-worker server imports torch while this process does
    _say_cpu_note(args, options)
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    executor = (lambda: _ray_executor(args)) if args.executor == "ray" else None
    report = run_folder(
        args.folder,
        args.task,
        args.mode,
        options,
        results_dir=args.results_dir,
        secret_file=args.secret_file,
        everything=args.all,
        progress=say,
        executor=executor,
        retries=args.retries,
        rerun=args.rerun,
    )
    if report.entries or report.already_done:  # a rerun that skipped every file shows what is stored
        from harness.api import load_board, render_board

        board, _warnings = load_board(args.task, results_dir=args.results_dir, mode=report.mode)
        print("\n" + render_board(board, "table"), flush=True)  # the board is the output: stdout
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
