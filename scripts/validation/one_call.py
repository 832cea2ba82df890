"""Runs a Triton example a few times on one benchmark shape (optionally with a given config), for a
profiler such as Nsight Compute to attach to:

    ncu --kernel-name regex:mxfp4 python scripts/validation/one_call.py mxfp4_mm 64 64,64,128,1,1,4,3,0
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts" / "validation"))

from tune_examples import load_submission  # noqa: E402

from tasks import load_task  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    task = load_task(argv[0])
    sub = load_submission(task)
    case = next(c for c in task.benchmarks if c["m"] == int(argv[1]))
    if len(argv) > 2:
        sub.CONFIGS[(case["m"], case["n"], case["k"])] = tuple(int(x) for x in argv[2].split(","))
    data = task.generate_input(case, torch.device("cuda"))
    for _ in range(3):
        out = sub.custom_kernel(data)
    torch.cuda.synchronize()
    print(task.check(data, out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
