"""Results measured while the store was unreachable, kept in local files until it is back.

When writing a finished job's result fails after the backend's reconnect budget, the driver saves it
here (one JSON file per result, written atomically) before it stops; the next run-all on the same
store writes every saved result into its job (unless the job got its verdict meanwhile) and deletes
the file. Where: ``$HARNESS_SPOOL_DIR``, else ``$XDG_STATE_HOME/harness/spool``, else
``~/.local/state/harness/spool``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from harness.results import RunResult
from harness.store.database import Store

SPOOL_ENV = "HARNESS_SPOOL_DIR"


def spool_dir() -> Path:
    if os.environ.get(SPOOL_ENV):
        return Path(os.environ[SPOOL_ENV])
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "harness" / "spool"


def _store_key(location: str) -> str:
    return hashlib.sha256(location.encode()).hexdigest()[:16]


def save(location: str, job_id: int, result: RunResult, display_name: str | None) -> Path:
    """Keeps one finished result for ``job_id`` of the store at ``location``; returns its file."""
    folder = spool_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{_store_key(location)}-job{job_id}.json"
    tmp = path.with_suffix(".tmp")
    data = {"job_id": job_id, "display_name": display_name, "result": json.loads(result.to_json(indent=None))}
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)
    return path


def pending(location: str) -> list[Path]:
    folder = spool_dir()
    return sorted(folder.glob(f"{_store_key(location)}-job*.json")) if folder.is_dir() else []


def replay(store: Store, location: str, say: Callable[[str], None]) -> int:
    """Writes every result kept for the store at ``location`` into its job; returns how many were
    written (a job that got its verdict meanwhile keeps it, and the kept result is dropped)."""
    from harness.store.jobs import JobTable

    written = 0
    for path in pending(location):
        data = json.loads(path.read_text())
        result = RunResult.from_json(json.dumps(data["result"]))
        if JobTable(store).finish(int(data["job_id"]), None, result, data.get("display_name")):
            written += 1
            say(f"stored the result of job {data['job_id']} kept in {path} while the store was unreachable")
        else:
            say(f"dropped the kept result {path}: job {data['job_id']} has its verdict already")
        path.unlink()
    return written
