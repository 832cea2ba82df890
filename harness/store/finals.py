"""The store's final scorings (schema step 4): one ``finals`` row per final scoring of a board's top
entries, one ``final_blocks`` row per block an entry ran in a round. A block is written as soon as it
is measured, so an interrupted final keeps every block it finished and a rerun with the same key
continues it (``open_final``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from harness.store.database import Store, now_iso

RUNNING, DONE = "running", "done"


@dataclass
class FinalRow:
    id: int
    task: str
    device_name: str
    final_key: str
    state: str
    config: dict[str, Any]
    result: dict[str, Any] | None
    started_at: str
    finished_at: str | None


@dataclass
class FinalBlock:
    round: int
    sha256: str
    verdict: str
    score_us: float | None
    message: str
    detail: dict[str, Any]


def _final(r: Any) -> FinalRow:
    return FinalRow(
        id=r["id"],
        task=r["task"],
        device_name=r["device_name"],
        final_key=r["final_key"],
        state=r["state"],
        config=json.loads(r["config"] or "{}"),
        result=json.loads(r["result_json"]) if r["result_json"] else None,
        started_at=r["started_at"],
        finished_at=r["finished_at"],
    )


def open_final(st: Store, task: str, device: str, key: str, config: dict[str, Any]) -> tuple[FinalRow, bool]:
    """The unfinished final scoring with ``key`` (resumed: True), else a new one (False)."""

    def txn(db: Any) -> tuple[int, bool]:
        row = db.execute(
            "SELECT id FROM finals WHERE final_key = ? AND state = ? ORDER BY id DESC", (key, RUNNING)
        ).fetchone()
        if row is not None:
            return row["id"], True
        new = db.execute(
            "INSERT INTO finals (task, device_name, final_key, state, config, started_at)"
            " VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
            (task, device, key, RUNNING, json.dumps(config, sort_keys=True), now_iso()),
        ).fetchone()
        return new["id"], False

    final_id, resumed = st.transaction(txn)
    return get_final(st, final_id), resumed


def get_final(st: Store, final_id: int) -> FinalRow:
    row = st.db.execute("SELECT * FROM finals WHERE id = ?", (final_id,)).fetchone()
    if row is None:
        raise KeyError(f"no final scoring with id {final_id} in {st.location}")
    return _final(row)


def add_block(st: Store, final_id: int, block: FinalBlock) -> None:
    """Stores one entry's block of one round (replacing an earlier attempt at the same one)."""

    def txn(db: Any) -> None:
        db.execute(
            "DELETE FROM final_blocks WHERE final_id = ? AND round = ? AND submission_sha256 = ?",
            (final_id, block.round, block.sha256),
        )
        db.execute(
            "INSERT INTO final_blocks (final_id, round, submission_sha256, verdict, score_us, message, detail)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                final_id,
                block.round,
                block.sha256,
                block.verdict,
                block.score_us,
                block.message,
                json.dumps(block.detail, sort_keys=True, default=str),
            ),
        )

    st.transaction(txn)


def blocks(st: Store, final_id: int) -> list[FinalBlock]:
    rows = st.db.execute(
        "SELECT * FROM final_blocks WHERE final_id = ? ORDER BY round, submission_sha256", (final_id,)
    ).fetchall()
    return [
        FinalBlock(
            r["round"],
            r["submission_sha256"],
            r["verdict"],
            r["score_us"],
            r["message"],
            json.loads(r["detail"] or "{}"),
        )
        for r in rows
    ]


def finish_final(st: Store, final_id: int, result: dict[str, Any]) -> None:
    text = json.dumps(result, sort_keys=True, allow_nan=False)
    st.transaction(
        lambda db: db.execute(
            "UPDATE finals SET state = ?, result_json = ?, finished_at = ? WHERE id = ?",
            (DONE, text, now_iso(), final_id),
        )
    )


def latest_final(st: Store, task: str, device: str | None = None) -> FinalRow | None:
    """The newest finished final scoring of ``task`` (on ``device``), or None."""
    sql, params = "SELECT * FROM finals WHERE task = ? AND state = ?", [task, DONE]
    if device is not None:
        sql += " AND device_name = ?"
        params.append(device)
    row = st.db.execute(sql + " ORDER BY id DESC", params).fetchone()
    return _final(row) if row is not None else None


def finals(st: Store, task: str) -> list[FinalRow]:
    """Every finished final scoring of ``task``, newest first."""
    rows = st.db.execute("SELECT * FROM finals WHERE task = ? AND state = ? ORDER BY id DESC", (task, DONE)).fetchall()
    return [_final(r) for r in rows]
