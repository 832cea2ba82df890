"""Ray's token authentication, as the harness configures it for a cluster it joins (``--address``).

A cluster started with ``RAY_AUTH_MODE=token`` (and its token in ``RAY_AUTH_TOKEN``, or a file named by
``RAY_AUTH_TOKEN_PATH``, or ``~/.ray/auth_token``) refuses every connection without that token. The
harness takes it from ``--ray-token-file FILE``, else ``$HARNESS_RAY_TOKEN``, and hands it to Ray, in
this driver's environment only, just before ``ray.init`` (Ray reads it from there; nothing else
of the harness sees it, and the submission's worker gets an environment of its own).
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.errors import UsageError

TOKEN_ENV = "HARNESS_RAY_TOKEN"
RAY_MODE_ENV, RAY_TOKEN_ENV, RAY_TOKEN_PATH_ENV = "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"


def token_from(path: str | None) -> str | None:
    """The cluster's token: the file's first line, else $HARNESS_RAY_TOKEN, else None (no auth)."""
    if path:
        try:
            text = Path(path).read_text().strip()
        except OSError as exc:
            raise UsageError(
                f"cannot read the Ray token file {path}: {exc.strerror or exc}; give a readable file"
            ) from exc
        if not text:
            raise UsageError(f"the Ray token file {path} is empty; put the cluster's token in it")
        return text.splitlines()[0].strip()
    token = os.environ.get(TOKEN_ENV, "").strip()
    return token or None


def apply_token(token: str | None) -> None:
    """Makes Ray's next ``ray.init`` present ``token`` (token mode); None leaves Ray's own settings."""
    if token is None:
        return
    os.environ[RAY_MODE_ENV] = "token"
    os.environ[RAY_TOKEN_ENV] = token
    os.environ.pop(RAY_TOKEN_PATH_ENV, None)
