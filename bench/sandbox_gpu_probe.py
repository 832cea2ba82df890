"""Which part of the worker's sandbox, applied alone, keeps CUDA from starting (run on a GPU machine).

Each variant runs in a fresh Python process: it applies one part of harness.worker.sandbox (or all of
them, in the worker's order), then initializes CUDA and runs one kernel. Prints one JSON line per
variant and writes them all with --out.

    python bench/sandbox_gpu_probe.py --out results/h200_sandbox_gpu_probe.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, sys
sys.path.insert(0, {root!r})
from harness.worker import sandbox
steps = {steps!r}
done = {{}}
try:
    if "netns" in steps:
        sandbox.new_network_namespace(); done["netns"] = True
    if "mountns" in steps:
        done["hidden_sockets"] = sandbox.hide_unix_sockets()
    if "caps" in steps:
        sandbox.drop_capabilities(); done["caps"] = True
    if any(s.startswith("landlock") for s in steps):
        paths = sandbox.worker_paths({run_dir!r})
        if "landlock_read_all" in steps:      # every file readable: is it a read the allow-list misses?
            paths.readable = ["/"]
        if "landlock_dev_all" in steps:       # every device file with ioctl: is it a device it misses?
            paths.devices = ["/dev"]
        if "landlock_write_all" in steps:     # every file writable
            paths.writable = ["/"]
        for step in steps:                    # one more writable folder: which write does CUDA need?
            if step.startswith("landlock_write:"):
                paths.writable = [*paths.writable, step.split(":", 1)[1]]
        done.update(sandbox.apply_landlock(paths))
    import torch
    torch.cuda.init()
    x = torch.ones(4, device="cuda") * 2
    done["cuda"] = float(x.sum().item())
except BaseException as exc:
    done["error"] = f"{{type(exc).__name__}}: {{str(exc)[:300]}}"
print(json.dumps(done))
"""

VARIANTS = {
    "none": [],
    "netns": ["netns"],
    "mountns": ["mountns"],
    "caps": ["caps"],
    "landlock": ["landlock"],
    "landlock_read_all": ["landlock_read_all"],
    "landlock_dev_all": ["landlock_dev_all"],
    "landlock_write_all": ["landlock_write_all"],
    "all": ["netns", "mountns", "caps", "landlock"],
    **{
        f"landlock_write:{d}": [f"landlock_write:{d}"]
        for d in ("/proc", "/proc/self/task", "/sys", "/tmp", "/dev", "/run", "/var", "/etc", "/opt", "/root", "/usr")
    },
}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=None)
    p.add_argument("--only", nargs="*", default=None, help="run only these variants")
    args = p.parse_args(argv)
    rows = {}
    for name, steps in VARIANTS.items():
        if args.only and name not in args.only:
            continue
        with tempfile.TemporaryDirectory(prefix="harness-run-probe-") as run_dir:
            proc = subprocess.run(
                [sys.executable, "-c", CHILD.format(root=str(ROOT), steps=steps, run_dir=run_dir)],
                capture_output=True,
                text=True,
                timeout=120,
            )
        line = (proc.stdout.strip().splitlines() or ["{}"])[-1]
        try:
            rows[name] = json.loads(line)
        except ValueError:
            rows[name] = {"error": "no report", "stderr": proc.stderr[-500:]}
        print(name, json.dumps(rows[name]), flush=True)
    if args.out:
        import torch

        doc = {
            "script": "bench/sandbox_gpu_probe.py",
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "torch": torch.__version__,
            "device": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
            "variants": rows,
        }
        Path(args.out).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
