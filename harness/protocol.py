"""Messages between the verdict-deciding parent and the submission's worker process.

Parent -> worker: requests (:mod:`harness.requests`) pickled as plain dicts (the trusted direction), never tensors: the worker generates its
inputs from seeds with the task's own generator, and the parent checks by fingerprints that they
match its copies. So the worker needs no access to the parent's memory or GPU memory and can run as
another user (CUDA IPC between users fails, and a worker able to map the parent's memory could read it).
Worker -> parent: never pickled, since the worker runs untrusted code. A message is one JSON
frame, followed by one raw-bytes frame per tensor it announces in ``"tensors"`` (frames:
:mod:`harness.channel`, read within a time limit). The parent rebuilds tensors itself from an
allow-listed dtype, a shape and exactly the right byte count.
"""

from __future__ import annotations

import json
import math
import pickle
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any, Protocol

import torch

from harness.channel import REPLY_GRACE_S, ChannelError, FrameReader, write_frame

MAX_HEADER_BYTES = 4 << 20  # a JSON frame larger than this is a protocol violation
MAX_TENSOR_BYTES = 2 << 30  # one output tensor
MAX_TENSOR_FRAMES = 1 << 16  # in one message
MAX_MESSAGE_BYTES = 4 << 30  # all of one message's tensors (a ranked nvfp4 chunk's 50 outputs: 90 MB)
Message = tuple[dict[str, Any], list[torch.Tensor]]  # a reply as it arrives: its header, its tensors' bytes
# A timing reply's per-sample lists, one entry per sample each: event time, the tail (host time from the
# end event seen complete to the device idle), the device clock's window (or None), whether the launch
# gate held, the host time nothing hid (or None), a second synchronize's host time right after the
# tail's, the device idle (or None; a diagnostic of the host), the device clock's time from the end
# stamp until every SM had room again (or None; the running kernel's rest, without the host).
TIMING_SERIES = (
    "samples_ns",
    "tail_ns",
    "window_ns",
    "gate_held",
    "unhidden_host_ns",
    "idle_sync_ns",
    "device_tail_ns",
)
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


def input_fingerprints(inputs: Sequence[Sequence[object]]) -> list[list[int]]:
    """The sum of each tensor's storage in each input tuple, read as 8-byte words (and its last bytes
    one by one): cheap on any device, and enough to show that the worker generated the same inputs from
    the same seeds as the parent (a nondeterministic generator, or a submission that changed the inputs,
    shows as a difference). All are read back together: one wait for the device, not one per input."""
    sums = [[_storage_sum(t) for t in data if isinstance(t, torch.Tensor)] for data in inputs]
    flat = [s for row in sums for s in row]
    values = iter(torch.stack(flat).tolist() if flat else [])
    return [[next(values) for _ in row] for row in sums]


def _storage_sum(t: torch.Tensor) -> torch.Tensor:
    """The sum (int64, wrapping modulo 2^64, not read back) of ``t``'s whole storage as int64 words, plus
    its last ``nbytes % 8`` bytes. Integer addition modulo 2^64 gives one result in any order, on any
    device. Words of 8 bytes summed as they are, not 4-byte words widened to int64 first: on the CPU
    that widening made a 58 MB operand's sum about 40 times slower, and summing it byte by byte was
    slower again (``bench/check_cost.py`` times ``fingerprint_s`` per shape). Where the storage is whole
    words of ``t``'s own elements (every tensor the tasks' generators make), one flat view of ``t`` over
    it is read: one op instead of several (the host's launches bound a chunk of small inputs)."""
    storage = t.untyped_storage()
    nbytes, size = storage.nbytes(), t.element_size()
    if nbytes % 8 == 0 and nbytes % size == 0:
        return torch.as_strided(t, (nbytes // size,), (1,), 0).view(torch.int64).sum()
    whole = torch.empty(0, dtype=torch.uint8, device=t.device).set_(storage)
    words = whole.numel() // 8
    total = whole[: 8 * words].view(torch.int64).sum()
    if whole.numel() > 8 * words:
        total = total + whole[8 * words :].sum(dtype=torch.int64)
    return total


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


def send(
    conn: Connection, header: dict[str, Any], payloads: Sequence[bytes | memoryview | tuple[int, int]] = ()
) -> None:
    """Worker side; the reply echoes the request's sequence number (see ``Supervisor.request``).
    ``payloads``: each tensor's bytes (``harness.worker.staging``), or its (offset, length) in the region
    the parent shares for outputs (``harness.shared_outputs``); the header's ``shared`` then gives each
    payload's place, None for those sent as frames after it, in order."""
    frames = [raw for raw in payloads if not isinstance(raw, tuple)]
    header = dict(header, tensors=len(frames), seq=_last_seq)
    if len(frames) < len(payloads):
        header["shared"] = [list(raw) if isinstance(raw, tuple) else None for raw in payloads]
    fd = conn.fileno()
    write_frame(fd, json.dumps(header, allow_nan=True).encode())
    for raw in frames:
        write_frame(fd, raw)


def receive(conn: Connection, reader: FrameReader | None = None) -> Message:
    """Parent side: one message, which must be complete within ``REPLY_GRACE_S`` of its first byte (call
    it once the channel has data). ``reader``: where tensor frames land (fresh CPU tensors by default),
    and the shared output region, if any. Raises ProtocolError on anything malformed, ReplyStalled
    (``harness.channel``) on a message that stopped part-way, EOFError on a dead worker."""
    reader = reader if reader is not None else FrameReader()
    fd, deadline = conn.fileno(), time.monotonic() + REPLY_GRACE_S
    try:
        raw = reader.raw(fd, MAX_HEADER_BYTES, deadline)
        try:
            header = json.loads(raw)
        except ValueError as exc:
            raise ProtocolError("the worker sent a frame that is not JSON") from exc
        count = header.get("tensors", 0) if isinstance(header, dict) else None
        if not isinstance(count, int) or not 0 <= count <= MAX_TENSOR_FRAMES:
            raise ProtocolError("the worker sent a malformed header")
        places = _shared_places(header.get("shared"), count)
        payloads, left = [], MAX_MESSAGE_BYTES
        for place in places:
            if place is None:
                payloads.append(reader.tensor(fd, min(MAX_TENSOR_BYTES, left), deadline))
            elif reader.shared is None:
                raise ProtocolError("an output placed in a shared region the harness did not give")
            elif place[1] > min(MAX_TENSOR_BYTES, left):
                raise ProtocolError(f"a shared output of {place[1]} bytes, over the message's limit")
            else:
                try:
                    payloads.append(reader.shared.read(*place, reader.device))
                except ValueError as exc:
                    raise ProtocolError(str(exc)) from exc
            left -= payloads[-1].numel()
        return header, payloads
    except ChannelError as exc:
        raise ProtocolError(f"unreadable message from the worker: {exc}") from exc


def _shared_places(shared: object, frames: int) -> list[tuple[int, int] | None]:
    """Each payload's (offset, length) in the shared region, None for a frame; all frames when the
    header has no ``shared`` list. ProtocolError unless it lists exactly ``frames`` frames."""
    if shared is None:
        return [None] * frames
    if not isinstance(shared, list) or len(shared) > MAX_TENSOR_FRAMES:
        raise ProtocolError("the worker sent a malformed list of shared outputs")
    places: list[tuple[int, int] | None] = []
    for place in shared:
        if place is None:
            places.append(None)
        elif (
            isinstance(place, list)
            and len(place) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in place)
        ):
            places.append((place[0], place[1]))
        else:
            raise ProtocolError(f"the worker sent a malformed shared output place {place!r:.80}")
    if places.count(None) != frames:
        raise ProtocolError(f"the worker announced {frames} frames but placed {places.count(None)}")
    return places


def dtype_itemsize(name: str) -> int:
    """Bytes per element of an accepted output dtype (see :func:`accepts_dtype`)."""
    return _DTYPES[name].itemsize


def rebuild_tensor(
    dtype_name: str, shape: Sequence[int], raw: torch.Tensor, source_device: str, device: torch.device
) -> torch.Tensor:
    """Parent side: a tensor from ``describe_output`` metadata and its bytes (a uint8 tensor of its own,
    from :meth:`harness.channel.FrameReader.tensor`), on ``device`` when the
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
    if raw.dtype != torch.uint8 or raw.dim() != 1 or numel * dtype.itemsize != raw.numel():
        raise ProtocolError(f"output bytes ({raw.numel()}) do not match shape {shape} of {dtype}")
    t = raw.view(dtype).reshape(shape)
    target = device if source_device == device.type else torch.device("cpu")
    return t.to(target)
