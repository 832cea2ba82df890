"""``python -m harness`` ends without the interpreter's teardown (harness/__main__.py): the exit code,
every line of output and the exit handlers' work are kept, and a thread that is not a daemon is
waited for, as a normal exit would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import atexit, runpy, sys, threading, time
from pathlib import Path
marks = Path(sys.argv[1])
atexit.register(lambda: (marks / "exit_handler").write_text("ran"))
if sys.argv[2] == "thread":
    def late():
        time.sleep(0.5)
        (marks / "thread").write_text("done")
    threading.Thread(target=late).start()
sys.argv = ["harness", *sys.argv[3:]]
runpy.run_module("harness", run_name="__main__")
"""


def _harness(tmp_path: Path, thread: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path), thread, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_exit_code_the_output_and_the_exit_handlers_are_kept(tmp_path):
    proc = _harness(tmp_path, "none", "tasks", "--json")
    assert proc.returncode == 0, proc.stderr
    names = {task["name"] for task in json.loads(proc.stdout)}  # the whole document reached the pipe
    assert {"mxfp4_mm", "nvfp4_gemm"} <= names
    assert (tmp_path / "exit_handler").read_text() == "ran"

    proc = _harness(tmp_path, "none", "run", "no_such_file.py", "--task", "mxfp4_mm")
    assert proc.returncode == 2 and "no_such_file.py" in proc.stderr, proc.stderr


def test_a_running_thread_that_is_not_a_daemon_is_waited_for(tmp_path):
    proc = _harness(tmp_path, "thread", "tasks", "--json")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "thread").read_text() == "done"
