"""The host copies of a reply's outputs, in memory the worker reuses from reply to reply.

Each output the parent checks is copied to the host right after its own sample (a buffer the next call
reuses cannot change it). Copied into fresh host memory, every output paid for new pages, and on a GPU
for a copy through the driver's own staging: a batched nvfp4_gemm reply carries 50 outputs of 1.8 MB.
Here they go into one buffer, pinned on a GPU (one direct copy each), that grows to what the last reply
needed and is reused by the next; the reply sends them from there (``harness.channel.write_frame``).
A view is valid until :meth:`OutputStaging.begin` starts the next reply.
"""

from __future__ import annotations

import torch

from harness.channel import host_buffer

MAX_PINNED_BYTES = 1 << 30  # a reply that needs more copies the rest into fresh host memory


class OutputStaging:
    def __init__(self, device: torch.device):
        self._pin = device.type == "cuda"
        self._buffer = torch.empty(0, dtype=torch.uint8)
        self._used = 0
        self._wanted = 0  # bytes the current reply asked for, kept or not

    def begin(self) -> None:
        """A new reply: the last one was sent, so its views are free; the buffer grows to what it needed."""
        if self._buffer.numel() < self._wanted <= MAX_PINNED_BYTES:
            self._buffer, self._pin = host_buffer(self._wanted, self._pin)  # pinned refused: plain, still reused
        self._used = self._wanted = 0

    def copy(self, out: torch.Tensor) -> memoryview:
        """``out``'s values, contiguous, as bytes on the host (a view into the buffer)."""
        flat = out.detach().contiguous().reshape(-1).view(torch.uint8)
        n = flat.numel()
        self._wanted += n
        if self._used + n <= self._buffer.numel():
            host = self._buffer[self._used : self._used + n]
            self._used += n
        else:  # more than the buffer holds (this reply only: begin() grows it)
            host = torch.empty(n, dtype=torch.uint8)
        host.copy_(flat)
        return host.numpy().data
