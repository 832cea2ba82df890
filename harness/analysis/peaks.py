"""Device peaks: the datasheet ceilings and the measured rates that the speed of light uses.

Two sets of numbers per GPU:
- ``DATASHEET``: the vendor's dense peaks (absolute ceilings). A measured time below the SOL from
  these is physically impossible and is flagged (never ranked).
- measured: what a copy and a matrix product reached on such a device, written by
  ``python -m harness measure-peaks`` on the device. Looked up in two files, the later one winning
  for the devices it holds:

  1. ``harness/data/device_peaks.json``, shipped inside the harness package (package data, so a
     ``pip install``-ed harness has it): the rows this project measured (the H200).
  2. ``device_peaks.json`` in the user data folder (``platformdirs``; on Linux
     ``$XDG_DATA_HOME/fp4-harness``, by default ``~/.local/share/fp4-harness``), where
     ``measure-peaks`` writes by default: the peaks of the user's own devices.

When neither holds the device's row, the speed of light falls back to the datasheet peaks and says
so once per process on stderr.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from harness.errors import UsageError

TB = 1e12
APP_NAME = "fp4-harness"
PEAKS_FILE_NAME = "device_peaks.json"
MEASURE_COMMAND = "python -m harness measure-peaks"


@dataclass(frozen=True)
class Peaks:
    mem_bytes_per_s: float
    matrix_flops_per_s: dict  # format -> dense FLOP/s
    launch_floor_ns: float  # one kernel launch, back to back


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
_NAME_PATTERNS = [("H200", "H200"), ("H100", "H100"), ("B200", "B200"), ("MI355", "MI355X"), ("MI300X", "MI300X")]


def gpu_key(device_name: str) -> str | None:
    upper = device_name.upper()
    for pattern, key in _NAME_PATTERNS:
        if pattern in upper:
            return key
    return None


def package_peaks_file() -> Path:
    """The measured peaks shipped in the harness package (found wherever the package is installed)."""
    return Path(str(resources.files("harness") / "data" / PEAKS_FILE_NAME))


def user_data_file(name: str) -> Path:
    """``name`` in the user's data folder of the harness (the measured peaks and between-run spreads of
    the user's own devices)."""
    try:
        import platformdirs
    except ImportError:  # a GPU image without it (the H200 machine): the XDG rule platformdirs follows on Linux
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
        return base / APP_NAME / name
    return platformdirs.user_data_path(APP_NAME) / name


def user_peaks_file() -> Path:
    """The user's own measured peaks: where ``measure-peaks`` writes by default."""
    return user_data_file(PEAKS_FILE_NAME)


def peaks_files() -> list[Path]:
    """The files looked in, in order; a later file's row for a device replaces an earlier one's."""
    return [package_peaks_file(), user_peaks_file()]


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def _read_rows(path: Path) -> dict[str, Peaks]:
    """The rows of one peaks file; a missing file is empty, a broken one is warned about and skipped."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        _warn(f"measured peaks file {path} is unreadable ({exc}); ignored: delete it or re-run '{MEASURE_COMMAND}'")
        return {}
    out = {}
    devices = doc.get("devices") if isinstance(doc, dict) else None
    for key, row in (devices if isinstance(devices, dict) else {}).items():
        try:
            out[key] = Peaks(
                float(row["mem_bytes_per_s"]),
                {fmt: float(v) for fmt, v in row["matrix_flops_per_s"].items()},
                float(row["launch_floor_ns"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            _warn(
                f"measured peaks file {path}: the row for {key!r} is malformed ({exc!r}); ignored: "
                f"re-run '{MEASURE_COMMAND}' on that device"
            )
    return out


def load_measured(paths: list[Path] | None = None) -> dict[str, Peaks]:
    """Measured peaks keyed like ``DATASHEET``: the package's rows, then the user's (see the module doc)."""
    out: dict[str, Peaks] = {}
    for path in peaks_files() if paths is None else paths:
        out.update(_read_rows(Path(path)))
    return out


def save_measured(key: str, row: dict, path: Path) -> None:
    """Writes (or replaces) one device's row in a peaks file, keeping the other devices' rows."""
    doc: dict[str, Any] = {"version": 1, "devices": {}}
    if path.exists():
        try:
            doc = json.loads(path.read_text())
            if not isinstance(doc.get("devices"), dict):
                raise ValueError("no 'devices' object")
        except (OSError, ValueError, AttributeError) as exc:
            raise UsageError(f"{path} is not a peaks file ({exc}): move it away or pick another --out") from exc
    doc["devices"][key] = row
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")


_warned_fallback: set[str] = set()


def fallback_warning(key: str) -> str:
    looked = ", ".join(str(p) for p in peaks_files())
    return (
        f"no measured peaks for the {key} (looked in {looked}): its speed of light uses the "
        f"datasheet peaks; run '{MEASURE_COMMAND}' on this GPU to measure them"
    )


def missing_measured_warning(device_kind: str, device_name: str, measured: dict[str, Peaks]) -> str | None:
    """The run warning for a known GPU that has no measured row (None on the CPU, an unknown GPU, or
    when measured peaks exist): for a run to add to its warnings once."""
    key = gpu_key(device_name) if device_kind != "cpu" else None
    return fallback_warning(key) if key is not None and key not in measured else None


def warn_datasheet_fallback(key: str) -> None:
    """Says on stderr, once per device per process, that the datasheet peaks stand in for measured ones."""
    if key not in _warned_fallback:
        _warned_fallback.add(key)
        _warn(fallback_warning(key))
