"""Dev bench for the example submissions: check + time them the competition way on the current device.

  python scripts/dev_kernels_bench.py --task mxfp4_mm submissions/triton_mxfp4.py [more files] --out r.json
  python scripts/dev_kernels_bench.py --task nvfp4_gemm submissions/triton_nvfp4.py --out r.json

Inputs are generated as /work/shared/spec/TASKS.md says (self-contained copy; uses `reference` if it
provides the same helpers).  Checks against a pure-torch fp32 dequant reference with the task tolerance.
Timing: mxfp4_mm: per call, L2 flush (zero a 2x-L2 buffer), start event, one call, end event, sync.
nvfp4_gemm: 50 distinct inputs per event pair (each after its own... no: flush once, then 50 calls).
Also prints the per-call floor: an empty Triton kernel launched the same way.
--shapes bench|test|all, --small for a quick CPU/interpreter check (device cpu with TRITON_INTERPRET=1).
"""
import argparse
import importlib.util
import json
import math
import os

import torch

MX_BENCH = [(4, 2880, 512, 4565), (16, 2112, 7168, 15), (32, 4096, 512, 457), (32, 2880, 512, 54),
            (64, 7168, 2048, 687), (256, 3072, 1536, 7856)]
MX_TEST = [(8, 2112, 7168, 124), (16, 3072, 1536, 6635), (64, 3072, 1536, 45), (256, 2880, 512, 78)]
NV_BENCH = [(128, 7168, 16384, 1, 1111), (128, 4096, 7168, 1, 1111), (128, 7168, 2048, 1, 1111)]
NV_TEST = [(128, 256, 256, 1, 1111), (128, 1536, 7168, 1, 1111), (128, 3072, 1536, 1, 1111),
           (256, 7168, 256, 1, 1111), (256, 7168, 2048, 1, 1111), (2304, 4608, 7168, 1, 1111),
           (384, 7168, 2304, 1, 1111), (512, 512, 7168, 1, 1111), (512, 4096, 512, 1, 1111),
           (512, 1536, 7168, 1, 1111)]

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


# ----------------------------------------------------------------------------------- formats
def quantize_mxfp4(x):
    R, K = x.shape
    xb = x.float().reshape(R, K // 32, 32)
    amax = xb.abs().amax(-1)
    bits = amax.view(torch.int32)
    bits = (bits + 0x200000) & -8388608
    r = bits.view(torch.float32)
    s = torch.floor(torch.log2(r)) - 2
    s = s.clamp(-127, 127)
    q = xb * torch.exp2(-s)[..., None]
    aq = q.abs()
    step = torch.where(aq < 2, 0.5, torch.where(aq < 4, 1.0, 2.0))
    v = torch.clamp(torch.round(aq / step) * step, max=6.0)
    code = torch.where(v < 2, v * 2, torch.where(v < 4, v + 2, v / 2 + 4)).to(torch.uint8)
    code = code | (torch.signbit(q).to(torch.uint8) << 3)
    code = code.reshape(R, K)
    packed = code[:, 0::2] | (code[:, 1::2] << 4)
    return packed.contiguous(), (s + 127).to(torch.uint8).contiguous()


def unpack_e2m1(packed):
    lut = torch.tensor(E2M1, dtype=torch.float32, device=packed.device)
    p = packed.view(torch.uint8)
    codes = torch.stack([p & 0xF, p >> 4], dim=-1).reshape(*p.shape[:-1], p.shape[-1] * 2)
    return lut[codes.long()]


def dequantize_mxfp4(packed, scales):
    v = unpack_e2m1(packed)
    R, K = v.shape
    sc = torch.exp2(scales.view(torch.uint8).float() - 127)
    return (v.reshape(R, K // 32, 32) * sc[..., None]).reshape(R, K)


def shuffle_weight(bq):
    N, KH = bq.shape
    return bq.view(N // 16, 16, KH // 32, 2, 16).permute(0, 2, 3, 1, 4).contiguous().view(N, KH)


def shuffle_scales_e8m0(s):
    R, C = s.shape
    Rp, Cp = (R + 255) // 256 * 256, (C + 7) // 8 * 8
    pad = torch.full((Rp, Cp), 0xFF, dtype=torch.uint8, device=s.device)  # padding: garbage (NaN)
    pad[:R, :C] = s
    return pad.view(Rp // 32, 2, 16, Cp // 8, 2, 4).permute(0, 3, 5, 2, 4, 1).contiguous().view(Rp, Cp)


def mx_generate(m, n, k, seed, device):
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    A = torch.randn((m, k), dtype=torch.bfloat16, device=device, generator=g)
    B = torch.randn((n, k), dtype=torch.bfloat16, device=device, generator=g)
    bq, bs = quantize_mxfp4(B)
    fp4 = getattr(torch, "float4_e2m1fn_x2", None)
    e8 = getattr(torch, "float8_e8m0fnu", None)
    B_q = bq.view(fp4) if fp4 is not None else bq
    B_sh = shuffle_weight(bq)
    B_sh = B_sh.view(fp4) if fp4 is not None else B_sh
    S_sh = shuffle_scales_e8m0(bs)
    S_sh = S_sh.view(e8) if e8 is not None else S_sh
    return (A, B, B_q, B_sh, S_sh)


def mx_reference(data):
    A, B, B_q, B_sh, S_sh = data
    aq, as_ = quantize_mxfp4(A)
    bq, bs = quantize_mxfp4(B)
    return (dequantize_mxfp4(aq, as_) @ dequantize_mxfp4(bq, bs).T).to(torch.bfloat16)


def to_blocked(sf):  # sf [MN, K16, L] -> [32, 4, rest_m, 4, rest_k, L] view with order (L, rm, rk, 32, 4, 4)
    MN, K16, L = sf.shape
    rm, rk = MN // 128, K16 // 4
    t = sf.permute(2, 0, 1).reshape(L, rm, 4, 32, rk, 4)  # l, rm, i4, i32, rk, j4
    t = t.permute(0, 1, 4, 3, 2, 5).contiguous()  # l, rm, rk, i32, i4, j4
    return t.permute(3, 4, 1, 5, 2, 0)  # i32, i4, rm, j4, rk, l


def nv_generate(m, n, k, l, seed, device):
    torch.manual_seed(seed)
    a = torch.randint(-128, 128, (l, m, k // 2), dtype=torch.int8, device=device)
    b = torch.randint(-128, 128, (l, n, k // 2), dtype=torch.int8, device=device)
    fp4 = getattr(torch, "float4_e2m1fn_x2", torch.uint8)
    a = a.view(fp4).permute(1, 2, 0)
    b = b.view(fp4).permute(1, 2, 0)
    c = torch.randn((l, m, n), dtype=torch.float16, device=device).permute(1, 2, 0)
    sfa = torch.randint(0, 4, (l, m, k // 16), device=device).to(torch.float8_e4m3fn).permute(1, 2, 0)
    sfb = torch.randint(0, 4, (l, n, k // 16), device=device).to(torch.float8_e4m3fn).permute(1, 2, 0)
    return (a, b, sfa, sfb, to_blocked(sfa), to_blocked(sfb), c)


def nv_reference(data):
    a, b, sfa, sfb, _, _, c = data
    M, KH, L = a.shape
    N = b.shape[0]
    out = torch.empty((M, N, L), dtype=torch.float32, device=a.device)
    for l in range(L):
        av = unpack_e2m1(a[:, :, l].contiguous().view(torch.uint8)) * sfa[:, :, l].float().repeat_interleave(16, 1)
        bv = unpack_e2m1(b[:, :, l].contiguous().view(torch.uint8)) * sfb[:, :, l].float().repeat_interleave(16, 1)
        out[:, :, l] = av @ bv.T
    return out.to(torch.float16)


# ----------------------------------------------------------------------------------- harness bits
def load_sub(path):
    name = "sub_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def check(out, ref, tol):
    if out.shape != ref.shape or out.dtype != ref.dtype:
        return False, f"shape/dtype {tuple(out.shape)} {out.dtype} vs {tuple(ref.shape)} {ref.dtype}"
    o, r = out.float(), ref.float()
    if not torch.isfinite(o).all():
        return False, "nan/inf"
    bad = (o - r).abs() > tol + tol * r.abs()
    nb = int(bad.sum())
    return nb == 0, f"{nb} bad, max abs err {float((o - r).abs().max()):.3g}"


_EMPTY = None


def empty_call(_data=None):
    global _EMPTY
    import triton
    if _EMPTY is None:
        @triton.jit
        def _empty_kernel(x):
            pass
        _EMPTY = _empty_kernel
    _EMPTY[(1,)](0)


def time_calls(fn, datas, per_pair, flush, reps):
    """Mean/min us per event pair; each pair: flush, start, per_pair calls (distinct inputs), end, sync."""
    ts = []
    for i in range(reps):
        batch = [datas[(i * per_pair + j) % len(datas)] for j in range(per_pair)]
        torch.cuda.synchronize()
        flush.zero_()
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        for d in batch:
            fn(d)
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) * 1000.0 / per_pair)
    return sum(ts) / len(ts), min(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*")
    ap.add_argument("--task", default="mxfp4_mm")
    ap.add_argument("--shapes", default="all")
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--out", default=None)
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    dev = args.device
    mx = args.task == "mxfp4_mm"
    if args.small:
        shapes = [(16, 64, 256, 1), (4, 96, 512, 2)] if mx else [(128, 128, 256, 1, 1)]
    else:
        b, t = (MX_BENCH, MX_TEST) if mx else (NV_BENCH, NV_TEST)
        shapes = {"bench": b, "test": t, "all": t + b}[args.shapes]
    tol = 1e-2 if mx else 1e-3
    gen = mx_generate if mx else nv_generate
    ref_fn = mx_reference if mx else nv_reference
    cuda = dev == "cuda"
    results = {"task": args.task, "device": torch.cuda.get_device_name() if cuda else "cpu", "files": {}}
    flush = None
    if cuda:
        l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 60 << 20)
        flush = torch.empty(2 * l2 // 4, dtype=torch.int32, device=dev)
        empty_call()
        fl = time_calls(empty_call, [None], 1, flush, 200)
        results["empty_kernel_floor_us"] = fl
        print(f"empty Triton kernel per-call floor: mean {fl[0]:.2f} us  min {fl[1]:.2f} us")
    for f in args.files:
        mod = load_sub(f)
        rows = []
        for sh in shapes:
            key = "x".join(str(x) for x in sh[:-1])
            bench_shape = tuple(sh) in (MX_BENCH if mx else NV_BENCH)
            try:
                d = gen(*sh, device=dev)
                ref = ref_fn(d)
                out = mod.custom_kernel(d)
                ok, msg = check(out, ref, tol)
                # fresh input with another seed (catches caching / stale state)
                d2 = gen(*sh[:-1], sh[-1] + 1, device=dev)
                ok2, msg2 = check(mod.custom_kernel(d2), ref_fn(d2), tol)
                ok, msg = ok and ok2, msg + " | " + msg2
            except Exception as ex:  # noqa: BLE001
                ok, msg = False, f"ERROR {type(ex).__name__}: {str(ex)[:300]}"
            row = {"shape": key, "ok": ok, "msg": msg, "bench": bench_shape}
            if cuda and ok:
                per_pair = 1 if mx else 50
                ndist = 4 if mx else 50
                datas = [d] + [gen(*sh[:-1], sh[-1] + 100 + i, device=dev) for i in range(ndist - 1)]
                reps = args.reps if mx else max(5, args.reps // 10)
                row["mean_us"], row["min_us"] = time_calls(mod.custom_kernel, datas, per_pair, flush, reps)
                del datas
            rows.append(row)
            print(f"  {os.path.basename(f):22s} {key:20s} ok={ok} {row.get('mean_us', float('nan')):9.2f} "
                  f"{row.get('min_us', float('nan')):9.2f}  {msg}", flush=True)
        bm = [r["mean_us"] for r in rows if r["bench"] and "mean_us" in r]
        nb = sum(1 for r in rows if r["bench"])
        gm = math.exp(sum(math.log(x) for x in bm) / len(bm)) if bm and len(bm) == nb else None
        results["files"][f] = {"rows": rows, "geomean_us": gm, "all_ok": all(r["ok"] for r in rows)}
        print(f"== {f}: all_ok={all(r['ok'] for r in rows)} bench geomean = {gm}")
    print("\nSUMMARY")
    for f, r in results["files"].items():
        print(f"{f}: geomean {r['geomean_us']}  all_ok {r['all_ok']}")
        for row in r["rows"]:
            print(f"   {row['shape']:20s} {'ok ' if row['ok'] else 'BAD'} mean {row.get('mean_us', float('nan')):8.2f}"
                  f" min {row.get('min_us', float('nan')):8.2f}{'  (bench)' if row['bench'] else ''}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
