"""The command line: argparse subcommands, one thin module each in this package.

Each command module defines ``NAME``, ``HELP``, ``EXAMPLES``, ``add_arguments(parser)`` and
``run(args) -> int``. ``COMMANDS`` maps each name to its module, which is imported only when that
command runs (a command that reads the results store never loads torch). This module only parses,
dispatches and maps errors to exit codes.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import re
import sys
from types import ModuleType
from typing import Any, NoReturn

from harness.errors import EXIT_INTERNAL, EXIT_USAGE, HarnessError, UsageError

# name -> (module, one-line help): the help is here so that 'python -m harness --help' imports nothing
COMMANDS = {
    "run": (
        "harness.cli.run",
        "check and time one submission on a task (test, benchmark, leaderboard or profile mode)",
    ),
    "run-all": (
        "harness.cli.run_all",
        "evaluate every submission in a folder and store the results (exit 0 when all ran, whatever the verdicts)",
    ),
    "leaderboard": (
        "harness.cli.leaderboard",
        "rank the stored results of a task (per device; ties within measurement error marked '=')",
    ),
    "history": (
        "harness.cli.history",
        "list the stored runs of one submission: date, mode, device, verdict, score, commit",
    ),
    "compare": (
        "harness.cli.compare",
        "compare two stored submissions: speed-up per shape and overall, with its uncertainty",
    ),
    "final": (
        "harness.cli.final",
        "final scoring: run a board's top entries again in interleaved rounds and rank them by paired differences",
    ),
    "export": ("harness.cli.export", "export all stored runs of a task as JSON or CSV"),
    "jobs": ("harness.cli.jobs", "where run-all's jobs stand: counts per state, the queue, the running ones"),
    "tasks": ("harness.cli.tasks", "list the tasks with their shapes, timing protocol and published targets"),
    "serve": (
        "harness.cli.serve",
        "a verdict server: later 'run' commands in this environment skip the process start, torch's import "
        "and the CUDA context",
    ),
    "measure-peaks": (
        "harness.cli.measure_peaks",
        "measure this GPU's bandwidth, matrix rates and launch floor for the speed of light "
        "(stored in the user data folder)",
    ),
}

# every exit code, by number; a command module's EXIT_CODES lists the ones it can return
EXIT_CODE_TEXT = {
    0: "everything ran and passed",
    1: "a check failed (wrong output)",
    2: "usage error: bad arguments, unknown task, missing file, invalid task spec",
    3: "the submission could not import, compile or run, or it crashed",
    4: "the submission ran past the task's timeout",
    5: "rejected: refused by the static-scan policy or caught tampering",
    70: "internal error in the harness (please report it)",
    75: "the infrastructure failed (the store, the Ray cluster, a node): rerun to resume",
    141: "the output pipe closed early (e.g. '| head'): the rest of the output was dropped, quietly",
    130: "interrupted (Ctrl-C, SIGINT)",
    143: "terminated (SIGTERM)",
}
# every command can end by a signal; a command's EXIT_CODES may word these two its own way
SIGNAL_EXIT_CODES = (130, 143)
EXIT_INTERRUPTED = 130
# the packages of this repository: a missing module of these is a bug, a missing other one a setup problem
OWN_PACKAGES = frozenset({"harness", "tasks", "fp4_reference"})
# import name -> the name pip knows it by, where they differ
DISTRIBUTIONS = {"yaml": "pyyaml", "psycopg": "psycopg[binary]", "pynvml": "nvidia-ml-py"}


def exit_codes_help(codes: list[int] | tuple[int, ...] | None = None, overrides: dict[int, str] | None = None) -> str:
    """An 'exit codes:' block for ``codes`` (default: all), with a command's own wording in ``overrides``;
    the signal codes (130, 143) are always listed, last."""
    overrides = overrides or {}
    listed = [c for c in (codes or EXIT_CODE_TEXT) if c not in SIGNAL_EXIT_CODES] + list(SIGNAL_EXIT_CODES)
    lines = [f"  {code:<3} {overrides.get(code, EXIT_CODE_TEXT[code])}" for code in listed]
    return "exit codes:\n" + "\n".join(lines) + "\n"


EXIT_CODES_HELP = exit_codes_help()
EXIT_BROKEN_PIPE = 141  # the shell's 128 + SIGPIPE


class _Parser(argparse.ArgumentParser):
    """argparse without prefix matching ('--mod' is not '--mode'), whose errors raise a UsageError
    with a "did you mean" where a close spelling exists."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:  # argparse would sys.exit(2) from deep inside; raise instead
        hint = did_you_mean(message, self._option_strings())
        raise UsageError(f"{self.prog}: {message}{hint} (see '{self.prog} --help')")

    def _option_strings(self) -> list[str]:
        """Every option of this parser and of the subcommand parsers built with their arguments."""
        found: list[str] = []
        for action in self._actions:
            found += action.option_strings
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    found += [o for a in sub._actions for o in a.option_strings]
        return sorted(set(found))


_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")
_UNRECOGNIZED = re.compile(r"unrecognized arguments: (.*)")


def did_you_mean(message: str, options: list[str]) -> str:
    """'; did you mean ...?' for argparse's ``message`` (an invalid choice, an unknown option), or ''."""
    choice = _CHOICE.search(message)
    if choice:
        close = difflib.get_close_matches(choice.group(1), re.findall(r"'([^']*)'", choice.group(2)), n=1)
        return f"; did you mean '{close[0]}'?" if close else ""
    unknown = _UNRECOGNIZED.search(message)
    if not unknown:
        return ""
    hints = []
    for word in unknown.group(1).split():
        name = word.split("=", 1)[0]
        if name.startswith("-"):
            close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
            if close:
                hints.append(f"did you mean {close[0]} for {name}?")
    return "; " + " ".join(hints) if hints else ""


def _command_exit_codes(mod: ModuleType) -> str:
    """A command's exit-code block from its EXIT_CODES (codes, or a {code: text} for its own wording)."""
    codes = getattr(mod, "EXIT_CODES", None)
    if codes is None:
        return EXIT_CODES_HELP
    overrides = codes if isinstance(codes, dict) else {}
    return exit_codes_help(list(codes), overrides)


def _chosen_command(argv: list[str]) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; only the command named in ``argv`` (all of them when None) gets its module loaded."""
    chosen = None if argv is None else _chosen_command(argv)
    parser = _Parser(
        prog="python -m harness",
        description="GPU-kernel competition harness and leaderboard runner.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (module_name, help_text) in COMMANDS.items():
        if argv is not None and name != chosen:
            sub.add_parser(name, help=help_text, add_help=False)
            continue
        mod = importlib.import_module(module_name)
        p = sub.add_parser(
            name,
            help=help_text,
            description=help_text,
            epilog="examples:\n" + mod.EXAMPLES + "\n" + _command_exit_codes(mod),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        parser = build_parser(argv)
        args = parser.parse_args(argv)
        if not getattr(args, "_run", None):
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        args.argv = argv  # as given: 'run' sends it to a verdict server where one listens
        code = args._run(args)
        sys.stdout.flush()  # inside the try: a closed pipe is met here, not at interpreter exit
        return code
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except ModuleNotFoundError as exc:
        if not _missing_dependency(exc):
            return _internal_error(exc)
        print(f"error: {_missing_dependency(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:
        return _internal_error(exc)


def _missing_dependency(exc: ModuleNotFoundError) -> str | None:
    """The one-line setup advice for a missing third-party package, or None (a module of our own is missing:
    that is a bug, not a setup problem)."""
    top = (exc.name or "").split(".")[0]
    if not top or top in OWN_PACKAGES:
        return None
    return (
        f"the Python package {top!r} is missing: {sys.executable} is not the harness's environment; run "
        f"'bash scripts/setup.sh' and then '. .venv/bin/activate' (or 'pip install {DISTRIBUTIONS.get(top, top)}' "
        "into this one)"
    )


def _internal_error(exc: BaseException) -> int:
    import traceback

    traceback.print_exception(exc)
    print(f"internal error: {exc!r}; this is a bug in the harness, please report it", file=sys.stderr)
    return EXIT_INTERNAL


def _silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the interpreter's last flush cannot fail again
    (the Python documentation's recipe for SIGPIPE)."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
