"""Host time per call of the Triton examples on the benchmark shapes (a GPU machine).

The batched protocol (nvfp4_gemm: 50 calls between two events) measures the host once its launches
per call take longer than the GPU's work, so this script times what the host spends: a call of
custom_kernel after the first (its launch plan made), and the parts of it, each as the wall time of
many back-to-back calls divided by their number (the GPU queue never fills at these counts).

    PYTHONPATH=$PWD python3 scripts/validation/host_time.py --task nvfp4_gemm --out results/x.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts" / "validation"))

from tune_examples import FILES, load_submission  # noqa: E402

from harness.engine.device import device_info  # noqa: E402
from tasks import load_task  # noqa: E402


def per_call_us(fn, calls: int) -> float:
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def behind_busy_gpu_us(fn) -> float:
    """Host time of ``fn()`` while the GPU sleeps in a kernel queued before it (its launches wait)."""
    fn()
    torch.cuda.synchronize()
    torch.cuda._sleep(20_000_000)  # cycles: about 10 ms, longer than the host needs for fn
    t0 = time.perf_counter()
    fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) * 1e6


def direct_parts_us(sub, plan, ptrs, calls: int) -> dict:
    """The parts of a direct plan's call (triton_nvfp4's ``_plan``): the current stream; each
    cuLaunchKernelEx alone (its parameter block filled already), with and without its PDL attribute,
    and cuLaunchKernel (no attributes) with the same parameters; replacing a tensor map's address
    (cuTensorMapReplaceAddress, the same address); each launch with its parameters packed in one buffer
    (packed_params); and a ctypes call that does nothing in libcuda, for the cost of crossing into C."""
    import ctypes

    lib = sub._libcuda()
    stream = torch.cuda.current_stream().cuda_stream
    out = {"get_stream_us": per_call_us(lambda: sub._driver.active.get_current_stream(0), calls)}
    legacy = lib.cuLaunchKernel  # the launch without attributes, for its cost against the Ex call's
    legacy.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    plan(ptrs)
    for n, (cfg, function, params, _, _, _) in enumerate(plan.direct):
        cfg.stream = stream
        cfg_at, params_at, pdl = ctypes.addressof(cfg), ctypes.addressof(params), cfg.num_attrs
        out[f"cuLaunchKernelEx_{n}_us"] = per_call_us(
            lambda: lib.cuLaunchKernelEx(cfg_at, function, params_at, None), calls
        )
        cfg.num_attrs = 0
        out[f"cuLaunchKernelEx_{n}_no_pdl_us"] = per_call_us(
            lambda: lib.cuLaunchKernelEx(cfg_at, function, params_at, None), calls
        )
        cfg.num_attrs = pdl
        grid, block = list(cfg.grid), list(cfg.block)
        out[f"cuLaunchKernel_{n}_us"] = per_call_us(
            lambda: legacy(function, *grid, *block, cfg.shared, stream, params_at, None), calls
        )
        for m, (_, tma, _) in enumerate(plan.direct[n][4]):
            ptr, at = next(iter(tma.maps.items()))
            out[f"cuTensorMapReplaceAddress_{n}_{m}_us"] = per_call_us(
                lambda: lib.cuTensorMapReplaceAddress(at, ptr), calls
            )
        extra, _keep = packed_params(lib, plan.direct[n])
        extra_at = ctypes.addressof(extra)
        out[f"cuLaunchKernelEx_{n}_packed_us"] = per_call_us(
            lambda: lib.cuLaunchKernelEx(cfg_at, function, None, extra_at), calls
        )
        out[f"params_{n}"] = len(plan.direct[n][5][0])
    version = ctypes.c_int()
    out["ctypes_noop_us"] = per_call_us(lambda: lib.cuDriverGetVersion(ctypes.byref(version)), calls)
    return out


def packed_params(lib, step):
    """The parameters of a direct step (triton_nvfp4's ``_direct_step``, after a call filled them) as
    one buffer at the offsets the driver gives (cuFuncGetParamInfo: a tensor map sits on 64 bytes of the
    parameter bank, not of the buffer), for cuLaunchKernelEx's ``extra`` (CU_LAUNCH_PARAM_BUFFER_POINTER
    / _SIZE / _END) instead of an array of pointers."""
    import ctypes

    _, function, params, _, _, (objs, _) = step
    layout, end = [], 0
    for i, (obj, at) in enumerate(zip(objs, params)):
        off, size = ctypes.c_size_t(), ctypes.c_size_t()
        if lib.cuFuncGetParamInfo(ctypes.c_void_p(function), ctypes.c_size_t(i), ctypes.byref(off), ctypes.byref(size)):
            raise RuntimeError("cuFuncGetParamInfo failed")
        layout.append((off.value, at, size.value))
        end = max(end, off.value + size.value)
    buf = (ctypes.c_uint8 * end)()
    for off, at, size in layout:
        ctypes.memmove(ctypes.addressof(buf) + off, at, size)
    size = ctypes.c_size_t(end)
    return (ctypes.c_void_p * 5)(1, ctypes.addressof(buf), 2, ctypes.addressof(size), 0), (buf, size)


def packed_call_ok(sub, task, data, plan, ptrs) -> bool:
    """One call on ``data`` (its data pointers ``ptrs``) launched through packed parameter buffers
    (packed_params), its output checked."""
    import ctypes

    lib = sub._libcuda()
    data[6].zero_()
    plan(ptrs)  # fills the parameters
    torch.cuda.synchronize()
    data[6].zero_()
    stream = torch.cuda.current_stream().cuda_stream
    for step in plan.direct:
        step[0].stream = stream
        extra, _keep = packed_params(lib, step)
        if lib.cuLaunchKernelEx(ctypes.addressof(step[0]), step[1], None, ctypes.addressof(extra)):
            return False
    torch.cuda.synchronize()
    return bool(task.check(data, data[6])[0])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--task", choices=sorted(FILES), required=True)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument(
        "--inputs",
        type=int,
        default=50,
        help="distinct inputs for the batched rows (the task's inputs per measurement)",
    )
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("host_time: needs a CUDA GPU", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    task = load_task(args.task)
    sub = load_submission(task)
    rows = []
    for case in task.benchmarks:
        data = task.generate_input(case, device)
        sub.custom_kernel(data)
        row = {"case": dict(case), "custom_kernel_us": per_call_us(lambda: sub.custom_kernel(data), args.calls)}
        # as the batched protocol calls it: one call on each of many distinct inputs, on an idle GPU
        # and queued behind a GPU that is busy (as behind the harness's launch gate)
        inputs = [task.generate_input({**case, "seed": case["seed"] + 1 + i}, device) for i in range(args.inputs)]

        def batch():
            return [sub.custom_kernel(d) for d in inputs]

        row["batched_us"] = per_call_us(batch, 4) / len(inputs)
        row["batched_behind_busy_gpu_us"] = behind_busy_gpu_us(batch) / len(inputs)
        row["same_input_behind_busy_gpu_us"] = behind_busy_gpu_us(
            lambda: [sub.custom_kernel(data) for _ in inputs]
        ) / len(inputs)
        del inputs
        plans = getattr(sub, "_PLANS", {})
        if len(plans) == 1:  # the plan alone, and its launches one by one
            (plan,) = plans.values()
            ptrs = (
                tuple(t.data_ptr() for t in (data[0], data[1], data[2], data[3], data[6]))
                if args.task == "nvfp4_gemm"
                else None
            )
            if ptrs is not None:
                row["plan_us"] = per_call_us(lambda: plan(ptrs), args.calls)
                stream = torch.cuda.current_stream().cuda_stream
                for n, (h, (g0, g1, g2), template, slots, consts) in enumerate(getattr(plan, "steps", ())):
                    launch_args = [a.value(ptrs) if isinstance(a, sub._Tma) else a for a in template]
                    for pos, i in slots:
                        launch_args[pos] = ptrs[i]
                    row[f"launch_{n}_us"] = per_call_us(
                        lambda: h.run(
                            g0, g1, g2, stream, h.function, h.packed_metadata, None, None, None, *launch_args, *consts
                        ),
                        args.calls,
                    )
                row["key_us"] = per_call_us(
                    lambda: (
                        data[0].shape,
                        data[1].shape,
                        data[0].stride(),
                        data[1].stride(),
                        data[2].stride(),
                        data[3].stride(),
                        data[6].stride(),
                        data[0].get_device(),
                    ),
                    args.calls,
                )
                if getattr(plan, "direct", None):
                    row.update(direct_parts_us(sub, plan, ptrs, args.calls))
                    row["packed_output_ok"] = packed_call_ok(sub, task, data, plan, ptrs)
        plans.clear()
        rows.append(row)
        print(
            f"{args.task} {case}: " + ", ".join(f"{k} {v:.2f}" for k, v in row.items() if isinstance(v, float)),
            file=sys.stderr,
        )
    doc = {
        "script": "scripts/validation/host_time.py",
        "device": device_info(device).__dict__,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "calls": args.calls,
        "file": FILES[args.task],
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
