"""``run-all``: evaluate every submission in a folder and store each result (see harness.engine.folder)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from harness.api import RunOptions, run_folder
from harness.cli.options import add_results_dir_argument, add_sampling_arguments, positive
from harness.engine.modes import STORED_MODES, Mode
from harness.engine.preflight import check_store_writable
from harness.engine.seeds import give_secret
from harness.engine.submission import check_submissions_folder
from harness.errors import EXIT_OK, UsageError
from harness.store.jobs import DEFAULT_LEASE_S

EXIT_INFRASTRUCTURE = 75  # EX_TEMPFAIL: try again later
EXIT_CODES = {
    0: "every submission was run and stored, whatever their verdicts (see 'leaderboard', 'history')",
    2: "usage error: bad arguments, unknown task, missing folder, unwritable results store",
    70: "a bug in the harness (a traceback was printed); finished results are stored",
    75: "the infrastructure failed: a job failed (infrastructure) more often than --retries allows (no "
    "verdict stored; it is back in the queue), the store stayed unreachable (a measured result is kept "
    "in the spool folder and stored by the next run), or the Ray cluster went away; rerun to resume",
    130: "stopped by SIGINT (Ctrl-C): finished results are stored, running jobs released to the queue; rerun to resume",
    141: "the output pipe closed early: the rest of the output was dropped, quietly",
    143: "stopped by SIGTERM: finished results are stored, running jobs released to the queue; rerun to resume",
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
table. A job already done is skipped (and said so; --rerun measures it again). Each run-all is a
driver: it claims one job at a time under a lease (--lease, default 60 s) that its heartbeat renews;
several drivers on one store (one host or many) share the queue, and a job whose lease ran out (its
driver was killed) is taken over by the next driver that looks, reusing its run row: a rerun after a
killed run-all resumes the jobs it left. 'python -m harness jobs --release OWNER|--stale' gives jobs
back at once. Only failures of the machine or the harness are retried, with backoff (a Ray worker or
node that died, a GPU that could not be used, an internal error); after --retries the job is
'failed (infrastructure)' with its reason and no verdict, and the next run-all runs it again; a
submission's own failure is its verdict. A PostgreSQL store that restarts is reconnected to (for
$HARNESS_STORE_RECONNECT_S, default 120 s); a result it could not take is kept in $HARNESS_SPOOL_DIR
(default ~/.local/state/harness/spool) and stored by the next run-all on that store.

Compilation: each file's compiled kernels are kept between runs (a compile-cache entry of its own).
With the serial executor on a GPU, before a job whose file is new to the cache, that file and up to
15 more new files of the queue are compiled together (a compile round, between jobs: nothing is timed
then), so that their jobs compile nothing; stderr says so. A round decides no verdict.

Cluster: --address joins a running Ray cluster (HOST:6379, ray://HOST:10001 or 'auto'); a cluster
started with Ray's token authentication (RAY_AUTH_MODE=token) is joined with the same token, given
in $HARNESS_RAY_TOKEN or --ray-token-file FILE.

Which files: every *.py directly in the folder, sorted, except __init__.py, files starting with '_',
and files meant for another task. A file says which task it is for with a header line
'# task: mxfp4_mm' or '#!POPCORN leaderboard amd-mxfp4-mm'; without one, a file name containing a
task's keyword decides ('mxfp4' or 'gluon' -> mxfp4_mm, 'nvfp4' -> nvfp4_gemm); a file with no hint
at all is run. --all runs every file regardless. The name shown on the leaderboard comes from a
'# name: Fast Kernel' (or '#!POPCORN name ...') header line, else the file stem."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", metavar="DIR", help="folder holding the submissions (*.py)")
    parser.add_argument("--task", required=True, help="task name or path to a task.yml")
    parser.add_argument(
        "--mode", choices=STORED_MODES, default="leaderboard", help="what to run (default: leaderboard)"
    )
    parser.add_argument("--device", default=None, help="auto (default), cpu, or cuda[:N] (serial executor)")
    add_sampling_arguments(parser)
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
        type=positive,
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
    parser.add_argument(
        "--lease",
        type=float,
        default=DEFAULT_LEASE_S,
        metavar="S",
        help=f"seconds a claimed job stays this driver's without a heartbeat (default {DEFAULT_LEASE_S:g})",
    )
    parser.add_argument(
        "--ray-token-file",
        metavar="FILE",
        help="ray: the authentication token of a cluster started with RAY_AUTH_MODE=token (else $HARNESS_RAY_TOKEN)",
    )
    add_results_dir_argument(parser)


def _ray_executor(args: argparse.Namespace) -> Any:
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
        token=_ray_token(args),
    )


def _ray_token(args: argparse.Namespace) -> str | None:
    from harness.engine.executors.ray_auth import token_from

    return token_from(args.ray_token_file)


def run(args: argparse.Namespace) -> int:
    check_submissions_folder(args.folder)  # the paths' errors before the pool's warm-up and the CPU-duration note
    if args.retries < 0:
        raise UsageError("--retries must be 0 or more")
    if not args.lease > 0:
        raise UsageError(f"--lease must be a positive number of seconds, not {args.lease}")
    if args.executor == "serial" and (args.address or args.gpu_type or args.jobs):
        raise UsageError("--address, --gpu-type and --jobs belong to --executor ray; add --executor ray")
    options = RunOptions(
        device=args.device,
        max_repeats=args.max_repeats,
        max_time_s=args.max_time,
        blocks=args.blocks,
        warmup_chunks=args.warmup_chunks,
        lead_in=args.lead_in,
        start_ahead=args.start_ahead,
        timeout_scale=args.timeout_scale,
    ).validate()
    check_store_writable(args.results_dir)
    if Mode(args.mode).ranked:  # taken here, so that a bad --secret-file is said before the note below
        give_secret(options, args.secret_file)
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
        everything=args.all,
        progress=say,
        executor=executor,
        retries=args.retries,
        rerun=args.rerun,
        lease_s=args.lease,
    )
    if report.stopped is not None:
        return 128 + report.stopped
    if report.entries or report.already_done:  # a rerun that skipped every file shows what is stored
        from harness.api import load_board, render_board

        board, _warnings = load_board(args.task, results_dir=args.results_dir, mode=report.mode)
        print("\n" + render_board(board, "table"), flush=True)  # the board is the output: stdout
    if report.infra_failed:
        names = ", ".join(f.path.name for f in report.infra_failed)
        say(
            f"{len(report.infra_failed)} job(s) failed (infrastructure), no verdict stored: {names}; rerun to evaluate them"
        )
        return EXIT_INFRASTRUCTURE
    return EXIT_OK


def _say_cpu_note(args: argparse.Namespace, options: RunOptions) -> None:
    from harness.cli.run import cpu_note
    from harness.engine.submission import discover

    def files(task: Any) -> list[Path]:
        try:
            return discover(args.folder, (task.name, task.compat_dir.parent.name), everything=args.all)[0]
        except UsageError:
            return []

    note = cpu_note(args.task, args.mode, args.device, options, files)
    if note:
        print(note, file=sys.stderr, flush=True)
