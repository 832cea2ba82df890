"""Lab probe (not a product benchmark): what each step of a chunk of timed calls costs when the worker's
steps run in one plain process, to compare with a ranked run's ``timing.*`` phases. Per benchmark
shape: 10 fresh inputs, each touched, timed (the worker's Sampler; ``--hide``: with the task's launch
gate) and its output copied to the host as the worker does; then the parent's check of each output.
``--idle-peer``: a second process holds a CUDA context on the same GPU meanwhile, as the harness's parent
does. Prints one JSON line per shape, medians in milliseconds."""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

PEER = "import torch, time; torch.empty(1, device='cuda'); print('up', flush=True); time.sleep(600)"
STEPS = ("generate", "touch", "call", "outputs", "check")


def _load_kernel(path: str) -> Callable[[Any], Any]:
    spec = importlib.util.spec_from_file_location("submission", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.custom_kernel


def _shape_costs(task: Any, case: dict, kernel: Callable, sampler: Any, dev: Any, sync: Callable) -> dict:
    from harness.worker.staging import OutputStaging

    staging = OutputStaging(dev)

    steps: dict[str, list[float]] = {k: [] for k in STEPS}

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        out = fn()
        sync()
        steps[name].append(time.perf_counter() - t0)
        return out

    datas = [timed("generate", lambda j=j: task.generate_input(dict(case, seed=1000 + j), dev)) for j in range(13)]
    for data in datas[:3]:  # warm-up calls: compilation, launch plans
        kernel(data)
    sync()
    outs = []
    for data in datas[3:]:
        timed("touch", lambda data=data: sampler.touch(data))
        _ns, _wall, out = timed("call", lambda data=data: sampler.per_call(kernel, data))
        staging.begin()
        timed("outputs", lambda out=out: staging.copy(out))
        outs.append((data, out.clone()))
    for data, out in outs:
        timed("check", lambda data=data, out=out: task.check(data, out))
    row: dict[str, Any] = {k: round(statistics.median(v) * 1e3, 3) for k, v in steps.items()}
    row["case"] = {k: v for k, v in case.items() if k != "seed"}
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    p.add_argument("--task", required=True)
    p.add_argument("--submission", required=True)
    p.add_argument("--idle-peer", action="store_true")
    p.add_argument("--hide", action="store_true", help="time through the task's launch gate")
    args = p.parse_args()
    import torch

    from harness.engine.device import device_info
    from harness.worker.sampler import Sampler
    from tasks.registry import load_task

    peer = None
    if args.idle_peer:
        peer = subprocess.Popen([sys.executable, "-c", PEER], stdout=subprocess.PIPE)
        assert peer.stdout is not None
        peer.stdout.readline()
    task = load_task(args.task)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    sampler = Sampler(dev, device_info(dev).l2_bytes, task.original_clear_bytes if args.hide else 0)
    kernel = _load_kernel(args.submission)
    try:
        for case in task.benchmarks:
            print(json.dumps(_shape_costs(task, dict(case), kernel, sampler, dev, sync)), flush=True)
    finally:
        if peer is not None:
            peer.kill()


if __name__ == "__main__":
    main()
