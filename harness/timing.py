"""Measurement primitives, run inside the worker.

Every function and class used to measure is captured when this module is imported, which the
worker does before it imports the submission: a submission that later replaces
``torch.cuda.Event``, ``torch.cuda.synchronize`` or ``time.perf_counter_ns`` does not change what
is measured (and :func:`tampered_names` reports that it tried).

Two protocols, as the original competitions used them:
- ``per_call``: L2 flush, start event, ONE call, end event, device synchronize; one sample per call.
- ``batched``: L2 flush, start event, one call on each of N distinct inputs, end event; the sample
  is the elapsed time divided by N.
On the CPU the same protocols run with a host clock.
Every sample also records the host wall time around the call and a device-wide synchronize,
which bounds work that escapes the events (another stream, a thread).
"""
from __future__ import annotations

import threading
import time

import torch

_perf_counter_ns = time.perf_counter_ns
_thread_count = threading.active_count
_CUDA = torch.cuda.is_available()
if _CUDA:
    _Event = torch.cuda.Event
    _event_record = torch.cuda.Event.record
    _event_elapsed = torch.cuda.Event.elapsed_time
    _device_sync = torch.cuda.synchronize
    _c_sync = torch._C._cuda_synchronize

# What a submission must leave alone; checked by identity after every call into it.
_WATCHED = {
    "time.perf_counter_ns": (time, "perf_counter_ns"),
    "time.perf_counter": (time, "perf_counter"),
    "time.time": (time, "time"),
    "torch.cuda.Event": (torch.cuda, "Event"),
    "torch.cuda.synchronize": (torch.cuda, "synchronize"),
    "torch.cuda.Event.record": (torch.cuda.Event, "record"),
    "torch.cuda.Event.elapsed_time": (torch.cuda.Event, "elapsed_time"),
    "torch.Tensor.clone": (torch.Tensor, "clone"),
    "torch.Tensor.cpu": (torch.Tensor, "cpu"),
    "torch.Tensor.contiguous": (torch.Tensor, "contiguous"),
    "torch.allclose": (torch, "allclose"),
    "torch._C._cuda_synchronize": (torch._C, "_cuda_synchronize"),
}
_ORIGINALS = {name: getattr(owner, attr, None) for name, (owner, attr) in _WATCHED.items()}


def tampered_names(extra: dict | None = None) -> list[str]:
    """Names of watched objects that are no longer the ones captured at import.
    ``extra`` maps a name to (owner, attribute, original) for the caller's own objects."""
    changed = [name for name, (owner, attr) in _WATCHED.items()
               if getattr(owner, attr, None) is not _ORIGINALS[name]]
    for name, (owner, attr, original) in (extra or {}).items():
        if getattr(owner, attr, None) is not original:
            changed.append(name)
    return changed


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        _c_sync()


class L2Flusher:
    """Evicts the GPU's L2 by writing a buffer twice its size (sized from the device, not a constant)."""

    def __init__(self, device: torch.device, l2_bytes: int | None):
        self.buffer = None
        if device.type == "cuda":
            size = 2 * (l2_bytes or 64 << 20)
            self.buffer = torch.empty(size // 4, dtype=torch.int32, device=device)

    def __call__(self) -> None:
        if self.buffer is not None:
            self.buffer.zero_()


class Sampler:
    """Times calls of ``fn`` with the protocol of the task."""

    def __init__(self, device: torch.device, l2_bytes: int | None):
        self.device = device
        self.flush = L2Flusher(device, l2_bytes)
        if device.type == "cuda":
            self.start = _Event(enable_timing=True)
            self.end = _Event(enable_timing=True)

    def _timed(self, body):
        """Runs ``body()`` between the protocol's clocks; returns (device_ns, wall_ns, result)."""
        self.flush()
        synchronize(self.device)
        wall0 = _perf_counter_ns()
        if self.device.type == "cuda":
            _event_record(self.start)
            result = body()
            _event_record(self.end)
            _c_sync()
            wall = _perf_counter_ns() - wall0
            return _event_elapsed(self.start, self.end) * 1e6, wall, result
        result = body()
        wall = _perf_counter_ns() - wall0
        return float(wall), wall, result

    def per_call(self, fn, data):
        """One sample: one call on ``data``. Returns (device_ns, wall_ns, output)."""
        return self._timed(lambda: fn(data))

    def batched(self, fn, inputs):
        """One sample: one call on each of ``inputs``; the time per input. Returns (ns, wall_ns, outputs)."""
        ns, wall, outs = self._timed(lambda: [fn(d) for d in inputs])
        return ns / len(inputs), wall / len(inputs), outs

    def calibrate(self, n: int = 20) -> float:
        """Median host-wall minus device time of a trivial honest call: the gap every sample carries
        even when no work escapes the events."""
        x = torch.zeros(16, device=self.device)
        gaps = sorted(w - d for d, w, _ in (self.per_call(lambda t: t.add_(1), x) for _ in range(n)))
        return float(gaps[len(gaps) // 2])


def thread_count() -> int:
    return _thread_count()
