"""The leaderboard's secret seed: where it comes from and how case seeds are derived from it.

The secret is read by the parent only and removed from its environment before any worker starts;
workers receive inputs, never seeds derived from the secret.
"""
from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

from harness.errors import UsageError

SECRET_ENV = "HARNESS_SECRET_SEED"


def take_secret(secret_file: str | None = None) -> tuple[str, str]:
    """Returns (secret, where it came from), and removes it from this process's environment."""
    from_env = os.environ.pop(SECRET_ENV, None)
    if secret_file:
        try:
            secret = Path(secret_file).read_text().strip()
        except OSError as exc:
            raise UsageError(f"cannot read the secret seed file {secret_file!r}: {exc.strerror}; "
                             "give a readable file, or set the secret in $" + SECRET_ENV) from exc
        if not secret:
            raise UsageError(f"the secret seed file {secret_file!r} is empty; write the secret into it")
        return secret, f"file {secret_file}"
    if from_env:
        return from_env, f"${SECRET_ENV}"
    return secrets.token_hex(16), "random (no --secret-file or $" + SECRET_ENV + " given)"


def derive_seed(secret: str, public_seed: int, index: int) -> int:
    """A 63-bit seed for input ``index`` of a case; unpredictable without the secret."""
    digest = hashlib.blake2b(f"{secret}:{public_seed}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1
