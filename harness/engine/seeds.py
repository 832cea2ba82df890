"""The leaderboard's secret seed: where it comes from and how case seeds are derived from it.

The secret is read by the parent only and removed from its environment before any worker starts;
workers receive only the per-input seeds derived from it (:func:`derive_seed`), each right before
the worker generates that input, which give away nothing the input itself does not.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import UsageError

if TYPE_CHECKING:
    from harness.engine.options import RunOptions

SECRET_ENV = "HARNESS_SECRET_SEED"


def take_env_secret() -> str | None:
    """$HARNESS_SECRET_SEED, removed from this process's environment (and its original block)."""
    from_env = os.environ.pop(SECRET_ENV, None)
    if from_env:
        _scrub_initial_environ(f"{SECRET_ENV}=".encode())
    return from_env


def take_secret(secret_file: str | None = None) -> tuple[str, str]:
    """Returns (secret, where it came from), and removes it from this process's environment."""
    from_env = take_env_secret()
    if secret_file:
        try:
            secret = Path(secret_file).read_text().strip()
        except OSError as exc:
            raise UsageError(
                f"cannot read the secret seed file {secret_file!r}: {exc.strerror}; "
                "give a readable file, or set the secret in $" + SECRET_ENV
            ) from exc
        if not secret:
            raise UsageError(f"the secret seed file {secret_file!r} is empty; write the secret into it")
        return secret, f"file {secret_file}"
    if from_env:
        return from_env, f"${SECRET_ENV}"
    return secrets.token_hex(16), RANDOM_SOURCE


RANDOM_SOURCE = "random (no --secret-file or $" + SECRET_ENV + " given)"


def give_secret(options: RunOptions, secret_file: str | None = None) -> None:
    """Sets ``options.secret`` from :func:`take_secret` and adds what the run's warnings say of it."""
    options.secret, source = take_secret(secret_file)
    options.extra_warnings += secret_notes(source)


def secret_notes(source: str) -> list[str]:
    """What a run's warnings say of its secret: where a given one came from (an organizer's audit), and
    nothing for a random one, the right default, which asks nothing of the user."""
    return [] if source == RANDOM_SOURCE else [f"secret seed: {source}"]


def _scrub_initial_environ(prefix: bytes) -> None:
    """Overwrites ``NAME=value`` in this process's original environment block (what
    /proc/<pid>/environ shows; ``os.environ.pop`` leaves it there) with zero bytes. Linux only."""
    try:
        import ctypes

        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end (fields 50, 51)
        block = ctypes.string_at(start, end - start)
        at = block.find(prefix)
        while at != -1 and at > 0 and block[at - 1] != 0:  # only at the start of an entry
            at = block.find(prefix, at + 1)
        if at != -1:
            stop = block.find(b"\0", at)
            ctypes.memset(start + at, 0, (stop if stop != -1 else len(block)) - at)
    except (OSError, ValueError, IndexError):
        pass


def derive_seed(secret: str, public_seed: int, index: int) -> int:
    """A 63-bit seed for input ``index`` of a case; unpredictable without the secret."""
    digest = hashlib.blake2b(f"{secret}:{public_seed}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1
