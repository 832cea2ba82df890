"""Messages between the verdict-deciding parent and the submission's worker process.

Parent -> worker: requests (:mod:`harness.requests`) pickled as plain dicts (the trusted direction), never tensors: the worker generates its
inputs from seeds with the task's own generator, and the parent checks by fingerprints that they
match its copies. So the worker needs no access to the parent's memory or GPU memory and can run as
another user (CUDA IPC between users fails, and a worker able to map the parent's memory could read it).
Worker -> parent: never pickled, since the worker runs untrusted code. A message is one JSON
frame, followed by one raw-bytes frame per tensor it announces in ``"tensors"``. The parent
rebuilds tensors itself from an allow-listed dtype, a shape and exactly the right byte count.
"""

from __future__ import annotations

import json
import math
import pickle
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any, Protocol

import torch

MAX_HEADER_BYTES = 4 << 20  # a JSON frame larger than this is a protocol violation
MAX_TENSOR_BYTES = 2 << 30  # one output tensor
# A timing reply's per-sample lists, one entry per sample each: event time, host wall time, the device
# clock's window (or None), whether the launch gate held, the host time nothing hid (or None).
TIMING_SERIES = ("samples_ns", "wall_ns", "window_ns", "gate_held", "unhidden_host_ns")
# where a chunk of timed calls spends the worker's time: the harness's heat before it, reading each
# input, the timed calls (flush and sample included), copying the returned outputs to the host
TIMING_STEPS = ("heat", "touch", "calls", "outputs")
_DTYPES = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.float32,
        torch.float16,
        torch.bfloat16,
        torch.float64,
        torch.uint8,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.bool,
    )
}
for _name in ("float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu", "float4_e2m1fn_x2"):
    if hasattr(torch, _name):
        _DTYPES[_name] = getattr(torch, _name)


def accepts_dtype(name: object) -> bool:
    """Whether the parent rebuilds outputs of this dtype (any other dtype is a wrong output)."""
    return name in _DTYPES


class ProtocolError(Exception):
    """The worker sent something that is not a well-formed message (tampering or a crash mid-write)."""


class Encodable(Protocol):
    """A request of :mod:`harness.requests` (which imports this module, hence the structural type)."""

    def encode(self) -> dict[str, Any]: ...


def send_to_worker(conn: Connection, request: Encodable, seq: int | None = None) -> None:
    """Parent side: ``request`` encoded, with its sequence number. It holds no tensors: the worker makes
    its inputs itself (see ``harness.worker.main``)."""
    conn.send_bytes(pickle.dumps({**request.encode(), "seq": seq}, protocol=pickle.HIGHEST_PROTOCOL))


def input_fingerprint(data: Sequence[object]) -> list[int]:
    """The byte sum of each tensor's storage in an input tuple: cheap on any device, and enough to show
    that the worker generated the same input from the same seed as the parent (a nondeterministic
    generator, or a submission that changed the inputs, shows as a difference)."""
    sums = [
        torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage()).sum(dtype=torch.int64)
        for t in data
        if isinstance(t, torch.Tensor)
    ]
    return torch.stack(sums).tolist() if sums else []


_last_seq: int | None = None  # worker side: the sequence number of the request being answered


def receive_from_parent(conn: Connection) -> dict[str, Any]:
    """Worker side (the parent is trusted, so unpickling is fine here); :func:`harness.requests.decode_request`
    checks what arrives."""
    global _last_seq
    msg = pickle.loads(conn.recv_bytes())
    if not isinstance(msg, dict):
        raise ProtocolError(f"a request that is not a dict ({type(msg).__name__})")
    seq = msg.get("seq")
    _last_seq = seq if isinstance(seq, int) else None
    return msg


def describe_output(out: object) -> dict[str, Any]:
    """Worker side: what the parent needs to rebuild ``out``; ``{"kind": "object"}`` when not a tensor."""
    if type(out) is not torch.Tensor:  # a subclass could compute when the harness reads it, untimed
        return {"kind": "object", "type": type(out).__name__}
    return {
        "kind": "tensor",
        "dtype": str(out.dtype).removeprefix("torch."),
        "shape": list(out.shape),
        "device": out.device.type,
    }


def tensor_bytes(out: torch.Tensor) -> bytes:
    """Worker side: the tensor's values, contiguous, as raw bytes (a host copy)."""
    t = out.detach().cpu().reshape(-1)
    return t.view(torch.uint8).numpy().tobytes() if t.numel() else b""


def send(conn: Connection, header: dict[str, Any], payloads: Sequence[bytes] = ()) -> None:
    """Worker side; the reply echoes the request's sequence number (see ``Supervisor.request``)."""
    header = dict(header, tensors=len(payloads), seq=_last_seq)
    conn.send_bytes(json.dumps(header, allow_nan=True).encode())
    for raw in payloads:
        conn.send_bytes(raw)


def receive(conn: Connection) -> tuple[dict[str, Any], list[bytes]]:
    """Parent side: one message. Raises ProtocolError on anything malformed, EOFError on a dead worker."""
    try:
        raw = conn.recv_bytes(MAX_HEADER_BYTES)
    except OSError as exc:  # message too long, or a broken frame
        raise ProtocolError(f"unreadable message from the worker: {exc}") from exc
    try:
        header = json.loads(raw)
    except ValueError as exc:
        raise ProtocolError("the worker sent a frame that is not JSON") from exc
    if not isinstance(header, dict) or not isinstance(header.get("tensors", 0), int):
        raise ProtocolError("the worker sent a malformed header")
    payloads = []
    for _ in range(header.get("tensors", 0)):
        try:
            payloads.append(conn.recv_bytes(MAX_TENSOR_BYTES))
        except OSError as exc:
            raise ProtocolError(f"unreadable tensor frame from the worker: {exc}") from exc
    return header, payloads


def dtype_itemsize(name: str) -> int:
    """Bytes per element of an accepted output dtype (see :func:`accepts_dtype`)."""
    return _DTYPES[name].itemsize


def rebuild_tensor(
    dtype_name: str, shape: Sequence[int], raw: bytes, source_device: str, device: torch.device
) -> torch.Tensor:
    """Parent side: a tensor from ``describe_output`` metadata and its bytes, on ``device`` when the
    worker's output was on the same kind of device (``source_device``), else on the CPU (so the check
    reports the device). The reply's decoder (``harness.messages``) validated all of it already; this
    checks again, next to the bytes' use."""
    dtype = _DTYPES.get(dtype_name)
    if dtype is None:
        raise ProtocolError(f"output dtype {dtype_name!r} is not one the harness accepts")
    shape = list(shape)
    if not all(isinstance(s, int) and s >= 0 for s in shape):
        raise ProtocolError("output shape is malformed")
    numel = math.prod(shape)
    if numel * dtype.itemsize != len(raw):
        raise ProtocolError(f"output bytes ({len(raw)}) do not match shape {shape} of {dtype}")
    flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
    t = flat.view(dtype).reshape(shape)
    target = device if source_device == device.type else torch.device("cpu")
    return t.to(target)
