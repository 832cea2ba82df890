"""Error types the CLI maps to documented exit codes (see README, "Exit codes").

Library code raises these; only ``harness.cli.main.main`` turns them into an exit status.
Every message says what is wrong and how to fix it.
"""

from __future__ import annotations

from harness.results import ERROR, FAIL, NOT_RUN, PASS, REJECTED, TIMEOUT, RunResult

EXIT_OK = 0  # everything ran and passed
EXIT_FAIL = 1  # a check failed (wrong output)
EXIT_USAGE = 2  # bad command line, unknown task, missing file, invalid task spec
EXIT_ERROR = 3  # the submission could not import, compile or run (or crashed)
EXIT_TIMEOUT = 4  # the submission ran past the task's timeout
EXIT_REJECTED = 5  # refused by policy (static scan) or caught tampering
EXIT_INTERNAL = 70  # a bug in the harness itself

_EXIT_BY_VERDICT = {
    PASS: EXIT_OK,
    FAIL: EXIT_FAIL,
    ERROR: EXIT_ERROR,
    TIMEOUT: EXIT_TIMEOUT,
    REJECTED: EXIT_REJECTED,
    NOT_RUN: EXIT_ERROR,
}


def exit_code_for(verdict: str) -> int:
    return _EXIT_BY_VERDICT[verdict]


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run: ``result`` holds every case measured before it (``complete`` False), so the
    caller can still store and write it. A KeyboardInterrupt, so code that does not look for it stops
    as before."""

    def __init__(self, result: RunResult) -> None:
        super().__init__("interrupted")
        self.result = result


class HarnessError(Exception):
    """A user-facing error: the message names the problem and the fix."""

    exit_code = EXIT_USAGE


class UsageError(HarnessError):
    exit_code = EXIT_USAGE


class DeviceError(HarnessError):
    """The requested device is not usable here."""

    exit_code = EXIT_USAGE
