"""Host memory that the parent and its worker share for a reply's outputs, so that their bytes do not
travel through the channel's socket (``harness.channel``): the worker copies each output there right
after its sample (``harness.worker.staging``), the reply's header says where each one lies, and the
parent copies it out (to the device: a GPU reads page-locked memory directly) before it sends the next
request. A batched nvfp4_gemm reply carries 50 outputs of 1.8 MB, about 0.5 ms each through the socket
on the H200 (``results/h200_output_path.json``).

The parent creates the memory (a memfd), seals it against shrinking and growing, and gives the worker
its descriptor (``harness.engine.supervisor``). The worker can write anything there at any time, as it
can in every other byte of its own memory: the parent bounds-checks each location it is told, copies
the bytes once, and checks the copy; it never reads the region twice. The seal keeps the worker from
truncating the region under the parent's mapping (a read there would kill the parent with SIGBUS).
Where a system has no memfd, where a GPU's driver cannot page-lock the region (copies to and from plain
memory are slower there than the channel's own pinned buffers), or where the region is too small for a
reply, the outputs travel as frames.
"""

from __future__ import annotations

import ctypes
import fcntl
import mmap
import os
from typing import Any

import torch

# Linux only (elsewhere no region is made, and the outputs come as frames)
SEALS = getattr(fcntl, "F_SEAL_SHRINK", 0) | getattr(fcntl, "F_SEAL_GROW", 0) | getattr(fcntl, "F_SEAL_SEAL", 0)
CU_MEMHOSTREGISTER_PORTABLE = 0x01


class SharedOutputs:
    """One mapping of the region, the parent's (:meth:`create`) or the worker's (:meth:`attach`)."""

    def __init__(self, fd: int, nbytes: int, device: torch.device):
        self.fd: int | None = fd  # the parent's, to send (the mapping keeps a descriptor of its own)
        self.nbytes = nbytes
        self._map = mmap.mmap(fd, nbytes, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        self.tensor: torch.Tensor | None = torch.frombuffer(self._map, dtype=torch.uint8)
        self.pinned = False
        if device.type == "cuda":
            torch.cuda.synchronize(device)  # the driver's calls need this thread's context current
            self.pinned = _register(self.tensor.data_ptr(), nbytes)

    @classmethod
    def create(cls, nbytes: int, device: torch.device) -> SharedOutputs | None:
        """The parent's region of ``nbytes``, sealed; None where the system cannot make one."""
        if not hasattr(os, "memfd_create") or not hasattr(fcntl, "F_ADD_SEALS"):
            return None
        try:
            fd = os.memfd_create("harness-outputs", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        except OSError:
            return None
        try:
            os.ftruncate(fd, nbytes)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)
            return cls(fd, nbytes, device)
        except (OSError, ValueError):
            os.close(fd)
            return None

    @classmethod
    def attach(cls, fd: int, nbytes: int, device: torch.device) -> SharedOutputs:
        """The worker's mapping of the region the parent sent (its descriptor ``fd``)."""
        try:
            if os.fstat(fd).st_size < nbytes:
                raise ValueError(f"the shared output region is smaller than the {nbytes} bytes announced")
            region = cls(fd, nbytes, device)
        finally:
            os.close(fd)
        region.fd = None
        return region

    def worth_using(self, device: torch.device) -> bool:
        """Whether outputs should go through this mapping: always on the CPU; on a GPU only page-locked,
        since a copy to or from plain memory is slower there than the channel's pinned buffers (the worker
        and the parent each decide this for their own mapping; the parent keeps the region only when the
        worker says it uses it)."""
        return device.type == "cpu" or self.pinned

    def read(self, offset: int, n: int, device: torch.device) -> torch.Tensor:
        """Parent side: the bytes at ``offset`` as a uint8 tensor of their own on ``device``; ValueError
        for a location outside the region."""
        if self.tensor is None or not (0 <= offset and 0 <= n and offset + n <= self.nbytes):
            raise ValueError(f"an output at bytes {offset}..{offset + n} of a {self.nbytes}-byte shared region")
        view = self.tensor[offset : offset + n]
        return view.to(device) if device.type != "cpu" else view.clone()

    def close(self) -> None:
        """Unmaps the region and closes the descriptor (safe to call more than once)."""
        if self.tensor is None:
            return
        if self.pinned:
            _unregister(self.tensor.data_ptr())
        self.tensor = None
        try:
            self._map.close()
        except BufferError:  # a view is still alive: the mapping goes with it
            pass
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _driver() -> Any:
    """NVIDIA's driver library (its API, not the runtime's: a failed call there leaves no pending error
    for torch's next kernel launch to report); None where there is none."""
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None


def _register(ptr: int, nbytes: int) -> bool:
    """Page-locks the region for every CUDA context of this process (a device copies to and from it
    directly); False where that fails (the copies then go through the driver's own staging)."""
    driver = _driver()
    if driver is None:
        return False
    fn = driver.cuMemHostRegister_v2 if hasattr(driver, "cuMemHostRegister_v2") else driver.cuMemHostRegister
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
    return fn(ctypes.c_void_p(ptr), ctypes.c_size_t(nbytes), CU_MEMHOSTREGISTER_PORTABLE) == 0


def _unregister(ptr: int) -> None:
    driver = _driver()
    if driver is not None:
        driver.cuMemHostUnregister.argtypes = [ctypes.c_void_p]
        driver.cuMemHostUnregister(ctypes.c_void_p(ptr))
