"""The command line: argparse subcommands, one module each under ``harness/commands``.

Each command module defines ``NAME``, ``HELP``, ``EXAMPLES``, ``add_arguments(parser)`` and
``run(args) -> int``. This module only parses, dispatches and maps errors to exit codes.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

import harness.commands
from harness.errors import EXIT_INTERNAL, EXIT_USAGE, HarnessError, UsageError

EXIT_CODES_HELP = """exit codes:
  0   everything ran and passed
  1   a check failed (wrong output)
  2   usage error: bad arguments, unknown task, missing file, invalid task spec
  3   the submission could not import, compile or run, or it crashed
  4   the submission ran past the task's timeout
  5   rejected: refused by the static-scan policy or caught tampering
  70  internal error in the harness (please report it)
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse would sys.exit(2) from deep inside; raise instead
        raise UsageError(f"{self.prog}: {message} (see '{self.prog} --help')")


def _command_modules():
    for info in sorted(pkgutil.iter_modules(harness.commands.__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            yield importlib.import_module(f"harness.commands.{info.name}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m harness",
                     description="GPU-kernel competition harness and leaderboard runner.",
                     epilog=EXIT_CODES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for mod in _command_modules():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP,
                           epilog="examples:\n" + mod.EXAMPLES + "\n" + EXIT_CODES_HELP,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "_run", None):
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        return args._run(args)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the one place that turns a harness bug into a code
        import traceback
        traceback.print_exc()
        print(f"internal error: {exc!r}; this is a bug in the harness, please report it", file=sys.stderr)
        return EXIT_INTERNAL
