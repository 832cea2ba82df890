"""The shell commands of README.md and docs/*.md, as tests/test_docs.py runs them.

A page's fenced blocks are read in order:
- ```bash, ```sh, ```shell: every line is a command (a trailing backslash continues it; blank lines
  and lines starting with '#' are skipped);
- ```console: lines starting with '$ ' are commands, the others are their output (not checked);
- ```python file=NAME: the block is written to NAME in the page's working folder before the commands
  after it run (so a submission shown in the docs is the one the next command runs).

A command may end with a marker comment:
- '# needs: gpu' runs only where torch sees a GPU; '# needs: ray' only where Ray is installed;
  several needs are written with commas ('# needs: gpu,ray'); '# needs: postgres' only where
  $HARNESS_TEST_POSTGRES_URL names a server (the docs' placeholder URL is replaced by a fresh schema there);
  '# needs: setup' (installs, or takes minutes) and '# needs: cluster' (several machines) never run here;
- '# exit: N': the command is expected to exit N (default 0).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHELLS = {"bash", "sh", "shell", "console"}
NEEDS = {"gpu", "ray", "postgres", "setup", "cluster"}
# what the docs write for a PostgreSQL server; the test replaces it with its own server's URL
PLACEHOLDER_URL = "postgresql://harness:PASSWORD@DB_HOST:5432/harness"
MARKER = re.compile(r"\s+#\s*(needs|exit):\s*(\S+)\s*$")
FENCE = re.compile(r"^```(.*)$")


@dataclass
class Command:
    page: str
    line: int  # 1-based line of the page where the command starts
    text: str  # the command, markers removed
    needs: frozenset = frozenset()  # what it needs beyond the CPU fixtures (NEEDS)
    exit_code: int = 0

    @property
    def ident(self) -> str:
        return f"{self.page}:{self.line}"


@dataclass
class FileBlock:
    page: str
    line: int
    name: str
    text: str


@dataclass
class Page:
    name: str
    steps: list = field(default_factory=list)  # Command and FileBlock, in the page's order

    @property
    def commands(self) -> list[Command]:
        return [s for s in self.steps if isinstance(s, Command)]


def pages() -> list[Path]:
    """README.md and every page under docs/ (docs/tasks/ included)."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _command(page: str, line: int, text: str) -> Command:
    needs, exit_code = frozenset(), 0
    while m := MARKER.search(text):
        key, value = m.group(1), m.group(2)
        if key == "needs":
            needs = frozenset(value.split(","))
            if needs - NEEDS:
                raise ValueError(f"{page}:{line}: unknown '# needs: {value}' (each one of {sorted(NEEDS)})")
        else:
            exit_code = int(value)
        text = text[: m.start()]
    return Command(page, line, text.strip(), needs, exit_code)


def _shell_lines(lang: str, body: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """(line number, command) of a shell block, continuation lines joined."""
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, raw in body:
        line = raw.rstrip()
        if pending is None:
            if lang == "console":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            pending = (number, "")
        start, text = pending
        if line.endswith("\\"):
            pending = (start, text + line[:-1].rstrip() + " ")
            continue
        out.append((start, text + line.strip()))
        pending = None
    if pending is not None:
        raise ValueError(f"line {pending[0]}: a command ends with a backslash and nothing follows")
    return out


def parse(text: str, page: str) -> Page:
    """The page's commands and files, in order."""
    result = Page(page)
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        info = m.group(1).split()
        start = i + 1
        end = start
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        if end == len(lines):
            raise ValueError(f"{page}:{i + 1}: a fenced block is never closed")
        body = [(n + 1, lines[n]) for n in range(start, end)]
        lang = info[0] if info else ""
        if lang in SHELLS:
            result.steps += [_command(page, n, t) for n, t in _shell_lines(lang, body)]
        files = [tok.split("=", 1)[1] for tok in info[1:] if tok.startswith("file=")]
        if files:
            result.steps.append(FileBlock(page, i + 1, files[0], "\n".join(t for _, t in body) + "\n"))
        i = end + 1
    return result


@dataclass
class Outcome:
    command: Command
    skipped: str | None = None  # the reason, when it did not run
    returncode: int | None = None
    output: str = ""
    seconds: float = 0.0


def skip_reason(cmd: Command, gpu: bool, postgres_url: str | None) -> str | None:
    import importlib.util

    if "setup" in cmd.needs:
        return "sets up a machine or takes minutes (marked '# needs: setup')"
    if "cluster" in cmd.needs:
        return "needs several machines (marked '# needs: cluster')"
    if "gpu" in cmd.needs and not gpu:
        return "needs a GPU (marked '# needs: gpu')"
    if "ray" in cmd.needs and importlib.util.find_spec("ray") is None:
        return "needs Ray (marked '# needs: ray'): pip install '.[cluster]'"
    if "postgres" in cmd.needs and not postgres_url:
        return "needs PostgreSQL: set HARNESS_TEST_POSTGRES_URL (scripts/test_postgres.sh)"
    return None


def workdir(tmp: Path) -> Path:
    """A folder that looks like the repository (its top-level entries linked) where the commands may
    write what they like (result.json, site/, ...) without touching the checkout."""
    for entry in ROOT.iterdir():
        if entry.name in {".git", ".venv", "harness-results"}:
            continue
        (tmp / entry.name).symlink_to(entry)
    return tmp


def run_page(
    page: Page, tmp: Path, env: dict, gpu: bool, postgres_url: str | None = None, timeout_s: float = 180.0
) -> list[Outcome]:
    """Runs the page's commands in order in ``tmp`` (a :func:`workdir`), writing its file blocks as they
    come. Each command runs with bash -c under ``timeout_s``; ``postgres_url`` replaces the docs'
    placeholder URL (commands marked '# needs: postgres' are skipped without it)."""
    outcomes = []
    for step in page.steps:
        if isinstance(step, FileBlock):
            target = tmp / step.name
            if target.is_symlink():
                raise ValueError(f"{step.page}:{step.line}: file={step.name} would overwrite the repository's own")
            target.write_text(step.text)
            continue
        reason = skip_reason(step, gpu, postgres_url)
        if reason:
            outcomes.append(Outcome(step, skipped=reason))
            continue
        text = step.text.replace(PLACEHOLDER_URL, postgres_url) if postgres_url else step.text
        started = time.monotonic()
        try:
            proc = subprocess.run(
                ["bash", "-c", text],
                cwd=tmp,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
            code, output = proc.returncode, proc.stdout[-3000:] + proc.stderr[-3000:]
        except subprocess.TimeoutExpired as e:
            code, output = None, f"timed out after {timeout_s:.0f} s: {shlex.quote(text)}\n{e.stderr or ''}"
        outcomes.append(Outcome(step, None, code, output, time.monotonic() - started))
    return outcomes


def environment(store: Path) -> dict:
    """The commands' environment: this Python's folder first on PATH, a results store of their own."""
    import sys

    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = sys.prefix
    env["HARNESS_STORE"] = str(store)
    env.pop("HARNESS_RESULTS_DIR", None)
    env.pop("HARNESS_SECRET_SEED", None)
    return env
