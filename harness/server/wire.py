"""The verdict server's wire: one JSON object per line over a Unix stream socket (torch-free, so that a
client starts in a fraction of a second)."""

from __future__ import annotations

import io
import json
import socket
from pathlib import Path
from typing import Any

MAX_MESSAGE_BYTES = 1 << 20
CONNECT_TIMEOUT_S = 2.0


def send(conn: socket.socket, message: dict[str, Any]) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def read_message(reader: io.BufferedReader) -> dict[str, Any] | None:
    """The next message on a connection, or None at its end or for a line that is not a JSON object."""
    line = reader.readline(MAX_MESSAGE_BYTES)
    if not line:
        return None
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def answering(path: Path) -> bool:
    """Whether a server listens at ``path``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(CONNECT_TIMEOUT_S)
        try:
            probe.connect(str(path))
        except OSError:
            return False
        return True
