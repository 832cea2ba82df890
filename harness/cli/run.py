"""``python -m harness run``: one submission, one task, one verdict."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.api import RunOptions, run_submission
from harness.cli.main import EXIT_CODE_TEXT, EXIT_INTERRUPTED
from harness.cli.options import add_results_dir_argument, add_sampling_arguments
from harness.engine.modes import MODES, Mode
from harness.engine.options import COMPILE_AHEAD
from harness.engine.pool import warm_shared_pool
from harness.engine.preflight import check_output_file, check_store_writable, check_submission_file
from harness.engine.seeds import give_secret
from harness.errors import RunInterrupted, UsageError, exit_code_for
from harness.report.run_text import render_output_excerpt, render_phases, render_run, render_warnings
from harness.results import RunResult

if TYPE_CHECKING:
    from tasks import Task

EXIT_CODES = {
    **{code: EXIT_CODE_TEXT[code] for code in (0, 1, 2, 3, 4, 5, 70, 141)},
    130: "interrupted (Ctrl-C): the cases measured so far are reported, stored with --save and written to "
    "--json, marked interrupted (complete: false)",
    143: "terminated (SIGTERM) before or after the run; during the run it waits for the run's end (a "
    "submission can send it, see SECURITY.md)",
}
EXAMPLES = """  python -m harness run submissions/triton_mxfp4.py --task mxfp4_mm
  python -m harness run submissions/torch_nvfp4.py --task nvfp4_gemm --mode test
  HARNESS_SECRET_SEED=... python -m harness run sub.py --task mxfp4_mm --mode leaderboard --json result.json
  python -m harness run sub.py --task mxfp4_mm --mode profile
  python -m harness run sub.py --task mxfp4_mm --mode benchmark --verify-timing --verbose
  python -m harness run sub.py --task path/to/small/task.yml --device cpu --json -
  python -m harness run sub.py --task mxfp4_mm --save && python -m harness history sub.py --task mxfp4_mm
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="the submission: a .py file defining custom_kernel(data)")
    p.add_argument("--task", required=True, help="task name (see 'python -m harness tasks') or a task.yml path")
    p.add_argument(
        "--mode",
        default="test+benchmark",
        choices=MODES,
        help="test: correctness only; benchmark: timing with the competition's protocol; "
        "test+benchmark (default); leaderboard: tests, then benchmarks on secret-seeded fresh "
        "inputs with every timed output checked, and a score; profile: torch profiler tables",
    )
    p.add_argument("--json", metavar="PATH", help="write the result as JSON to PATH ('-' for stdout)")
    p.add_argument("--seed", type=int, help="replace every case's public seed with N")
    p.add_argument(
        "--secret-file",
        help="leaderboard: read the secret seed from this file (else $HARNESS_SECRET_SEED, else a random one)",
    )
    p.add_argument("--device", help="auto (default), cpu, or cuda[:N]")
    add_sampling_arguments(p)
    p.add_argument(
        "--same-worker",
        action="store_true",
        help="the blocks share one worker (fresh inputs and shape order each, not a fresh process): faster, "
        "and the interval leaves out what differs between processes",
    )
    p.add_argument("--timeout-scale", type=float, default=1.0, help="multiply the task's timeouts by this")
    p.add_argument("--memory-limit-gb", type=float, help="host memory the submission may use (default 75%% of RAM)")
    p.add_argument(
        "--no-drop-privileges", action="store_true", help="when root, run the submission as root instead of as 'nobody'"
    )
    p.add_argument(
        "--save",
        action="store_true",
        help="also store the result in the results store (for 'history', 'compare', 'leaderboard')",
    )
    add_results_dir_argument(p)
    p.add_argument(
        "--verify-timing",
        action="store_true",
        help="GPU: also sum each call's kernel durations with the profiler (CUPTI) and report how far "
        "the kernel-only figure deviates from it",
    )
    p.add_argument(
        "--no-kernel-only",
        action="store_true",
        help="skip the kernel-only figure (CUDA graphs of flush+call minus flushes) after each case",
    )
    p.add_argument(
        "--triton-cache-dir",
        metavar="DIR",
        help="the compile cache's root: each submission's Triton cache and torch extension builds, kept "
        "between runs in a folder of its own keyed by its content and the toolchain (default: the "
        "user's cache folder, e.g. ~/.cache/fp4-harness/compiled)",
    )
    p.add_argument(
        "--compile-ahead",
        choices=COMPILE_AHEAD,
        default="auto",
        help="make the file's first call on every shape in parallel workers before its run calls it, so "
        "that its kernels compile at once (auto, the default: on a GPU, the first time the compile cache "
        "meets the file; on: the same, also on the CPU; off: never)",
    )
    p.add_argument("--verbose", action="store_true", help="also print where the wall time went, on stderr")
    p.add_argument(
        "--scan-policy",
        choices=("warn", "reject", "off"),
        default="warn",
        help="leaderboard: static scan of the source with kernelguard before running; warn (default) "
        "lists findings, reject refuses a submission kernelguard classifies as hacked",
    )
    p.add_argument(
        "--no-defenses",
        action="store_true",
        help="MEASUREMENT ONLY: turn the anti-cheating defenses off (fixed inputs, no integrity checks) "
        "to measure their cost; the result is stamped and must not be ranked",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def run(args: argparse.Namespace) -> int:
    from harness.server.client import forward_run

    served = forward_run(args.argv[1:], args.quiet) if getattr(args, "argv", None) else None
    if served is not None:
        return served
    options = RunOptions(
        device=args.device,
        seed=args.seed,
        max_repeats=args.max_repeats,
        max_time_s=args.max_time,
        blocks=args.blocks,
        same_worker=args.same_worker,
        warmup_chunks=args.warmup_chunks,
        lead_in=args.lead_in,
        start_ahead=args.start_ahead,
        timeout_scale=args.timeout_scale,
        memory_limit_gb=args.memory_limit_gb,
        drop_privileges=False if args.no_drop_privileges else None,
        verify_timing=args.verify_timing,
        kernel_only=not args.no_kernel_only,
        triton_cache_dir=args.triton_cache_dir,
        scan_policy=args.scan_policy,
        compile_ahead=args.compile_ahead,
        defenses=not args.no_defenses,
    )  # checked with the file, the task and the mode by run_submission (harness.engine.preflight)
    check_submission_file(args.file)  # its error before the note below on how long the run takes
    check_output_file(args.json, "--json")
    if args.save:
        check_store_writable(args.results_dir)
    if Mode(args.mode).ranked:
        give_secret(options, args.secret_file)
    warm_shared_pool(args.device)  # the warm-worker server imports torch while this process does (harness.engine.pool)
    progress = None if args.quiet else (lambda msg: print(f"[harness] {msg}", file=sys.stderr, flush=True))
    note = cpu_note(args.task, args.mode, args.device, options, [args.file])
    if note:
        print(note, file=sys.stderr, flush=True)
    interrupted = False
    with deferred_termination() as received:
        try:
            result = run_submission(args.file, args.task, args.mode, options, progress)
        except RunInterrupted as stop:  # Ctrl-C: the cases measured are reported, stored and written all the same
            result, interrupted = stop.result, True
    if received:
        print(
            f"[harness] {', '.join(received)} arrived during the run and was deferred until its end (a "
            "submission running as the harness's own user can send it; see SECURITY.md)",
            file=sys.stderr,
        )
    _report(args, result)
    _keep(args, result)
    if interrupted:
        print(f"[harness] {result.message}", file=sys.stderr)
        return EXIT_INTERRUPTED
    return exit_code_for(result.verdict)


def _report(args: argparse.Namespace, result: RunResult) -> None:
    """Warnings and phases on stderr; the result table (or JSON with --json -) on stdout; then the
    submission's own output, after its verdict, on stderr."""
    for line in render_warnings(result):
        print(line, file=sys.stderr)
    if args.verbose:
        print(render_phases(result), file=sys.stderr)
    if args.json == "-":
        print(result.to_json())
    else:
        print(render_run(result, _diagnosis(result, args.task)))
    excerpt = render_output_excerpt(result, verbose=args.verbose)
    if excerpt:
        print(excerpt, file=sys.stderr)


def _keep(args: argparse.Namespace, result: RunResult) -> None:
    """--save: the result into the store; --json PATH: the result into that file."""
    if args.save:
        from harness.store.database import git_commit_of, open_store

        with open_store(args.results_dir) as st:
            run_id = st.record(result, git_commit=git_commit_of(args.file))
            print(f"stored as run {run_id} in {st.path}", file=sys.stderr)
    if args.json and args.json != "-":
        try:
            Path(args.json).write_text(result.to_json() + "\n")
        except OSError as exc:  # checked before the run; only a change since then gets here
            raise UsageError(
                f"--json {args.json}: cannot write ({exc}); the result was not written there"
                + (" (it is in the results store)" if args.save else "")
            ) from exc


def cpu_note(
    task_name: str,
    mode: str,
    device: str | None,
    options: RunOptions,
    files: Sequence[str | Path] | Callable[[Task], Sequence[str | Path]],
) -> str | None:
    """The one line that warns of a long CPU run (harness.engine.cpu_estimate), or None."""
    from harness.engine.cpu_estimate import long_cpu_run_note
    from harness.engine.device import select_device
    from tasks import load_task

    try:
        task = load_task(task_name)
        on_cpu = select_device(device).type == "cpu"
    except Exception:
        return None
    if callable(files):
        files = files(task)
    return long_cpu_run_note(task, mode, options.max_repeats, options.max_time_s, files) if on_cpu else None


def _diagnosis(result: RunResult, task: str) -> str | None:
    from harness.engine.diagnosis import diagnose_result
    from tasks import load_task

    try:
        target = load_task(task).target_gpu
    except Exception:
        target = "(unknown)"
    return diagnose_result(result, target)


@contextlib.contextmanager
def deferred_termination(
    signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGHUP),
) -> Iterator[list[str]]:
    """While a run is active, SIGTERM and SIGHUP only get recorded: a submission whose worker runs as
    our own user could otherwise end the harness mid-run. The run itself is bounded by the task's
    timeouts; Ctrl-C (SIGINT) still stops at once, and SIGKILL cannot be caught (SECURITY.md)."""
    received: list[str] = []
    previous: dict[signal.Signals, Any] = {}
    try:
        for sig in signals:
            previous[sig] = signal.signal(sig, lambda num, _frame: received.append(signal.Signals(num).name))
    except ValueError:  # not the main thread: nothing to install
        pass
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
