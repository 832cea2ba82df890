"""GPU clocks, temperature and throttling around each benchmark case, read by the parent via NVML.

``pynvml`` (package nvidia-ml-py) is optional: without it, or on the CPU, every reading is a dict
with only a ``note`` saying why, never a guess.
"""

from __future__ import annotations

from typing import Any

import torch

# nvmlClocksEventReasons bits that mean the GPU is slowed down (not idle, not an app-clock setting).
_THROTTLE_BITS = {
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
}
SM_CHANGE_WARN = 0.10  # warn when the SM clock moved by more than 10% across a case


class ClockReader:
    def __init__(self, device: torch.device) -> None:
        self.handle: Any = None
        self.note = ""
        self._nvml: Any = None
        if device.type != "cuda" or torch.version.hip is not None:
            self.note = (
                "not available on CPU" if device.type != "cuda" else "not available on ROCm (NVML is NVIDIA only)"
            )
            return
        try:
            import pynvml
        except ImportError:
            self.note = "pynvml not installed (pip install nvidia-ml-py): no clock readings"
            return
        try:
            pynvml.nvmlInit()
            self._nvml = pynvml
            index = device.index if device.index is not None else torch.cuda.current_device()
            try:  # honours CUDA_VISIBLE_DEVICES
                index = torch.cuda._get_nvml_device_index(index)
            except Exception:
                pass
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except Exception as exc:
            self.note = f"NVML unavailable ({type(exc).__name__}: {exc})"

    def read(self) -> dict[str, Any]:
        """SM and memory clocks (MHz), temperature (C), power (W) and the throttle reasons; a reading that
        fails is None, never a guess."""
        if self.handle is None:
            return {"note": self.note}
        nv, h, out = self._nvml, self.handle, {}
        # the clocks-event call replaced the throttle-reasons one in newer NVML; both give the same bits
        reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        for key, fn in (
            ("sm_mhz", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
            ("mem_mhz", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)),
            ("temp_c", lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
            ("power_w", lambda: nv.nvmlDeviceGetPowerUsage(h) / 1000.0),
            ("throttle_mask", lambda: reasons(h) if reasons is not None else None),
        ):
            try:
                out[key] = fn()
            except Exception:
                out[key] = None
        mask = out.get("throttle_mask") or 0
        out["throttle"] = [name for bit, name in _THROTTLE_BITS.items() if mask & bit]
        return out

    def close(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass
            self._nvml = None


def clock_warnings(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Why a case's numbers may be off, from the readings before and after its timed calls."""
    warn = []
    b, a = before.get("sm_mhz"), after.get("sm_mhz")
    if b and a and abs(a - b) / b > SM_CHANGE_WARN:
        warn.append(
            f"SM clock changed from {b} to {a} MHz during the case ({100 * (a - b) / b:+.0f}%): "
            "the samples mix clock speeds; rerun on an idle, cool GPU"
        )
    throttled = sorted(set(before.get("throttle") or []) | set(after.get("throttle") or []))
    if throttled:
        warn.append(
            f"the GPU was throttling ({', '.join(throttled)}, "
            f"{after.get('temp_c', '?')} C): times may be slower than the card's normal speed"
        )
    return warn
