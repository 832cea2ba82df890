"""Where a verdict server listens: a Unix socket in a folder only its user can enter, named by a
fingerprint of everything a run takes from its process (the code of this repository, the interpreter
and its installed packages, the environment but for a few variables that differ from shell to shell). A client finds a server only
when its own fingerprint matches, so a server never runs a verdict with other code or settings than the
client's own process would have."""

from __future__ import annotations

import hashlib
import json
import os
import site
import stat
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from harness.engine.seeds import SECRET_ENV
from harness.errors import UsageError

APP = "fp4-harness"
ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("harness", "tasks", "fp4_reference")  # the code a run executes
# what a run takes from each request, not from the server's own environment
PER_REQUEST_ENV = (SECRET_ENV, "PWD", "OLDPWD")
# what differs between two shells of one user and changes no run
SHELL_ENV = ("SHLVL", "_", "COLUMNS", "LINES", "PS1", "PS2", "PROMPT_COMMAND", "DISPLAY", "WINDOWID", "STY")
SHELL_ENV_PREFIXES = ("SSH_", "TERM", "TMUX", "XDG_SESSION_", "HISTFILE")
MAX_FOLDER_CHARS = 60  # a Unix socket's path has at most 107 bytes: folder + /fp4-harness/ + 25
DISABLE_ENV = "HARNESS_NO_SERVER"  # set to 1: run never uses a server


def ignored(name: str) -> bool:
    """Whether environment variable ``name`` is left out of the fingerprint."""
    return name in PER_REQUEST_ENV or name in SHELL_ENV or name.startswith(SHELL_ENV_PREFIXES)


def code_state() -> list[tuple[str, int, int]]:
    """(path, size, modification time) of every file of the repository's packages: an edit anywhere
    changes the fingerprint, so a server started before it is not used."""
    files = []
    for package in SOURCES:
        for path in sorted((ROOT / package).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                st = path.stat()
                files.append((str(path.relative_to(ROOT)), st.st_size, st.st_mtime_ns))
    return files


def installed_state() -> list[tuple[str, int]]:
    """(folder, modification time) of each site-packages folder: installing or removing a package (a new
    torch) changes its entries, so a server that imported the old one is not used."""
    folders = [*site.getsitepackages(), site.getusersitepackages()]
    return [(f, os.stat(f).st_mtime_ns) for f in folders if os.path.isdir(f)]


def fingerprint(environ: Mapping[str, str]) -> str:
    """What a server must share with a client to run its verdicts, as a short hash."""
    state = {
        "python": [sys.executable, sys.version],
        "installed": installed_state(),
        "root": str(ROOT),
        "code": code_state(),
        "env": sorted((k, v) for k, v in environ.items() if not ignored(k)),
    }
    return hashlib.sha256(json.dumps(state).encode()).hexdigest()[:20]


def server_folder(create: bool = False) -> Path:
    """The folder of this user's servers: ``$XDG_RUNTIME_DIR/fp4-harness`` where that exists (and is short
    enough for a socket's path), else one in the temporary folder named by the user id. It must be this user's, a real folder, and closed to
    everyone else (a socket in a folder another user can write could be theirs); else a UsageError."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(tempfile.gettempdir()) / f"{APP}-{os.getuid()}"
    if runtime and Path(runtime).is_dir() and len(runtime) <= MAX_FOLDER_CHARS:
        base = Path(runtime) / APP
    if create:
        base.mkdir(mode=0o700, exist_ok=True)
    try:
        st = os.lstat(base)
    except FileNotFoundError:
        return base
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise UsageError(
            f"the verdict servers' folder {base} is not a folder of yours closed to others (owner uid "
            f"{st.st_uid}, mode {stat.filemode(st.st_mode)}); remove it, or set XDG_RUNTIME_DIR to a folder of yours"
        )
    return base


def socket_path(environ: Mapping[str, str], create: bool = False) -> Path:
    """Where the server for ``environ`` (and this code) listens."""
    return server_folder(create) / f"{fingerprint(environ)}.sock"
