"""GPU validation of the portable references (issue #2), written to a results file.

1. mxfp4_mm: the reference agrees with an independent ``tl.dot_scaled`` (e2m1 x e2m1, e8m0 scales)
   Triton kernel, within the task's tolerance, on every benchmark shape.
2. One reference check (generate excluded: reference + check_implementation) of the largest shape of
   each task costs under 5 ms on this GPU.
3. nvfp4_gemm: the reference's GPU kernel (``fp4_reference/gpu_gemm.py``) gives the bits of its torch
   path (``fused=False``) on every test and benchmark shape, each with 3 fresh seeds, and the median
   milliseconds of each path per shape (a ranked verdict computes the reference for every timed output).

    python bench/validate_reference_gpu.py --out results/h200_reference.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root (bench/_common also does)
from _common import git_commit, timed

from fp4_reference import nvfp4_gemm_reference, quantize_mxfp4, unshuffle_scales_e8m0
from fp4_reference.gpu_gemm import fused_nvfp4_gemm
from harness.engine.device import device_info
from tasks import load_task


@triton.jit
def _dot_scaled_kernel(
    a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr
):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk2 = k0 // 2 + tl.arange(0, BK // 2)
        rks = k0 // 32 + tl.arange(0, BK // 32)
        a = tl.load(a_ptr + rm[:, None] * (K // 2) + rk2[None, :], mask=rm[:, None] < M, other=0)
        b = tl.load(b_ptr + rn[:, None] * (K // 2) + rk2[None, :], mask=rn[:, None] < N, other=0)
        sa = tl.load(as_ptr + rm[:, None] * (K // 32) + rks[None, :], mask=rm[:, None] < M, other=127)
        sb = tl.load(bs_ptr + rn[:, None] * (K // 32) + rks[None, :], mask=rn[:, None] < N, other=127)
        acc = tl.dot_scaled(a, sa, "e2m1", b.T, sb, "e2m1", acc)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16), mask=mask)


def dot_scaled_mm(A, B_q, B_scales):
    a_q, a_s = quantize_mxfp4(A)
    M, K = A.shape
    N = B_q.shape[0]
    c = torch.empty(M, N, dtype=torch.bfloat16, device=A.device)
    grid = (triton.cdiv(M, 16), triton.cdiv(N, 64))
    _dot_scaled_kernel[grid](
        a_q.view(torch.uint8),
        a_s.view(torch.uint8),
        B_q.view(torch.uint8),
        B_scales.view(torch.uint8),
        c,
        M,
        N,
        K,
        BM=16,
        BN=64,
        BK=64,
    )
    return c


def _check_ms(task, data, reps=20) -> float:
    out = task.reference(data)
    task.check(data, out)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        task.check(data, out)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / reps * 1e3


def nvfp4_gpu_kernel_rows(device: torch.device) -> list[dict]:
    """Section 3: per nvfp4_gemm shape, whether the two paths agree bit for bit, and their times."""
    task = load_task("nvfp4_gemm")
    rows = []
    for case in task.tests + task.benchmarks:
        same = []
        for seed in range(3):
            a, b, sfa, sfb, *_ = task.generate_input(dict(case, seed=case["seed"] + 7919 * (seed + 1)), device)
            fused = fused_nvfp4_gemm(a, b, sfa, sfb)  # the kernel itself, not behind the reference's gate
            same.append(bool(torch.equal(fused, nvfp4_gemm_reference(a, b, sfa, sfb, fused=False))))
        row = {"case": case, "same_bits": all(same), "seeds": len(same)}
        torch_path = functools.partial(nvfp4_gemm_reference, a, b, sfa, sfb, fused=False)
        row["torch_ms"] = timed(torch_path, torch.cuda.synchronize, 20)[0] * 1e3
        kernel = functools.partial(fused_nvfp4_gemm, a, b, sfa, sfb)
        row["gpu_kernel_ms"] = timed(kernel, torch.cuda.synchronize, 20)[0] * 1e3
        rows.append(row)
        print(
            f"nvfp4 {case}: same bits={row['same_bits']} torch {row['torch_ms']:.3f} ms, kernel {row['gpu_kernel_ms']:.3f} ms",
            file=sys.stderr,
        )
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    device = torch.device("cuda")
    mx = load_task("mxfp4_mm")
    rows, all_ok = [], True
    for case in mx.benchmarks:
        A, B, B_q, B_shuffle, B_scale_sh = mx.generate_input(case, device)
        N, K = B.shape
        scales = unshuffle_scales_e8m0(B_scale_sh, N, K // 32)
        ours = dot_scaled_mm(A, B_q, scales)
        ok, message = mx.check((A, B, B_q, B_shuffle, B_scale_sh), ours)
        ref = mx.reference((A, B, B_q, B_shuffle, B_scale_sh))
        rows.append(
            {
                "case": case,
                "agrees_within_tolerance": ok,
                "message": message,
                "bit_exact": bool(torch.equal(ours, ref)),
                "max_abs_diff": float((ours.float() - ref.float()).abs().max()),
            }
        )
        all_ok &= ok
        print(f"mxfp4 {case}: within tolerance={ok} bit_exact={rows[-1]['bit_exact']}", file=sys.stderr)
    timings = {}
    for name in ("mxfp4_mm", "nvfp4_gemm"):
        task = load_task(name)
        cases = task.tests + task.benchmarks
        largest = max(cases, key=task.case_flops)
        data = task.generate_input(largest, device)
        ms = _check_ms(task, data)
        timings[name] = {"case": largest, "reference_and_check_ms": ms, "under_5_ms": ms < 5.0}
        print(f"{name} largest {largest}: reference+check {ms:.3f} ms", file=sys.stderr)
    nv_rows = nvfp4_gpu_kernel_rows(device)
    info = device_info(device)
    doc = {
        "script": "bench/validate_reference_gpu.py",
        "commit": git_commit(),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "device": info.__dict__,
        "dot_scaled_agreement": rows,
        "check_cost": timings,
        "nvfp4_gpu_kernel": nv_rows,
        "all_ok": all_ok and all(t["under_5_ms"] for t in timings.values()) and all(r["same_bits"] for r in nv_rows),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return 0 if doc["all_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
