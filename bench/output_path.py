#!/usr/bin/env python
"""What bringing a timed call's output from the worker to the parent costs, per output: the worker's host
copy, the transfer, and the parent's rebuild on the run's device. A real worker process and the real
channel, with the output sizes of each task's benchmark shapes and as many outputs per reply as a ranked
chunk returns (mxfp4_mm 10, per call; nvfp4_gemm 50, batched).

Three paths, measured alike in the same processes:
- ``shared``: the harness's path (harness.worker.staging into the region the parent shares with the worker,
  harness.shared_outputs, page-locked on a GPU; the parent copies each output from there to the device);
- ``channel``: the harness's path before it, and still its path for what does not fit the region
  (harness.worker.staging into reused pinned memory, harness.channel's frames, read into fresh tensors on
  the device through a reused pinned buffer);
- ``pipe``: the path before it, kept here for comparison only (a fresh host copy per output with
  ``.cpu()`` and ``tobytes``, multiprocessing's ``send_bytes``/``recv_bytes``, a ``bytearray`` copy and
  ``torch.frombuffer`` in the parent, then ``.to(device)``).

A ranked triton_nvfp4 verdict on the H200 returned 13,300 outputs of 1.8 MB and spent 35 s of its
144 s copying them to the host (``timing.outputs``, ``git show 7c52e05:results/h200_verdicts/triton_nvfp4.warmup2.json``).

Examples:
  python bench/output_path.py --out results/h200_output_path.json        # on the GPU
  python bench/output_path.py --reps 5 --out /tmp/output_path.json       # on the CPU: host copies only
"""

from __future__ import annotations

import json
import multiprocessing
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _common import doc_parser, machine, say, write_results  # _common puts the repository root on sys.path

VERSION = 2  # 1 - first version; 2 - the shared path
PATHS = ("shared", "channel", "pipe")
TASKS = {"mxfp4_mm": 10, "nvfp4_gemm": 50}  # outputs per ranked chunk


def _worker(conn: Any, device_name: str) -> None:
    """The worker's side: per request (path, dtype, shape, outputs, reps), makes the outputs once, then
    for each rep copies them to the host and sends them along the path."""
    import multiprocessing.reduction

    import torch

    from harness import protocol
    from harness.shared_outputs import SharedOutputs
    from harness.worker.staging import OutputStaging

    device = torch.device(device_name)
    staging = OutputStaging(device)
    while True:
        request = json.loads(conn.recv_bytes())
        if not request:
            return
        if staging.shared is not None:
            staging.shared.close()
            staging.shared = None
        if request["path"] == "shared":
            staging.shared = SharedOutputs.attach(
                multiprocessing.reduction.recv_handle(conn), request["nbytes"], device
            )
        dtype = getattr(torch, request["dtype"])
        outs = [torch.randn(request["shape"], device=device).to(dtype) for _ in range(request["outputs"])]
        for _ in range(request["reps"]):
            conn.recv_bytes()  # go
            t0 = time.perf_counter()
            if request["path"] in ("shared", "channel"):
                staging.begin()
                views = [staging.copy(o) for o in outs]
                pinned = staging.shared.pinned if staging.shared is not None else None
                protocol.send(conn, {"copy_s": time.perf_counter() - t0, "worker_pinned": pinned}, views)
            else:
                raws = [o.detach().cpu().reshape(-1).view(torch.uint8).numpy().tobytes() for o in outs]
                conn.send_bytes(json.dumps({"copy_s": time.perf_counter() - t0}).encode())
                for raw in raws:
                    conn.send_bytes(raw)


def _one_reply(conn: Any, path: str, reader: Any, dtype: Any, shape: list[int], k: int, device: Any) -> dict:
    """One reply of ``k`` outputs, timed from the parent's request to the outputs rebuilt on ``device``."""
    import torch

    from harness import protocol

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    name = str(dtype).removeprefix("torch.")
    t0 = time.perf_counter()
    conn.send_bytes(b"go")
    if path in ("shared", "channel"):
        conn.poll(None)
        header, frames = protocol.receive(conn, reader)
        t1 = time.perf_counter()
        outs = [protocol.rebuild_tensor(name, shape, f, device.type, device) for f in frames]
    else:
        header = json.loads(conn.recv_bytes())
        raws = [conn.recv_bytes() for _ in range(k)]
        t1 = time.perf_counter()
        outs = [torch.frombuffer(bytearray(r), dtype=torch.uint8).view(dtype).reshape(shape).to(device) for r in raws]
    sync()
    t2 = time.perf_counter()
    assert len(outs) == k
    copy = header["copy_s"]
    steps = {"copy": copy / k, "transfer": (t1 - t0 - copy) / k, "rebuild": (t2 - t1) / k, "total": (t2 - t0) / k}
    return steps | ({"worker_pinned": header["worker_pinned"]} if header.get("worker_pinned") is not None else {})


def measure(conn: Any, worker_pid: int, task: Any, k: int, reps: int, device: Any) -> list[dict[str, Any]]:
    """Per benchmark shape and path: the median milliseconds per output of each step over ``reps`` replies
    (after one untimed reply)."""
    import multiprocessing.reduction

    import torch

    from harness.channel import FrameReader
    from harness.shared_outputs import SharedOutputs

    smallest = min(task.tests, key=lambda c: c.get("m", 1) * c.get("n", 1) * c.get("k", 1))
    dtype = task.reference(task.generate_input(smallest, torch.device("cpu"))).dtype
    rows = []
    for case in task.benchmarks:
        shape = [case["m"], case["n"]] + ([case["l"]] if "l" in case else [])
        for path in PATHS:
            reader = FrameReader(device)
            name = str(dtype).removeprefix("torch.")
            request = {"path": path, "dtype": name, "shape": shape, "outputs": k, "reps": reps + 1}
            nbytes = k * torch.empty(shape, dtype=dtype).nbytes
            if path == "shared":
                reader.shared = SharedOutputs.create(nbytes, device)
                if reader.shared is None or reader.shared.fd is None:
                    say(f"{task.name} {shape}: no shared region on this system")
                    continue
                request.update(nbytes=nbytes, pinned=reader.shared.pinned)
            conn.send_bytes(json.dumps(request).encode())
            if reader.shared is not None and reader.shared.fd is not None:
                multiprocessing.reduction.send_handle(conn, reader.shared.fd, worker_pid)
            replies = [_one_reply(conn, path, reader, dtype, shape, k, device) for _ in range(reps + 1)][1:]
            if reader.shared is not None:
                reader.shared.close()
            row = {"shape": shape, "dtype": name, "output_bytes": nbytes // k, "path": path}
            if path == "shared":
                row["pinned_in_parent"] = request["pinned"]
            steps = [step for step in replies[0] if step != "worker_pinned"]
            row.update({f"{step}_ms": statistics.median(r[step] for r in replies) * 1e3 for step in steps})
            if "worker_pinned" in replies[0]:
                row["pinned_in_worker"] = replies[0]["worker_pinned"]
            rows.append(row)
            say(f"{task.name} {shape} {path}: " + ", ".join(f"{s} {row[f'{s}_ms']:.3f}" for s in steps) + " ms")
    return rows


def main(argv: list[str] | None = None) -> int:
    p = doc_parser(__doc__)
    p.add_argument("--out", required=True, help="the results file (JSON)")
    p.add_argument("--reps", type=int, default=10, help="timed replies per shape and path (default 10)")
    args = p.parse_args(argv)
    import torch

    from tasks import load_task

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    parent, child = multiprocessing.Pipe(duplex=True)
    worker = multiprocessing.get_context("spawn").Process(target=_worker, args=(child, device.type))
    worker.start()
    child.close()
    doc: dict[str, Any] = {"version": VERSION, "environment": machine(device.type), "reps": args.reps, "tasks": {}}
    try:
        for name, k in TASKS.items():
            doc["tasks"][name] = {
                "outputs_per_reply": k,
                "rows": measure(parent, int(worker.pid or 0), load_task(name), k, args.reps, device),
            }
    finally:
        parent.send_bytes(b"{}")
        worker.join(30)
    write_results(Path(args.out), doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
