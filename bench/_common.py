"""What the bench scripts share: the machine's facts for a results file, the commit, the example files
per task, a median timing (``timed``), byte-different copies, a parser built from a script's docstring, and writing the results file
(repo-relative paths only) after every finished unit, atomically, within a time budget (``ResultsFile``)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# the Triton examples on the GPU; the fixture tasks with the torch examples on the CPU (--quick)
GPU_FILES = {"mxfp4_mm": "submissions/triton_mxfp4.py", "nvfp4_gemm": "submissions/triton_nvfp4.py"}
QUICK_FILES = {
    "tests/fixtures/tasks/mxfp4_small/task.yml": "submissions/torch_mxfp4.py",
}


def timed(fn: Callable[[], Any], sync: Callable[[], None], reps: int) -> tuple[float, Any]:
    """Median seconds of ``fn`` over ``reps`` calls, each ended by ``sync`` (the device's idle; after one
    untimed call), and its last result."""
    out = fn()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def rel(path: Path | str) -> str:
    p = Path(path).resolve()
    try:
        return str(p.relative_to(ROOT))
    except ValueError:
        return p.name


def git_commit(tree: Path | None = None) -> str | None:
    """The checkout's full commit hash (``tree``: another checkout's), or None outside a git checkout; for
    this checkout, $HARNESS_COMMIT where set (a copy of the tree whose git metadata is not the tree's, as
    on a device machine that copies the files)."""
    if tree is None and os.environ.get("HARNESS_COMMIT"):
        return os.environ["HARNESS_COMMIT"]
    root = (tree or ROOT).resolve()
    try:
        git = ["git", "rev-parse", "--show-toplevel", "HEAD"]
        top, head = subprocess.run(git, cwd=root, capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError, ValueError):
        return None
    return head if Path(top).resolve() == root else None  # not the commit of a repository the tree sits in


def doc_parser(doc: str) -> argparse.ArgumentParser:
    """A parser whose description is the first line of a script's docstring ``doc`` and whose epilog is
    what follows its "Examples:"."""
    return argparse.ArgumentParser(
        allow_abbrev=False,
        description=doc.split("\n")[0],
        epilog=doc.split("Examples:")[1],
        formatter_class=argparse.RawTextHelpFormatter,
    )


def utc_now() -> str:
    """Now, for a results file: ISO 8601 in UTC, to the second."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def machine(device: str | None) -> dict[str, Any]:
    """Device, software versions, date and commit for a results file."""
    import torch

    from harness.engine.device import device_info, select_device

    info = device_info(select_device(device))
    commit = (git_commit() or "")[:7]
    return {
        "device": info.name,
        "device_kind": info.kind,
        "driver": info.driver,
        "torch": torch.__version__,
        "triton": info.triton,
        "python": platform.python_version(),
        "date": utc_now(),
        "commit": commit or None,
    }


def copy_file(src: Path, dest: Path, i: int, text: str | None = None) -> Path:
    """A byte-different copy of ``src`` (or of ``text``) named after ``dest``: the same code, its name
    header replaced by ``# name: <dest's stem>``, and a trailing comment."""
    lines = (src.read_text() if text is None else text).splitlines(keepends=True)
    kept = [ln for ln in lines if not ln.lower().startswith(("# name:", "#!popcorn name"))]
    head = 1 if kept and kept[0].startswith("#!") else 0
    kept.insert(head, f"# name: {dest.stem}\n")
    dest.write_text("".join(kept) + f"\n# byte-different copy {i} (bench)\n")
    return dest


def median(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    return statistics.median(xs) if xs else None


def paired_log_diff(base: list[float | None], other: list[float | None]) -> dict[str, Any]:
    """The rounds' log(other / base): mean and 95% t interval (None with fewer than 2 paired rounds), by
    the tie rule's paired comparison (``harness.analysis.ties.paired``)."""
    from harness.analysis.ties import paired

    pairs = [(o, b) for b, o in zip(base, other) if b and o]
    if not pairs:
        return {"rounds": 0, "mean_log_diff": None, "ci95": None}
    d = paired([o for o, _ in pairs], [b for _, b in pairs])
    ci95 = [math.log(d.low), math.log(d.high)] if math.isfinite(d.low) else None
    return {"rounds": len(pairs), "mean_log_diff": math.log(d.ratio), "ci95": ci95}


def write_results(out: Path, data: dict[str, Any], quiet: bool = False) -> None:
    """Write ``data`` as JSON to ``out`` atomically: a temporary file beside it, then ``os.replace``, so a
    reader (or a kill) never sees half a file."""
    out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=2, sort_keys=True, allow_nan=False, default=str) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if not quiet:
        say(f"wrote {rel(out)}")


class ResultsFile:
    """A results file written after every finished unit (``"complete": false`` until ``finish``), and the
    time budget: ``allows`` says whether a unit may start, from an estimate of its wall time (given, or
    the median of the finished units of its kind, else of all finished units, else 0: the first unit
    starts whenever the budget is not already spent)."""

    def __init__(
        self, out: Path, doc: dict[str, Any], budget_s: float | None, earlier_s: float = 0.0, earlier_units: int = 0
    ) -> None:
        """``earlier_s``, ``earlier_units``: what earlier calls that this one continues (a --resume)
        spent and finished; the file's ``elapsed_s`` and ``units_done`` count them too, the budget not."""
        if budget_s is not None and not (budget_s > 0 and math.isfinite(budget_s)):
            raise SystemExit(f"--budget-s {budget_s}: give a positive number of seconds (or leave it out)")
        self.out, self.doc, self.budget_s, self.earlier_s = out, doc, budget_s, earlier_s
        self.t0 = time.monotonic()
        self.walls: dict[str, list[float]] = {}
        doc.update(complete=False, budget_s=budget_s, stopped=None, units_done=earlier_units, elapsed_s=earlier_s)
        write_results(out, doc, quiet=True)  # a kill before the first unit still leaves a (marked) file

    def elapsed(self) -> float:
        """This call's seconds so far (what the budget counts)."""
        return time.monotonic() - self.t0

    def estimate(self, kind: str) -> float:
        mine = self.walls.get(kind)
        if mine:
            return statistics.median(mine)
        every = [w for ws in self.walls.values() for w in ws]
        return statistics.median(every) if every else 0.0

    def allows(self, unit: str, kind: str, estimate_s: float | None = None) -> bool:
        """True when ``unit`` may start; else records why not (the file then stays incomplete)."""
        if self.doc["stopped"] is not None:
            return False
        if self.budget_s is None:
            return True
        guess = self.estimate(kind) if estimate_s is None else estimate_s
        if self.elapsed() + guess <= self.budget_s:
            return True
        why = (
            f"budget: {unit} not started: {self.elapsed():.1f} s spent + ~{guess:.1f} s estimated "
            f"> --budget-s {self.budget_s:g}"
        )
        self.doc["stopped"] = why
        say(why)
        return False

    def done(self, kind: str, wall_s: float) -> None:
        """A unit finished: remember its wall time and write the file (still incomplete)."""
        self.walls.setdefault(kind, []).append(wall_s)
        self.doc["units_done"] += 1
        self.doc["elapsed_s"] = self.earlier_s + self.elapsed()
        write_results(self.out, self.doc, quiet=True)

    def finish(self) -> None:
        """The last write: complete unless the budget stopped a unit from starting."""
        self.doc["complete"] = self.doc["stopped"] is None
        self.doc["elapsed_s"] = self.earlier_s + self.elapsed()
        write_results(self.out, self.doc)
