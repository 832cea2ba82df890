"""What the bench scripts share: the machine's facts for a results file, the commit, the example files
per task, byte-different copies, a parser built from a script's docstring, and writing the results file
(repo-relative paths only)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import platform
import statistics
import subprocess
import sys
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


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def rel(path: Path | str) -> str:
    p = Path(path).resolve()
    try:
        return str(p.relative_to(ROOT))
    except ValueError:
        return p.name


def git_commit() -> str | None:
    """The checkout's full commit hash, or None outside a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def doc_parser(doc: str) -> argparse.ArgumentParser:
    """A parser whose description is the first line of a script's docstring ``doc`` and whose epilog is
    what follows its "Examples:"."""
    return argparse.ArgumentParser(
        allow_abbrev=False,
        description=doc.split("\n")[0],
        epilog=doc.split("Examples:")[1],
        formatter_class=argparse.RawTextHelpFormatter,
    )


def machine(device: str | None) -> dict[str, Any]:
    """Device, software versions, date and commit for a results file."""
    import torch

    from harness.engine.device import device_info, select_device

    info = device_info(select_device(device))
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "device": info.name,
        "device_kind": info.kind,
        "driver": info.driver,
        "torch": torch.__version__,
        "triton": info.triton,
        "python": platform.python_version(),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
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


def write_results(out: Path, data: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=2, sort_keys=True, allow_nan=False, default=str) + "\n")
    say(f"wrote {rel(out)}")
