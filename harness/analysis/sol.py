"""Speed of light: the fastest a case could possibly run on a device.

SOL time = max(bytes / memory bandwidth, FLOPs / matrix throughput, one launch). The matrix
throughput is that of the fastest tensor-core format that holds FP4 products exactly: native FP4
where the GPU has it, else FP8 (e2m1 values and e4m3/e8m0-scaled partial products fit e4m3 exactly),
else bf16.

Two sets of numbers per GPU:
- ``datasheet``: the vendor's dense peaks (absolute ceilings). A measured time below the SOL from
  these is physically impossible and is flagged (never ranked).
- ``measured``: what a copy and a matrix product reached on such a device (``results/device_peaks.json``,
  written by ``scripts/measure_peaks.py`` on the device). When present, ``% of SOL`` uses them.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from harness.results import SpeedOfLight

PEAKS_FILE = Path(__file__).resolve().parents[2] / "results" / "device_peaks.json"
TB = 1e12


@dataclass(frozen=True)
class Peaks:
    mem_bytes_per_s: float
    matrix_flops_per_s: dict          # format -> dense FLOP/s
    launch_floor_ns: float            # one kernel launch, back to back


# Dense (no sparsity) peaks from the vendors' datasheets.
DATASHEET = {
    # NVIDIA H100 SXM5 datasheet: 3.35 TB/s HBM3; bf16 989.4 TFLOP/s, fp8 1978.9 TFLOP/s dense.
    "H100": Peaks(3.35 * TB, {"bf16": 989.4 * TB, "fp8": 1978.9 * TB}, 2000.0),
    # NVIDIA H200 SXM datasheet: 4.8 TB/s HBM3e; compute as the H100 SXM.
    "H200": Peaks(4.8 * TB, {"bf16": 989.4 * TB, "fp8": 1978.9 * TB}, 2000.0),
    # NVIDIA B200 (DGX B200 datasheet, per GPU): 8 TB/s; bf16 2.25 PFLOP/s, fp8 4.5, fp4 9 dense.
    "B200": Peaks(8.0 * TB, {"bf16": 2250 * TB, "fp8": 4500 * TB, "fp4": 9000 * TB}, 2000.0),
    # AMD Instinct MI300X datasheet: 5.3 TB/s; bf16 1307.4 TFLOP/s, fp8 2614.9 dense.
    "MI300X": Peaks(5.3 * TB, {"bf16": 1307.4 * TB, "fp8": 2614.9 * TB}, 3000.0),
    # AMD Instinct MI355X datasheet: 8 TB/s; bf16 2.5 PFLOP/s, fp8 5.0, mxfp4 10.0 dense.
    "MI355X": Peaks(8.0 * TB, {"bf16": 2500 * TB, "fp8": 5000 * TB, "fp4": 10000 * TB}, 3000.0),
}
_NAME_PATTERNS = [("H200", "H200"), ("H100", "H100"), ("B200", "B200"), ("MI355", "MI355X"),
                  ("MI300X", "MI300X")]
FORMAT_PREFERENCE = ("fp4", "fp8", "bf16")


def gpu_key(device_name: str) -> str | None:
    upper = device_name.upper()
    for pattern, key in _NAME_PATTERNS:
        if pattern in upper:
            return key
    return None


def load_measured(path: Path = PEAKS_FILE) -> dict[str, Peaks]:
    """Peaks measured by scripts/measure_peaks.py, keyed like DATASHEET."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    out = {}
    for key, row in doc.get("devices", {}).items():
        out[key] = Peaks(row["mem_bytes_per_s"], row["matrix_flops_per_s"], row["launch_floor_ns"])
    return out


def _time_ns(peaks: Peaks, nbytes: int, flops: int) -> tuple[float, str]:
    fmt = next(f for f in FORMAT_PREFERENCE if f in peaks.matrix_flops_per_s)
    bounds = {"memory": nbytes / peaks.mem_bytes_per_s * 1e9,
              "compute": flops / peaks.matrix_flops_per_s[fmt] * 1e9,
              "launch": peaks.launch_floor_ns}
    bound = max(bounds, key=bounds.get)
    return bounds[bound], bound


def speed_of_light(device_kind: str, device_name: str, nbytes: int, flops: int,
                   measured_mean_ns: float | None, measured: dict | None = None) -> SpeedOfLight:
    if device_kind == "cpu":
        return SpeedOfLight(None, None, None, nbytes, flops, note="no speed of light for CPU runs")
    key = gpu_key(device_name)
    if key is None:
        return SpeedOfLight(None, None, None, nbytes, flops,
                            note=f"unknown GPU {device_name!r}: no peak numbers, so no speed of light")
    peaks = (measured if measured is not None else load_measured()).get(key)
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
