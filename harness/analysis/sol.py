"""Speed of light: the fastest a case could possibly run on a device.

SOL time = max(bytes / memory bandwidth, FLOPs / matrix throughput, one launch). The matrix
throughput is that of the fastest tensor-core format that holds FP4 products exactly: native FP4
where the GPU has it, else FP8 (e2m1 values and e4m3/e8m0-scaled partial products fit e4m3 exactly),
else bf16.

The peaks come from ``harness.analysis.peaks``: the measured ones (``% of SOL`` uses them) where a
peaks file has the device, else the datasheet's (with a warning); the physical floor always uses the
datasheet's.
"""

from __future__ import annotations

from harness.analysis.peaks import DATASHEET, Peaks, gpu_key, load_measured, warn_datasheet_fallback
from harness.results import SpeedOfLight

__all__ = ["DATASHEET", "Peaks", "gpu_key", "load_measured", "physical_floor_ns", "speed_of_light"]

FORMAT_PREFERENCE = ("fp4", "fp8", "bf16")


def _time_ns(peaks: Peaks, nbytes: int, flops: int) -> tuple[float, str]:
    fmt = next(f for f in FORMAT_PREFERENCE if f in peaks.matrix_flops_per_s)
    bounds = {
        "memory": nbytes / peaks.mem_bytes_per_s * 1e9,
        "compute": flops / peaks.matrix_flops_per_s[fmt] * 1e9,
        "launch": peaks.launch_floor_ns,
    }
    bound = max(bounds, key=lambda k: bounds[k])
    return bounds[bound], bound


def speed_of_light(
    device_kind: str,
    device_name: str,
    nbytes: int,
    flops: int,
    measured_mean_ns: float | None,
    measured: dict | None = None,
) -> SpeedOfLight:
    """``measured``: the measured peaks (``load_measured()``, read once per run); None reads them here."""
    if device_kind == "cpu":
        return SpeedOfLight(None, None, None, nbytes, flops, note="no speed of light for CPU runs")
    key = gpu_key(device_name)
    if key is None:
        return SpeedOfLight(
            None, None, None, nbytes, flops, note=f"unknown GPU {device_name!r}: no peak numbers, so no speed of light"
        )
    peaks = (measured if measured is not None else load_measured()).get(key)
    if peaks is None:
        warn_datasheet_fallback(key)
    note = f"{key} measured peaks" if peaks else f"{key} datasheet peaks"
    time_ns, bound = _time_ns(peaks or DATASHEET[key], nbytes, flops)
    percent = 100.0 * time_ns / measured_mean_ns if measured_mean_ns else None
    return SpeedOfLight(time_ns, bound, percent, nbytes, flops, note=note)


def physical_floor_ns(device_name: str, nbytes: int, flops: int) -> float | None:
    """The datasheet bound without the launch floor: no honest measurement can be below it."""
    key = gpu_key(device_name)
    if key is None:
        return None
    peaks = DATASHEET[key]
    fmt = next(f for f in FORMAT_PREFERENCE if f in peaks.matrix_flops_per_s)
    return max(nbytes / peaks.mem_bytes_per_s, flops / peaks.matrix_flops_per_s[fmt]) * 1e9
