"""GPU clocks, temperature, power and throttling around each benchmark case, read by the parent: through
NVML on NVIDIA GPUs, through AMD SMI on ROCm.

Both libraries are optional (``pynvml`` from the package nvidia-ml-py; ``amdsmi``, the Python package that
ships with ROCm): without one, or on the CPU, every reading is a dict with only a ``note`` saying why,
never a guess. Either backend gives the same keys: ``sm_mhz`` (AMD: the GFX clock), ``mem_mhz``,
``temp_c`` (AMD: the hotspot sensor, else the edge), ``power_w`` and ``throttle``, the names of the
slowdowns in force.
"""

from __future__ import annotations

import os
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
# amdsmi_get_violation_status's flags of a slowdown in force, and their names
_AMD_VIOLATIONS = {
    "active_ppt_pwr": "power_cap",
    "active_socket_thrm": "thermal",
    "active_prochot_thrm": "prochot",
    "active_vr_thrm": "vr_thermal",
    "active_hbm_thrm": "hbm_thermal",
}
VISIBILITY_ENV = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
SM_CHANGE_WARN = 0.10  # warn when the SM clock moved by more than 10% across a case


class Unavailable(Exception):
    """Why a backend cannot read this GPU (the reading's note)."""


class ClockReader:
    """Reads the GPU of ``device`` through the backend its torch build calls for (NVML, or AMD SMI on
    ROCm); :meth:`read` is a note alone where that cannot be done."""

    def __init__(self, device: torch.device) -> None:
        self.note = ""
        self._backend: NvmlBackend | AmdSmiBackend | None = None
        if device.type != "cuda":
            self.note = "not available on CPU"
            return
        index = device.index if device.index is not None else torch.cuda.current_device()
        try:
            self._backend = AmdSmiBackend(index) if torch.version.hip is not None else NvmlBackend(index)
        except Unavailable as exc:
            self.note = str(exc)

    def read(self) -> dict[str, Any]:
        """SM and memory clocks (MHz), temperature (C), power (W) and the throttle reasons; a reading that
        fails is None, never a guess."""
        if self._backend is None:
            return {"note": self.note}
        return self._backend.read()

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None


def _each(readings: dict[str, Any]) -> dict[str, Any]:
    """Calls each reading; one that fails, or that the library reports as not available, is None."""
    out = {}
    for key, fn in readings.items():
        try:
            value = fn()
        except Exception:
            value = None
        out[key] = value if isinstance(value, (int, float, dict)) and not isinstance(value, bool) else None
    return out


class NvmlBackend:
    def __init__(self, index: int) -> None:
        try:
            import pynvml
        except ImportError:
            raise Unavailable("pynvml not installed (pip install nvidia-ml-py): no clock readings") from None
        try:
            pynvml.nvmlInit()
            self.nv = pynvml
            try:  # honours CUDA_VISIBLE_DEVICES
                index = torch.cuda._get_nvml_device_index(index)
            except Exception:
                pass
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except Exception as exc:
            raise Unavailable(f"NVML unavailable ({type(exc).__name__}: {exc})") from exc

    def read(self) -> dict[str, Any]:
        nv, h = self.nv, self.handle
        # the clocks-event call replaced the throttle-reasons one in newer NVML; both give the same bits
        reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        out = _each(
            {
                "sm_mhz": lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
                "mem_mhz": lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
                "temp_c": lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
                "power_w": lambda: nv.nvmlDeviceGetPowerUsage(h) / 1000.0,
                "throttle_mask": lambda: reasons(h) if reasons is not None else None,
            }
        )
        mask = out.get("throttle_mask") or 0
        out["throttle"] = [name for bit, name in _THROTTLE_BITS.items() if mask & bit]
        return out

    def close(self) -> None:
        try:
            self.nv.nvmlShutdown()
        except Exception:
            pass


class AmdSmiBackend:
    """ROCm: the ``amdsmi`` package (not verified on AMD hardware yet: no AMD GPU was lent to this
    project; tests/unit/test_clocks.py drives it through a stand-in module)."""

    def __init__(self, index: int) -> None:
        try:
            import amdsmi
        except ImportError:
            raise Unavailable(
                "amdsmi not installed (the Python package that ships with ROCm, in /opt/rocm/share/amd_smi): "
                "no clock readings"
            ) from None
        try:
            amdsmi.amdsmi_init()
            self.smi = amdsmi
            self.handle = _amd_handle(amdsmi, index)
        except Unavailable:
            raise
        except Exception as exc:
            raise Unavailable(f"AMD SMI unavailable ({type(exc).__name__}: {exc})") from exc

    def read(self) -> dict[str, Any]:
        a, h = self.smi, self.handle
        out = _each(
            {
                "sm_mhz": lambda: a.amdsmi_get_clock_info(h, a.AmdSmiClkType.GFX)["clk"],
                "mem_mhz": lambda: a.amdsmi_get_clock_info(h, a.AmdSmiClkType.MEM)["clk"],
                "temp_c": lambda: self._temperature(),
                "power_w": lambda: self._power(),
                "violations": lambda: a.amdsmi_get_violation_status(h),
            }
        )
        violations = out.pop("violations") or {}
        out["throttle"] = [name for key, name in _AMD_VIOLATIONS.items() if violations.get(key) is True]
        return out

    def _temperature(self) -> Any:
        a = self.smi
        for sensor in (a.AmdSmiTemperatureType.HOTSPOT, a.AmdSmiTemperatureType.EDGE):
            try:
                value = a.amdsmi_get_temp_metric(self.handle, sensor, a.AmdSmiTemperatureMetric.CURRENT)
            except Exception:
                continue
            if isinstance(value, int) and value > 0:
                return value
        return None

    def _power(self) -> Any:
        info = self.smi.amdsmi_get_power_info(self.handle)
        for key in ("current_socket_power", "average_socket_power"):  # "N/A" where the GPU reports none
            if isinstance(info.get(key), (int, float)) and not isinstance(info.get(key), bool):
                return float(info[key])
        return None

    def close(self) -> None:
        try:
            self.smi.amdsmi_shut_down()
        except Exception:
            pass


def _amd_handle(amdsmi: Any, index: int) -> Any:
    """The AMD SMI handle of torch's GPU ``index``: by its PCI address, else by position where no
    visibility variable renumbers the GPUs."""
    props = torch.cuda.get_device_properties(index)
    bus = getattr(props, "pci_bus_id", None)
    if isinstance(bus, int):
        domain, device = getattr(props, "pci_domain_id", 0) or 0, getattr(props, "pci_device_id", 0) or 0
        return amdsmi.amdsmi_get_processor_handle_from_bdf(f"{domain:04x}:{bus:02x}:{device:02x}.0")
    if any(os.environ.get(name) for name in VISIBILITY_ENV):
        raise Unavailable("AMD SMI: torch gives no PCI address for this GPU and a visibility variable renumbers them")
    return amdsmi.amdsmi_get_processor_handles()[index]


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
