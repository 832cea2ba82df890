"""The host copies of a reply's outputs, in memory the worker reuses from reply to reply.

Each output the parent checks is copied to the host right after its own sample (a buffer the next call
reuses cannot change it). Copied into fresh host memory, every output paid for new pages, and on a GPU
for a copy through the driver's own staging: a batched nvfp4_gemm reply carries 50 outputs of 1.8 MB.
Here they go first into the region the parent shares with the worker (``harness.shared_outputs``), where
the parent reads them without their bytes crossing the channel, and what does not fit there into one
buffer of the worker's own, pinned on a GPU (one direct copy each), that grows to what the last reply
needed and is reused by the next; the reply sends those from there (``harness.channel.write_frame``).
A copy is valid until :meth:`OutputStaging.begin` starts the next reply.
"""

from __future__ import annotations

import torch

from harness.channel import host_buffer
from harness.shared_outputs import SharedOutputs

MAX_PINNED_BYTES = 1 << 30  # a reply that needs more copies the rest into fresh host memory

Staged = memoryview | tuple[int, int]  # bytes to send as a frame, or (offset, length) in the shared region


class OutputStaging:
    def __init__(self, device: torch.device):
        self._pin = device.type == "cuda"
        self._buffer = torch.empty(0, dtype=torch.uint8)
        self._used = 0
        self._wanted = 0  # bytes the current reply asked for, kept or not
        self.shared: SharedOutputs | None = None
        self._shared_used = 0

    def begin(self) -> None:
        """A new reply: the last one was sent, so its copies are free; the buffer grows to what it needed."""
        if self._buffer.numel() < self._wanted <= MAX_PINNED_BYTES:
            self._buffer, self._pin = host_buffer(self._wanted, self._pin)  # pinned refused: plain, still reused
        self._used = self._wanted = self._shared_used = 0

    def copy(self, out: torch.Tensor) -> Staged:
        """``out``'s values, contiguous, on the host: their place in the shared region, or (when the
        region is full or absent) the bytes themselves, a view into the worker's own buffer."""
        flat = out.detach().contiguous().reshape(-1).view(torch.uint8)
        n = flat.numel()
        region = self.shared.tensor if self.shared is not None else None
        if region is not None and self._shared_used + n <= region.numel():
            offset, self._shared_used = self._shared_used, self._shared_used + n
            region[offset : offset + n].copy_(flat)
            return offset, n
        self._wanted += n
        if self._used + n <= self._buffer.numel():
            host = self._buffer[self._used : self._used + n]
            self._used += n
        else:  # more than the buffer holds (this reply only: begin() grows it)
            host = torch.empty(n, dtype=torch.uint8)
        host.copy_(flat)
        return host.numpy().data
