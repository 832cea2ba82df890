"""Which device a run uses, and what it is (name, versions, L2 size)."""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from typing import Any, TypeVar

import torch

from harness.errors import DeviceError
from harness.results import DeviceInfo

T = TypeVar("T")


def select_device(requested: str | None = None) -> torch.device:
    """``None``/"auto": the first GPU when there is one, else the CPU."""
    if requested in (None, "auto"):
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(requested)
    except RuntimeError as exc:
        raise DeviceError(f"unknown device {requested!r}: use 'auto', 'cpu' or 'cuda[:N]'") from exc
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError(
                f"device {requested!r} asked for, but this torch ({torch.__version__}) sees no "
                "CUDA/ROCm GPU; drop --device (or use --device cpu) to run on the CPU"
            )
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise DeviceError(
                f"device {requested!r} does not exist: this machine has "
                f"{torch.cuda.device_count()} GPU(s), cuda:0..cuda:{torch.cuda.device_count() - 1}"
            )
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
    elif device.type != "cpu":
        raise DeviceError(
            f"device type {device.type!r} is not supported; use 'cpu' or 'cuda[:N]' "
            "(ROCm GPUs also appear as 'cuda' in torch)"
        )
    return device


def _triton_version() -> str | None:
    try:
        import importlib.metadata as md

        return md.version("triton")
    except Exception:
        return None


def _ask_nvml(query: Callable[[Any], T]) -> T | None:
    """``query(pynvml)`` between NVML's init and shutdown (reference-counted: an open reader stays open),
    or None when NVML is missing or the query fails."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return query(pynvml)
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return None


def _nvidia_driver() -> str | None:
    def version(nv: Any) -> str:
        v = nv.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else v

    return _ask_nvml(version)


def host_gpu_count() -> int:
    """How many GPUs this host has, those hidden from this process included (a Ray task sees one of
    several through ``CUDA_VISIBLE_DEVICES``): NVML's count, else torch's, at least 1."""
    count = _ask_nvml(lambda nv: int(nv.nvmlDeviceGetCount()))
    if count is None:
        count = torch.cuda.device_count() if torch.cuda.is_available() else 1
    return max(1, count)


def usable_cores() -> int:
    """The cores this process may run on (its affinity: a container's or a scheduler's share)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def device_info(device: torch.device) -> DeviceInfo:
    if device.type == "cpu":
        name = platform.processor() or platform.machine() or "cpu"
        return DeviceInfo(name=f"CPU ({name})", kind="cpu", torch=torch.__version__, triton=_triton_version())
    index = device.index if device.index is not None else torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    is_rocm = torch.version.hip is not None
    if is_rocm:
        driver = f"HIP {torch.version.hip}"
        capability = getattr(props, "gcnArchName", None)
    else:
        driver = _nvidia_driver() or f"CUDA runtime {torch.version.cuda}"
        capability = f"sm_{props.major}{props.minor}"
    return DeviceInfo(
        name=props.name,
        kind="rocm" if is_rocm else "cuda",
        driver=driver,
        torch=torch.__version__,
        triton=_triton_version(),
        capability=capability,
        sm_count=props.multi_processor_count,
        l2_bytes=getattr(props, "L2_cache_size", None),
        memory_bytes=props.total_memory,
    )
