"""``python -m harness measure-peaks``: measure this GPU's peaks for the speed of light and store them."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

from harness.analysis.peaks import gpu_key, package_peaks_file, save_measured, user_peaks_file
from harness.errors import UsageError

EXAMPLES = """  python -m harness measure-peaks                      # into the user data folder (found by every run)
  python -m harness measure-peaks --device cuda:1
  python -m harness measure-peaks --out harness/data/device_peaks.json   # the rows shipped with the package
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--out",
        metavar="PATH",
        default=None,
        help=f"peaks file to write (default: {user_peaks_file()}); other devices' rows in it are kept",
    )
    p.add_argument("--device", default=None, help="the GPU to measure (default: the first one)")


def run(args: argparse.Namespace) -> int:
    from harness.engine.device import device_info, select_device
    from harness.engine.measure_peaks import measure

    device = select_device(args.device)
    if device.type != "cuda":
        raise UsageError(
            "measure-peaks needs a CUDA/ROCm GPU and this torch sees none: run it on the GPU whose peaks you want"
        )
    info = device_info(device)
    key = gpu_key(info.name) or info.name
    out = Path(args.out) if args.out else user_peaks_file()
    print(f"measuring {info.name} (copy, bf16/fp8 matrix products, launch floor)...", file=sys.stderr)
    row = measure(device)
    row.update(
        device=info.name,
        driver=info.driver,
        torch=info.torch,
        triton=info.triton,
        date=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        script="python -m harness measure-peaks",
    )
    save_measured(key, row, out)
    print(json.dumps({key: row}, indent=2, sort_keys=True))
    print(
        f"wrote the {key} row to {out}"
        + (
            ""
            if out.resolve() == package_peaks_file().resolve()
            else f" (read after the package's {package_peaks_file()})"
        ),
        file=sys.stderr,
    )
    return 0
