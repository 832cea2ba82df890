"""The worker-to-parent byte channel: length-prefixed frames that the worker writes and the parent reads
into memory of its own choosing, within a time limit.

The worker writes each frame as an 8-byte big-endian length and then the bytes (:func:`write_frame`),
straight from where they lie (a reused host buffer, ``harness.worker.staging``). The parent reads a
message's frames with a deadline on every read (:class:`FrameReader`): a message must be complete
within ``REPLY_GRACE_S`` of its first byte, so a reply that stops part-way (a submission that writes
the start of a frame of its own into the channel and then hangs, or a worker that died while a child
of its own holds the channel open) ends the request instead of blocking the harness for ever. A tensor
frame lands in a fresh uint8 tensor on the parent's device, through a reused pinned buffer on a GPU:
no fresh host pages for each output, and one direct copy to the device.

The parent-to-worker direction (trusted requests, ``harness.protocol.send_to_worker``) keeps
``multiprocessing``'s own framing.
"""

from __future__ import annotations

import os
import select
import struct
import time

import torch

from harness.shared_outputs import SharedOutputs

LENGTH = struct.Struct("!Q")
REPLY_GRACE_S = 10.0  # from a message's first byte to its last (a 2 GiB frame takes about 2 s locally)
MAX_PINNED_BYTES = 256 << 20  # a larger frame goes through plain host memory


class ReplyStalled(Exception):
    """The message's time ran out with a frame incomplete."""


class ChannelError(Exception):
    """A frame longer than its limit: not a message the harness's worker writes."""


def host_buffer(n: int, pinned: bool) -> tuple[torch.Tensor, bool]:
    """``n`` bytes of host memory, pinned (a device copies to and from it directly) when ``pinned`` and
    the system allows it; and whether it is. The worker's output staging and the parent's frames share it."""
    if pinned:
        try:
            return torch.empty(n, dtype=torch.uint8, pin_memory=True), True
        except RuntimeError:  # no pinned memory here: plain host memory
            pass
    return torch.empty(n, dtype=torch.uint8), False


def write_frame(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Worker side: one frame, written in full (``os.writev`` may take it in parts)."""
    body = memoryview(data).cast("B")
    parts = [memoryview(LENGTH.pack(body.nbytes)), body]
    while parts:
        written = os.writev(fd, parts)
        while parts and written >= parts[0].nbytes:
            written -= parts[0].nbytes
            parts.pop(0)
        if parts and written:
            parts[0] = parts[0][written:]


def _wait_readable(fd: int, deadline: float) -> None:
    """Returns once ``fd`` has data (or its end closed); raises :class:`ReplyStalled` at ``deadline``."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    if not poller.poll(max(0.0, deadline - time.monotonic()) * 1e3):
        raise ReplyStalled()


def _read_into(fd: int, view: memoryview, deadline: float) -> None:
    got = 0
    while got < view.nbytes:
        _wait_readable(fd, deadline)
        try:
            n = os.readv(fd, [view[got:]])
        except OSError as exc:  # the worker's end went away mid-frame (a reset connection)
            raise EOFError(f"the worker's channel broke: {exc}") from exc
        if n == 0:
            raise EOFError("the worker closed its channel")
        got += n


class FrameReader:
    """The parent's end of one worker's channel. Tensor frames become fresh uint8 tensors on ``device``."""

    def __init__(self, device: torch.device | None = None):
        self.device = device if device is not None else torch.device("cpu")
        self._staging = torch.empty(0, dtype=torch.uint8)  # host memory (pinned if it can be), reused
        self._pinned = True
        self.shared: SharedOutputs | None = None  # the region the worker may place outputs in instead

    def length(self, fd: int, limit: int, deadline: float) -> int:
        head = bytearray(LENGTH.size)
        _read_into(fd, memoryview(head), deadline)
        (n,) = LENGTH.unpack(head)
        if n > limit:
            raise ChannelError(f"a frame of {n} bytes (at most {limit} are allowed)")
        return int(n)

    def raw(self, fd: int, limit: int, deadline: float) -> bytearray:
        """A frame's bytes (a message's JSON header)."""
        data = bytearray(self.length(fd, limit, deadline))
        _read_into(fd, memoryview(data), deadline)
        return data

    def tensor(self, fd: int, limit: int, deadline: float) -> torch.Tensor:
        """A tensor frame as a uint8 tensor of its own on :attr:`device`."""
        n = self.length(fd, limit, deadline)
        if self.device.type == "cpu" or n > MAX_PINNED_BYTES:
            host = torch.empty(n, dtype=torch.uint8)  # on the CPU, this is the result itself
        else:
            if self._staging.numel() < n:
                self._staging, self._pinned = host_buffer(max(n, 1 << 20), self._pinned)
            host = self._staging[:n]
        _read_into(fd, host.numpy().data, deadline)
        return host.to(self.device)  # from pinned memory on a GPU: one direct copy
