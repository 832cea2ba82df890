"""Measurement primitives, run inside the worker.

The sampler calls the originals that :mod:`harness.worker.captured` captured before the
submission was imported, so a submission that replaces ``torch.cuda.Event``, ``torch.cuda.synchronize``
or ``time.perf_counter_ns`` does not change what is measured.

Two protocols, as the original competitions used them:
- ``per_call``: L2 flush, start event, ONE call, end event, device synchronize; one sample per call.
- ``batched``: L2 flush, start event, one call on each of N distinct inputs, end event; the sample
  is the elapsed time divided by N.
The originals enqueue a long L2 clear right before the start event, so the host's launch time is
hidden (up to the clear's duration). Given the clear's size (``hide_bytes``), the sampler does the
same with :class:`harness.worker.gate.LaunchGate`, which also keeps other streams from running ahead; without it, or where the gate cannot be built, the GPU is idle at the start event and the
launch time is measured (``Sampler.method`` says which).
On the CPU the same protocols run with a host clock.
Every sample also records its tail: the host time from the moment the end event is seen complete to the
device-wide synchronize after it, which shows work that outlives the events (another stream, a thread)
and, unlike the whole host wall time, none of the host's own delays before the end event,
and, behind the gate, the device clock's own window around the events (two one-thread kernels read
``%globaltimer`` just before the start event and just after the end event): events a submission
re-records or moves no longer match it.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch

from harness.worker.captured import (
    _c_sync,
    _empty,
    _Event,
    _event_elapsed,
    _event_query,
    _event_record,
    _foreach_norm,
    _perf_counter_ns,
    synchronize,
)
from harness.worker.gate import LaunchGate
from harness.worker.persisting_l2 import PersistingL2

T = TypeVar("T")
Kernel = Callable[[Any], Any]
Sample = tuple[float, float, T]  # (device ns, tail ns, what the timed body returned)
# a sample's figures beside its time, set by each sample (None where not read); a batched sample's are per input
SAMPLE_FIGURES = ("window_ns", "unhidden_host_ns", "idle_sync_ns", "device_tail_ns")


class L2Flusher:
    """Evicts the GPU's L2 by writing a buffer twice its size (sized from the device, not a constant)."""

    def __init__(self, device: torch.device, l2_bytes: int | None):
        self.buffer: torch.Tensor | None = None
        self.nbytes = 2 * (l2_bytes or 64 << 20)
        if device.type == "cuda":
            self.buffer = torch.empty(self.nbytes // 4, dtype=torch.int32, device=device)

    def __call__(self) -> None:
        if self.buffer is not None:
            self.buffer.zero_()


class Sampler:
    """Times calls of ``fn`` with the protocol of the task."""

    def __init__(self, device: torch.device, l2_bytes: int | None, hide_bytes: int = 0):
        """``hide_bytes``: what the original loop writes to clear the L2 before each sample; the
        host time a write of that size takes on this device is hidden from each sample (0: none)."""
        self.device = device
        self.flush = L2Flusher(device, l2_bytes)
        self.persisting = PersistingL2(device)  # reset before every sample: no L2 carve-out survives the flush
        self.gate: LaunchGate | None = None
        self.method, self.gate_misses = "host clock (CPU)", 0
        self.window_ns: float | None = None
        self.window_held = False
        self._stamp: Any = None  # the timestamp kernel (Triton), once compiled
        self._occupancy: Any = None  # the occupancy timestamp kernel, once compiled
        self._closing_cap: int | None = None
        self.unhidden_host_ns: float | None = None  # per sample: the host's launch time that showed in the event time
        self.idle_sync_ns: float | None = None  # per sample: a synchronize of the idle device after the tail's
        self.device_tail_ns: float | None = None  # per sample: the device clock's end stamp -> every SM free
        self.window_gap_ns: dict[str, float | None] = {"held": None, "opened": None}  # set by calibrate()
        if device.type == "cuda":
            self.start = _Event(enable_timing=True)
            self.end = _Event(enable_timing=True)
            self.method = "strict: the GPU idles at the start event, host launch time is measured"
            if hide_bytes > 0:
                hide_ns = hide_bytes / self.flush.nbytes * self._flush_ns()
                self.gate, why = LaunchGate.create(device, hide_ns)
                self.method = (
                    f"launch gate: up to {hide_ns / 1e3:.0f} us of host time hidden per sample, like "
                    f"the original's {hide_bytes / 2**30:.2f} GiB L2 clear; other streams held back"
                    if self.gate
                    else f"strict (launch gate unavailable: {why})"
                )
            if self.gate is not None:
                self._stamps = torch.zeros(3, dtype=torch.int64, device=device)
                try:
                    from harness.worker.gate_kernel import stamp_kernel

                    stamp_kernel[(1,)](self._stamps, 0, num_warps=1)  # compiles it now, outside any sample
                    _c_sync()
                    self._stamp = stamp_kernel
                except Exception:
                    self._stamp = None
                try:
                    from harness.worker.gate_kernel import occupancy_stamp_kernel

                    self._occupy(occupancy_stamp_kernel)  # compiles it now, outside any sample
                    _c_sync()
                    self._occupancy = occupancy_stamp_kernel
                except Exception:
                    self._occupancy = None

    def _occupy(self, kernel: Any) -> None:
        """The occupancy timestamp on the gate's grid, after the end stamp (``_stamps[2]``)."""
        assert self.gate is not None
        kernel[(self.gate.nblocks,)](self._stamps, 2, num_warps=self.gate.threads // 32)

    def _device_window(self, host_ns: int) -> None:
        """Sets ``window_ns``: the device clock's time from just before the start event to just after
        the end event, read after a gated sample; and ``window_held``: whether the gate surely held
        until the host had enqueued everything. Where it may have opened by itself (host time near its
        cap) the window also holds the host's launch of the second timestamp kernel, a few us. Also
        ``device_tail_ns``: from the end stamp until the last SM had room for a block of the occupancy
        stamp (a diagnostic: a kernel another stream left running holds its SMs until it ends, though not
        the kernels queued behind it, and the host's clock plays no part)."""
        if self._stamp is None or self.gate is None:
            return
        t0, t1, t2 = self._stamps.tolist()
        cap = self.gate.cap_ns if self._closing_cap is None else self._closing_cap
        self.window_ns, self.window_held = float(t1 - t0), host_ns <= 0.8 * cap - 10e3
        if self._occupancy is not None:
            self.device_tail_ns = float(t2 - t1)

    def _flush_ns(self) -> float:
        """Median device time of one L2 flush."""
        times = []
        for _ in range(7):
            _c_sync()
            _event_record(self.start)
            self.flush()
            _event_record(self.end)
            _c_sync()
            times.append(_event_elapsed(self.start, self.end) * 1e6)
        return statistics.median(times)

    def heat(self, ms: float) -> None:
        """Keeps the GPU busy with the harness's own work (L2 flushes) for ``ms`` milliseconds, so the
        clocks are up when timing starts, without running submission code next to timed inputs."""
        if self.device.type != "cuda" or ms <= 0:
            return
        end = _perf_counter_ns() + ms * 1e6
        while _perf_counter_ns() < end:
            self.flush()
            _c_sync()

    def touch(self, data: Sequence[object]) -> None:
        """Reads every input tensor's storage once on the device, as generating it there would (GPU MODE's
        ranked loop generates each input right before timing it): fresh inputs are not timed with cold
        TLBs. The L2 flush that follows evicts them from the cache. ``data``: one input's objects, or all
        of a batched sample's. The storages of an even number of bytes are read together, as float16 words
        by one multi-tensor norm (a few launches, where one read each cost a launch per tensor; the value
        is never used), the others one by one."""
        if self.device.type != "cuda":
            return
        words: dict[torch.device, list[torch.Tensor]] = {}
        for t in data:
            if isinstance(t, torch.Tensor) and t.is_cuda and t.numel():
                raw = _empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())
                if raw.numel() % 2 or _foreach_norm is None:
                    raw.max()
                else:
                    words.setdefault(raw.device, []).append(raw.view(torch.float16))
        for same_device in words.values():
            _foreach_norm(same_device)

    def _tail_ns(self) -> float:
        """The host time from the end event seen complete to the device idle: work left running past the
        events (another stream) shows here. A slow host delays both ends alike, so its hiccups before the
        end event (the sync's wake-up, the gate's release, a descheduled thread) are not counted; the
        whole host wall time of a sample counted them (25-49 us a call on some H100 hosts).
        Also sets ``idle_sync_ns``: a second synchronize right after, of a device known idle, which costs
        what the host charges for one at that moment (a diagnostic: escaped work lengthens the first only)."""
        while not _event_query(self.end):
            pass
        seen = _perf_counter_ns()
        _c_sync()
        synced = _perf_counter_ns()
        _c_sync()
        self.idle_sync_ns = float(_perf_counter_ns() - synced)
        return float(synced - seen)

    def _timed(self, body: Callable[[], T]) -> Sample[T]:
        """Runs ``body()`` between the protocol's clocks; returns (device_ns, tail_ns, result)."""
        self.persisting.reset()
        self.flush()
        for name in SAMPLE_FIGURES:
            setattr(self, name, None)
        self.window_held = False
        if self.gate is not None:
            if self.gate.close(self._closing_cap):
                host0 = _perf_counter_ns()
                try:
                    if self._stamp is not None:
                        self._stamp[(1,)](self._stamps, 0, num_warps=1)
                    _event_record(self.start)
                    result = body()
                    _event_record(self.end)
                    if self._stamp is not None:
                        self._stamp[(1,)](self._stamps, 1, num_warps=1)
                        if self._occupancy is not None:
                            self._occupy(self._occupancy)
                finally:
                    enqueued = _perf_counter_ns()
                    self.gate.open()
                tail = self._tail_ns()
                self._device_window(enqueued - host0)
                cap = self.gate.cap_ns if self._closing_cap is None else self._closing_cap
                self.unhidden_host_ns = float(max(0, enqueued - host0 - cap))
                return _event_elapsed(self.start, self.end) * 1e6, tail, result
            self.gate_misses += 1  # the GPU was not free for it: this sample is strict
        synchronize(self.device)
        wall0 = _perf_counter_ns()
        if self.device.type == "cuda":
            _event_record(self.start)
            result = body()
            _event_record(self.end)
            self.unhidden_host_ns = float(_perf_counter_ns() - wall0)  # the GPU idled at the start event
            tail = self._tail_ns()
            return _event_elapsed(self.start, self.end) * 1e6, tail, result
        result = body()
        return float(_perf_counter_ns() - wall0), 0.0, result

    def per_call(self, fn: Kernel, data: Any) -> Sample[Any]:
        """One sample: one call on ``data``. Returns (device_ns, tail_ns, output)."""
        return self._timed(lambda: fn(data))

    def batched(self, fn: Kernel, inputs: Sequence[Any]) -> Sample[list[Any]]:
        """One sample: one call on each of ``inputs``; the time per input. Returns (ns, tail_ns, outputs)."""
        ns, tail, outs = self._timed(lambda: [fn(d) for d in inputs])
        for name in SAMPLE_FIGURES:
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, value / len(inputs))
        return ns / len(inputs), tail / len(inputs), outs

    def calibrate(self, n: int = 20) -> float:
        """Median tail of a trivial honest call (the timestamp kernel after the end event, the
        synchronize): the gap every sample's tail carries even when no work outlives the events."""
        x = torch.zeros(16, device=self.device)
        gaps = []
        # The same samples also give what the device clock sees beyond the events around an honest
        # call with the gate held; a second round, with a gate that opens by itself at once, gives it
        # for samples whose host time outlasts the cap.
        for regime, cap in (("held", None), ("opened", 1)):
            self._closing_cap = cap
            excess: list[float] = []
            for _ in range(n):
                d, tail, _ = self.per_call(lambda t: t.add_(1), x)
                if cap is None:
                    gaps.append(tail)
                if self.window_ns is not None and self.window_held == (cap is None):
                    excess.append(self.window_ns - d)
            self.window_gap_ns[regime] = statistics.median(excess) if len(excess) > n // 2 else None
            if self._stamp is None:
                break  # no device clock (no gate): a second round would add nothing
        self._closing_cap = None
        return float(statistics.median(gaps))
