"""The launch gate: hides host launch time from a per-call sample the way the original competitions'
timing loops do, without their blind spot (inside the worker, NVIDIA GPUs with Triton).

GPU MODE's loop enqueues a long L2 clear (a 62 GiB ``torch.randn`` for the AMD challenge), then the
start event, the call and the end event. The GPU is still clearing while the host enqueues the call,
so the sample measures the call's device time, not the host's launch latency. Two problems with
copying that: the clear costs milliseconds per sample, and while it runs a submission's kernels on
ANOTHER stream execute before the start event, unmeasured.

The gate does the same job without either: a kernel that fills every thread slot of every SM (so no
other kernel, from any stream, can run beside it) and spins until the host releases it. The host
enqueues the gate, waits until all its blocks are resident, records the start event, calls the
submission, records the end event and only then releases the gate: everything the call enqueued
starts after the start event. A cap bounds the hidden host time (the time the original's clear
takes); past it the gate opens by itself and the rest of the host time is measured, as in the
original. Copy engines (cudaMemcpyAsync on another stream) need no SM and are not held; SECURITY.md.

The kernel lives in ``harness.worker.gate_kernel``, imported only when a gate is built on a GPU: importing
Triton in the worker before ``TRITON_INTERPRET`` applies would break interpreted submissions on the CPU.
``LaunchGate.create`` checks on the device that the gate holds a side-stream kernel back and that
the release works, and returns None where it cannot be built or does not hold (no Triton, AMD, a
register count that leaves thread slots free): the caller then keeps the strict protocol
(synchronize before the start event, launch latency measured).
"""

from __future__ import annotations

import time
from typing import Any

import torch

_START_TIMEOUT_S = 1.0  # blocks not all resident by then: something else occupies the GPU
_FLAG_STRIDE = 4  # int32 words from one flag to the next: 16 bytes


def _flag_pair(buffer: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Two one-word flags of ``buffer`` (``2 * _FLAG_STRIDE`` int32 words), each on its own 16 bytes:
    Triton compiles a kernel for its pointers' alignment, and the gate kernel a worker loaded ahead
    (:func:`load_ahead`) was compiled for aligned ones."""
    return buffer[0:1], buffer[_FLAG_STRIDE : _FLAG_STRIDE + 1]


def grid_that_fills(device: torch.device) -> tuple[int, int]:
    """(threads per block, blocks): blocks that exactly fill every SM's thread slots, 2 x 1024 on an
    H100/H200 (2048 threads per SM), 3 x 512 where an SM holds 1536."""
    props = torch.cuda.get_device_properties(device)
    slots = props.max_threads_per_multi_processor
    threads = 1024 if slots % 1024 == 0 else 512
    return threads, props.multi_processor_count * max(1, slots // threads)


def _for_nvidia(device: torch.device) -> bool:
    """Whether the gate is built on ``device``: an NVIDIA GPU (not the CPU, not ROCm)."""
    return device.type == "cuda" and torch.version.hip is None


def load_ahead(device: torch.device) -> None:
    """Compiles (or reads from Triton's cache) the gate's and the sampler's two timestamp kernels for the
    arguments the sampler launches them with, and loads them into this process's CUDA context, launching
    nothing: a held worker does this before it waits, so its first samples find them loaded. The
    tensors are only allocated (never written): aligned as every pointer the sampler passes is. Nothing
    where no gate is built."""
    if not _for_nvidia(device):
        return
    from harness.worker.gate_kernel import gate_kernel, occupancy_stamp_kernel, stamp_kernel

    threads, nblocks = grid_that_fills(device)
    flag = torch.empty(1, dtype=torch.int32, device=device)
    host_flag = torch.empty(1, dtype=torch.int32, pin_memory=True)
    stamps = torch.empty(3, dtype=torch.int64, device=device)
    for kernel, grid, args, warps in (
        (gate_kernel, (nblocks,), (flag, flag, host_flag, host_flag, 1, nblocks, 1), threads // 32),
        (stamp_kernel, (1,), (stamps, 0), 1),
        (occupancy_stamp_kernel, (nblocks,), (stamps, 2), threads // 32),
    ):
        kernel.warmup(*args, grid=grid, num_warps=warps)._init_handles()


class LaunchGate:
    """Holds the GPU shut while the host enqueues a call. Use :meth:`close`, then :meth:`open`."""

    def __init__(self, device: torch.device, cap_ns: float, kernel: Any):
        """``kernel``: :func:`harness.worker.gate_kernel.gate_kernel` (a Triton kernel, launched by grid)."""
        self._kernel = kernel
        self.device = device
        self.cap_ns = int(cap_ns)
        self.threads, self.nblocks = grid_that_fills(device)
        self._count, self._open = _flag_pair(torch.zeros(2 * _FLAG_STRIDE, dtype=torch.int32, device=device))
        host = torch.zeros(2 * _FLAG_STRIDE, dtype=torch.int32, pin_memory=True)
        self._started, self._release = _flag_pair(host)
        self._flags = host.numpy()  # the host side of both flags, no CUDA call to read
        self._seq = 0

    @classmethod
    def create(cls, device: torch.device, cap_ns: float) -> tuple[LaunchGate | None, str]:
        """A verified gate, or None and why not."""
        if not _for_nvidia(device):
            return None, "the gate is built for NVIDIA GPUs"
        try:
            from harness.worker.gate_kernel import gate_kernel
        except Exception as exc:
            return None, f"Triton is not usable here ({type(exc).__name__}: {str(exc).strip()[:200]})"
        try:
            gate = cls(device, cap_ns, gate_kernel)
            why = gate._why_it_does_not_hold()
            return (None, why) if why else (gate, "")
        except Exception as exc:
            return None, f"the gate kernel failed ({type(exc).__name__}: {str(exc).strip()[:200]})"

    def close(self, cap_ns: int | None = None) -> bool:
        """Enqueues the gate on the current stream and waits until it holds every SM; False (gate
        opened again) if it did not get there in time. ``cap_ns``: this closing's cap, when it is not
        a timed sample (the kernel-only graph replays)."""
        self._seq = (self._seq + 1) & 0x3FFFFFFF
        self._kernel[(self.nblocks,)](
            self._count,
            self._open,
            self._started,
            self._release,
            self._seq,
            self.nblocks,
            self.cap_ns if cap_ns is None else int(cap_ns),
            num_warps=self.threads // 32,
        )
        deadline = time.perf_counter() + _START_TIMEOUT_S
        while self._flags[0] != self._seq:
            if time.perf_counter() > deadline:
                self.open()
                return False
        return True

    def open(self) -> None:
        self._flags[_FLAG_STRIDE] = self._seq

    def _why_it_does_not_hold(self) -> str:
        """While the gate is closed for 2 ms, a one-block kernel on another stream must not run;
        "" when it holds, else why not."""
        current, side = torch.cuda.current_stream(self.device), torch.cuda.Stream(self.device)
        x = torch.zeros(1, device=self.device)
        before, after, side_done = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        for check in (False, True):  # the first round compiles the kernel
            torch.cuda.synchronize(self.device)
            before.record(current)
            if not self.close(cap_ns=50_000_000):  # the task's cap may be shorter than this check
                return "the gate's blocks did not all become resident"
            after.record(current)
            with torch.cuda.stream(side):
                x.add_(1)
                side_done.record(side)
            time.sleep(0.002 if check else 0)
            self.open()
            torch.cuda.synchronize(self.device)
        held_ms, side_after_ms = before.elapsed_time(after), after.elapsed_time(side_done)
        if held_ms < 1.5:
            return f"the gate opened after {held_ms:.3f} ms instead of being held for 2 ms"
        if side_after_ms < -0.1:  # held back, it ends with the gate (within a few us either way)
            return (
                f"a kernel on another stream ran {-side_after_ms:.3f} ms before the gate opened "
                "(thread slots left free)"
            )
        return ""
