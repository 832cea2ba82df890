"""``python -m harness``: the command line (:mod:`harness.cli.main`).

When the command is done, the exit handlers run (the worker pool's server is stopped, temporary folders
removed) and the output is flushed; then the process ends without the interpreter's teardown of every
module, which for torch alone took 0.4 s on a CPU (``bench/lab/process_phases.py``). A thread of ours
that is not a daemon and still runs gets the normal exit, which waits for it.
"""

import atexit
import os
import sys
import threading

from harness.cli.main import main


def exit_now(code: int) -> None:
    """Ends the process with ``code`` once the exit handlers have run and the output is flushed."""
    others = [t for t in threading.enumerate() if t is not threading.main_thread()]
    if any(t.is_alive() and not t.daemon for t in others):
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: main() has already said so where it could
            pass
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
