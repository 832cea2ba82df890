"""The parent's requests to the worker, one dataclass each: built and checked once in the parent, encoded
once (:meth:`Request.encode`, a plain dict that :func:`harness.protocol.send_to_worker` pickles), decoded
and checked once in the worker (:func:`decode_request`). The defaults live here, nowhere else.

The replies are :mod:`harness.messages`. This module imports no part of the parent: the worker uses it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from harness.protocol import ProtocolError

TIMING_PROTOCOLS = ("per_call", "batched")


def _count(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _positive(x: object) -> bool:
    return _count(x) and x > 0  # type: ignore[operator]


def _millis(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0


def _flag(x: object) -> bool:
    return isinstance(x, bool)


def _slots(x: object) -> bool:
    return isinstance(x, (list, tuple)) and all(_count(v) for v in x)


def _specs(x: object) -> bool:
    """Cases with their seeds: keyword arguments of the task's ``generate_input``."""
    return isinstance(x, (list, tuple)) and all(isinstance(s, dict) and all(isinstance(k, str) for k in s) for s in x)


def _protocol(x: object) -> bool:
    return x in TIMING_PROTOCOLS


def _checked(valid: Callable[[object], bool], **kwargs: Any) -> Any:
    """A dataclass field whose value ``valid`` accepts (checked when the request is built or decoded)."""
    return field(metadata={"valid": valid}, **kwargs)


@dataclass(frozen=True)
class Request:
    """One request; ``OP`` names it on the wire."""

    OP: ClassVar[str] = ""

    def __post_init__(self) -> None:
        for f in fields(self):
            valid = f.metadata.get("valid")
            value = getattr(self, f.name)
            if valid is not None and not valid(value):
                raise ProtocolError(f"a {self.OP!r} request with a malformed {f.name!r} field: {value!r:.200}")

    def encode(self) -> dict[str, Any]:
        return {"op": self.OP, **{f.name: getattr(self, f.name) for f in fields(self)}}


@dataclass(frozen=True)
class Load(Request):
    """Import the submission and find ``custom_kernel``."""

    OP: ClassVar[str] = "load"


@dataclass(frozen=True)
class Exit(Request):
    """Stop the worker (no reply)."""

    OP: ClassVar[str] = "exit"


HELD_STEP = "held"  # the start-up step (Ready.startup_s) a held worker spent waiting for Proceed


@dataclass(frozen=True)
class Proceed(Request):
    """A held worker (``WorkerConfig.hold``) goes on with its start: the launch gate, the calibration and
    the ready message (no reply of its own)."""

    OP: ClassVar[str] = "proceed"


@dataclass(frozen=True)
class Generate(Request):
    """Generate the inputs of ``specs`` (a case with its seed each) as slots, keeping the first ``keep``."""

    OP: ClassVar[str] = "generate"
    specs: Sequence[dict[str, Any]] = _checked(_specs)
    keep: int = _checked(_count, default=0)


@dataclass(frozen=True)
class Call(Request):
    """Call the submission once on the input in slot ``data`` and return its output."""

    OP: ClassVar[str] = "call"
    data: int = _checked(_count)


@dataclass(frozen=True)
class Warmup(Request):
    """Call on slot ``data`` until ``min_calls`` calls and ``min_ms`` ms have passed (at most ``max_calls``)."""

    OP: ClassVar[str] = "warmup"
    data: int = _checked(_count)
    min_calls: int = _checked(_positive, default=1)
    min_ms: float = _checked(_millis, default=0)
    max_calls: int = _checked(_positive, default=1000)


@dataclass(frozen=True)
class Time(Request):
    """Time the calls on the slots ``inputs`` with the task's ``protocol``; return the outputs at the
    indices ``returned``; ``heat_ms`` of the harness's own GPU work first; ``touch``: read each input."""

    OP: ClassVar[str] = "time"
    protocol: str = _checked(_protocol)
    inputs: Sequence[int] = _checked(_slots)
    returned: Sequence[int] = _checked(_slots, default=())
    heat_ms: float = _checked(_millis, default=0)
    touch: bool = _checked(_flag, default=False)


@dataclass(frozen=True)
class Profile(Request):
    """``calls`` calls on slot ``data`` under torch's profiler; reply with its table."""

    OP: ClassVar[str] = "profile"
    data: int = _checked(_count)
    calls: int = _checked(_positive, default=5)


@dataclass(frozen=True)
class MeasureKernelOnly(Request):
    """The kernel-only figure on the slots ``inputs``: ``n`` flush+call pairs per graph, ``replays`` replays;
    ``profiler``: the profiler's kernel sum too; ``calls``: eager calls where capture fails."""

    OP: ClassVar[str] = "kernel_only"
    inputs: Sequence[int] = _checked(_slots)
    n: int = _checked(_positive, default=20)
    replays: int = _checked(_positive, default=7)
    profiler: bool = _checked(_flag, default=False)
    calls: int = _checked(_positive, default=10)


@dataclass(frozen=True)
class ShareOutputs(Request):
    """Map the region of ``nbytes`` whose descriptor follows this request on the channel
    (``harness.shared_outputs``) and place the outputs of later replies there."""

    OP: ClassVar[str] = "share_outputs"
    nbytes: int = _checked(_positive)


REQUESTS: dict[str, type[Request]] = {
    cls.OP: cls for cls in (Load, Exit, Proceed, Generate, Call, Warmup, Time, Profile, MeasureKernelOnly, ShareOutputs)
}


def decode_request(msg: object) -> Request:
    """The worker's side: the request in ``msg`` (a dict from :meth:`Request.encode`, plus the sequence
    number ``seq``), checked; raises ProtocolError for an unknown op, an unknown or missing field, or
    a malformed value."""
    if not isinstance(msg, dict):
        raise ProtocolError(f"a request that is not a dict ({type(msg).__name__})")
    cls = REQUESTS.get(msg.get("op"))  # type: ignore[arg-type]
    if cls is None:
        raise ProtocolError(f"unknown request {msg.get('op')!r}; known: {', '.join(REQUESTS)}")
    names = {f.name for f in fields(cls)}
    unknown = set(msg) - names - {"op", "seq"}
    if unknown:
        raise ProtocolError(f"a {cls.OP!r} request with unknown field(s) {', '.join(sorted(unknown))}")
    try:
        return cls(**{k: v for k, v in msg.items() if k in names})
    except TypeError as exc:  # a required field missing
        raise ProtocolError(f"a {cls.OP!r} request without a required field ({exc})") from exc
