"""Persisting L2 (NVIDIA sm_80+): a carve-out of the L2 whose lines the harness's L2 flush may not evict.

A kernel that reserves it (``cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, n)``, then an
access-policy window on its stream or launch) keeps its data in L2 across samples: llm.c pull request
851 read 3530 GB/s on an L40S that way, over 4x its HBM peak. Before every sample, outside the timed
region, :meth:`PersistingL2.reset` demotes every persisting line to normal (the flush then evicts it)
and sets the limit back to 0; :meth:`PersistingL2.report` says what the submission had set, for the
parent to warn (benchmark mode) or reject (ranked runs).

Through the CUDA driver API (libcuda.so.1, always the one the process uses; the runtime's calls are thin
wrappers over these on the primary context torch makes current). A no-op on the CPU and on ROCm.
"""

from __future__ import annotations

import ctypes

import torch

CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06
CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1
ATTR_VALUE_BYTES = 64  # sizeof(CUstreamAttrValue), a union
WINDOW_NUM_BYTES_OFFSET = 8  # CUaccessPolicyWindow: void *base_ptr; size_t num_bytes; ...


class PersistingL2:
    def __init__(self, device: torch.device):
        self.device = device
        self.raised_bytes = 0  # the largest limit found raised before a sample
        self.baseline = self.after_reset = None  # see _allowed
        self.note = "not a CUDA device"
        self._cu = None  # the driver's functions, each its own attribute (in the integrity snapshot)
        if device.type != "cuda" or torch.version.hip:
            return
        try:
            cu = ctypes.CDLL("libcuda.so.1")
            functions = {
                name: getattr(cu, name)
                for name in ("cuCtxGetLimit", "cuCtxSetLimit", "cuCtxResetPersistingL2Cache", "cuStreamGetAttribute")
            }
        except (OSError, AttributeError) as exc:
            self.note = f"the CUDA driver's persisting-L2 calls are unavailable ({exc})"
            return
        for f in functions.values():
            f.restype = ctypes.c_int
        self._get_limit, self._set_limit = functions["cuCtxGetLimit"], functions["cuCtxSetLimit"]
        self._reset = functions["cuCtxResetPersistingL2Cache"]
        self._stream_attribute = functions["cuStreamGetAttribute"]
        self._cu, self.note = cu, ""
        # before the submission is imported (the worker made its context): the limit it starts with, and
        # what the driver keeps when asked for 0 (it rounds up: 11796480 bytes on the H200). Both are
        # fixed here, so the integrity snapshot watches them: nothing of this object but raised_bytes moves.
        self.baseline = self.limit()
        self._set_limit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, ctypes.c_size_t(0))
        self.after_reset = self.limit()

    def limit(self) -> int | None:
        """The context's persisting-L2 limit in bytes (None: unknown)."""
        if self._cu is None:
            return None
        value = ctypes.c_size_t(0)
        if self._get_limit(ctypes.byref(value), CU_LIMIT_PERSISTING_L2_CACHE_SIZE) != 0:
            return None
        return int(value.value)

    def window_bytes(self) -> int:
        """Bytes under an access-policy window on the current stream or the legacy default stream."""
        if self._cu is None:
            return 0
        most = 0
        for stream in {torch.cuda.current_stream(self.device).cuda_stream, 0}:
            value = ctypes.create_string_buffer(ATTR_VALUE_BYTES)
            if self._stream_attribute(ctypes.c_void_p(stream), CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, value) == 0:
                most = max(most, ctypes.c_size_t.from_buffer(value, WINDOW_NUM_BYTES_OFFSET).value)
        return most

    def _allowed(self) -> int:
        """The highest limit that is not the submission's doing: the one the worker started with, or what
        the driver kept when the harness set 0 before the import."""
        return max(x for x in (self.baseline, self.after_reset, 0) if x is not None)

    def reset(self) -> None:
        """Before a sample: a raised limit noted and set back to 0, every persisting line made normal."""
        if self._cu is None:
            return
        current = self.limit()
        if current is not None and current > self._allowed():
            self.raised_bytes = max(self.raised_bytes, current)
            self._set_limit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, ctypes.c_size_t(0))
        self._reset()

    def report(self) -> dict:
        """For every reply: the limit now, the largest found raised before a sample, the window now."""
        if self._cu is None:
            return {}
        current = self.limit() or 0
        return {
            "limit": current if current > self._allowed() else 0,
            "raised": self.raised_bytes,
            "window": self.window_bytes(),
        }


def reserved(report: object) -> str | None:
    """What a submission reserved, in words, from a :meth:`PersistingL2.report` (None: nothing)."""
    if not isinstance(report, dict):
        return None
    values = {k: _int_or_zero(report.get(k)) for k in ("limit", "raised", "window")}
    parts = []
    limit = max(values["limit"], values["raised"])
    if limit > 0:
        parts.append(f"raised the persisting-L2 limit (cudaLimitPersistingL2CacheSize) to {limit} bytes")
    if values["window"] > 0:
        parts.append(f"set an L2 access-policy window over {values['window']} bytes")
    return " and ".join(parts) or None


def _int_or_zero(value: object) -> int:
    return value if isinstance(value, int) else 0
