"""nvfp4_gemm in Triton for NVIDIA Hopper (H200).

C[:, :, l] = dequant(a[:, :, l]) @ dequant(b[:, :, l])^T in fp16, e2m1 elements with e4m3 scales per
16-element block.  Hopper has no FP4 tensor cores and Triton 3.6 cannot lower dot_scaled with e4m3 scales
on sm_90, so the kernel decodes both operands in registers to fp16 and uses a plain fp16 tl.dot (wgmma):

  fp16 bits ((code & 7) << 9) | ((code & 8) << 12)  ==  e2m1(code) * 2**-14   (subnormals included)
  fp16 bits ((sf & 0x7F) << 7) * 256                 ==  e4m3(sf)               (exact, every e4m3)

so each operand element is e2m1 * scale * 2**-14, exact in fp16 for every valid e4m3 scale, and the fp32
accumulator is multiplied by 2**28 at the end (exact).  Split-K over a persistent fp32 workspace with a
last-arriving-split reduction (counters reset by the kernel itself). A_DEC configs decode A once in a
first kernel (A is re-read by every N tile), so a call is one or two launches.
On sm_100 (B200) a second kernel multiplies the packed operands directly with tl.dot_scaled and the
e4m3 scales (Triton >= 3.8 lowers it to tcgen05.mma kind::mxf4nvf4 block16, the FP4 tensor cores); a
CPU test checks that it compiles to that instruction, but it has never run on a B200 here: the
harness's check is what would catch a mistake there.
"""
import os

import torch
import triton
import triton.language as tl

try:  # pragma: no cover
    from task import input_t, output_t  # noqa: F401
except Exception:  # noqa: BLE001
    pass

_INTERP = os.environ.get("TRITON_INTERPRET", "0") == "1"
_SM100 = not _INTERP and torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 10


@triton.jit
def _decode(p, sf):
    """p: uint8 [R, BK/2] packed e2m1, sf: uint8 e4m3 [R, BK/16] -> fp16 [R, BK] = value * 2**-14."""
    R: tl.constexpr = p.shape[0]
    BKH: tl.constexpr = p.shape[1]
    pi = p.to(tl.int16)
    c = tl.reshape(tl.join(pi & 0xF, (pi >> 4) & 0xF), (R, BKH * 2))
    v = (((c & 7) << 9) | ((c & 8) << 12)).to(tl.float16, bitcast=True)
    si = sf.to(tl.int16)
    s = (((si & 0x7F) << 7) | ((si & 0x80) << 8)).to(tl.float16, bitcast=True) * 256.0
    v3 = tl.reshape(v, (R, BKH // 8, 16)) * tl.reshape(s, (R, BKH // 8, 1))
    return tl.reshape(v3, (R, BKH * 2))


@triton.jit
def _decode_a_kernel(a_ptr, sa_ptr, out_ptr, M, K, sam, sal, ssam, ssal,
                     BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr):
    """A_DEC: decodes a [M, K/2, L] once into fp16 out [L, M, K] (value * 2**-14), so the GEMM's
    N/BLOCK_N programs do not each decode the same A tiles again."""
    pid_r, pid_k, l = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    offs_r = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
    k0 = pid_k * BLOCK_K
    a = tl.load(a_ptr + l * sal + offs_r[:, None] * sam + k0 // 2 + tl.arange(0, BLOCK_K // 2)[None, :])
    sa = tl.load(sa_ptr + l * ssal + offs_r[:, None] * ssam + k0 // 16 + tl.arange(0, BLOCK_K // 16)[None, :])
    out = out_ptr + l * M * K + offs_r[:, None] * K + k0 + tl.arange(0, BLOCK_K)[None, :]
    tl.store(out, _decode(a, sa))


@triton.jit
def _nvfp4_kernel(a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr, ws_ptr, cnt_ptr,
                  M, N, K, sam, sal, sbn, sbl, ssam, ssal, ssbn, ssbl, scm, scl, K_SPLIT,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  SPLIT_K: tl.constexpr, INTERP: tl.constexpr, A_DEC: tl.constexpr = False):
    # A_DEC: a_ptr is the decoded fp16 A of _decode_a_kernel ([L, M, K]; sam = K, sal = M * K)
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_z = tl.program_id(2)
    l = pid_z // SPLIT_K
    pid_k = pid_z % SPLIT_K
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_kh = tl.arange(0, BLOCK_K // 2)
    offs_ks = tl.arange(0, BLOCK_K // 16)
    if A_DEC:
        a_ptrs = a_ptr + l * sal + offs_m[:, None] * sam + tl.arange(0, BLOCK_K)[None, :]
    else:
        a_ptrs = a_ptr + l * sal + offs_m[:, None] * sam + offs_kh[None, :]
    b_ptrs = b_ptr + l * sbl + offs_n[:, None] * sbn + offs_kh[None, :]
    sa_ptrs = sa_ptr + l * ssal + offs_m[:, None] * ssam + offs_ks[None, :]
    sb_ptrs = sb_ptr + l * ssbl + offs_n[:, None] * ssbn + offs_ks[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    k_lo = pid_k * K_SPLIT
    for k in range(k_lo, k_lo + K_SPLIT, BLOCK_K):
        if A_DEC:
            av = tl.load(a_ptrs + k)
        else:
            av = _decode(tl.load(a_ptrs + k // 2), tl.load(sa_ptrs + k // 16))
        b = tl.load(b_ptrs + k // 2)
        sb = tl.load(sb_ptrs + k // 16)
        bv = _decode(b, sb)
        if INTERP:
            acc = tl.dot(av.to(tl.float32), tl.trans(bv).to(tl.float32), acc, input_precision="ieee")
        else:
            acc = tl.dot(av, tl.trans(bv), acc)
    c_ptrs = c_ptr + l * scl + offs_m[:, None] * scm + offs_n[None, :]
    if SPLIT_K == 1:
        tl.store(c_ptrs, (acc * 268435456.0).to(tl.float16))
    else:
        MN = M * N
        ws_ptrs = ws_ptr + (l * SPLIT_K) * MN + offs_m[:, None] * N + offs_n[None, :]
        tl.store(ws_ptrs + pid_k * MN, acc)
        tl.debug_barrier()
        tile = (l * tl.num_programs(1) + pid_m) * tl.num_programs(0) + pid_n
        old = tl.atomic_add(cnt_ptr + tile, 1, sem="acq_rel", scope="gpu")
        if old == SPLIT_K - 1:
            tot = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for s in range(SPLIT_K):
                tot += tl.load(ws_ptrs + s * MN, cache_modifier=".cg")
            tl.store(c_ptrs, (tot * 268435456.0).to(tl.float16))
            tl.atomic_xchg(cnt_ptr + tile, 0)


@triton.jit
def _nvfp4_sm100_kernel(a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr, M, N, K,
                        sam, sal, sbn, sbl, ssam, ssal, ssbn, ssbl, scm, scl,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """sm_100: packed e2m1 operands and float8_e4m3fn scales straight into tl.dot_scaled (16-element
    blocks: the FP4 tensor cores apply the scales), fp32 accumulation, fp16 C."""
    pid_n, pid_m, l = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_kh = tl.arange(0, BLOCK_K // 2)
    offs_ks = tl.arange(0, BLOCK_K // 16)
    a_ptrs = a_ptr + l * sal + offs_m[:, None] * sam + offs_kh[None, :]
    b_ptrs = b_ptr + l * sbl + offs_n[:, None] * sbn + offs_kh[None, :]
    sa_ptrs = sa_ptr + l * ssal + offs_m[:, None] * ssam + offs_ks[None, :]
    sb_ptrs = sb_ptr + l * ssbl + offs_n[:, None] * ssbn + offs_ks[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        acc = tl.dot_scaled(tl.load(a_ptrs + k // 2), tl.load(sa_ptrs + k // 16), "e2m1",
                            tl.trans(tl.load(b_ptrs + k // 2)), tl.load(sb_ptrs + k // 16), "e2m1", acc)
    tl.store(c_ptr + l * scl + offs_m[:, None] * scm + offs_n[None, :], acc.to(tl.float16))


# (BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K, num_warps, num_stages, A_DEC)
# The benchmark shapes, by scripts/validation/tune_examples.py on the H200 (results/h200_tuning_nvfp4.json).
CONFIGS = {
    (128, 7168, 16384): (128, 128, 64, 4, 8, 3, 1),
    (128, 4096, 7168): (128, 64, 64, 4, 4, 3, 1),
    (128, 7168, 2048): (128, 64, 64, 2, 4, 3, 1),
}


def _pick(M, N, K, L):
    cfg = CONFIGS.get((M, N, K))
    if cfg is not None:
        return cfg
    BM, BN, BK = 128, 128, 64
    tiles = (M // BM) * (N // BN) * L
    split = 1
    while tiles * split * 2 <= 140 and K // (split * 2) >= 512 and (K // (split * 2)) % BK == 0:
        split *= 2
    return (BM, BN, BK, split, 8, 3, 0)


_BUFFERS = {}


def _buffer(dev, name, numel, dtype):
    """Scratch memory reused by every call (grown when too small, zero-filled when made); nothing is
    cached by input identity or content."""
    buf = _BUFFERS.get((dev, name))
    if buf is None or buf.numel() < numel:
        buf = _BUFFERS[(dev, name)] = torch.zeros(numel, dtype=dtype, device=dev)
    return buf


def _scratch(dev, nws, ncnt):
    """Split-K: the fp32 partials and the per-tile arrival counters (the kernel resets them to 0)."""
    return (_buffer(dev, "ws", max(nws, 1 << 20), torch.float32),
            _buffer(dev, "cnt", max(ncnt, 4096), torch.int32))


# Triton's launcher binds and checks every argument on each call, and every tensor view, stride read and
# pointer check adds to it: about 57 us per call on the H200's host, more than the GPU needs for the
# smaller shapes, so the batched protocol (50 calls between two events) measured the host. After the
# first call for a (shapes, strides, device), a plan holds what does not change between such calls:
# the compiled kernels, grids, scalar arguments and scratch pointers; a later call passes only the five
# data pointers (plain ints, which the launcher takes as they are) to each compiled kernel's launcher.
# Nothing is cached by input identity or content.
class _In:
    """An argument slot filled with one of the call's tensors: 0..4 = a, b, sfa, sfb (as uint8) and c,
    5, 6 = sfa, sfb as they are (float8_e4m3fn, for tl.dot_scaled); ``ptr``: which data pointer."""
    def __init__(self, i):
        self.i, self.ptr = i, (0, 1, 2, 3, 4, 2, 3)[i]


_A, _B, _SA, _SB, _C, _SA_E4M3, _SB_E4M3 = (_In(i) for i in range(7))
_PLANS = {}
_FAST = [not _INTERP]
try:
    from triton.runtime import driver as _driver
except Exception:  # noqa: BLE001
    _driver = None


def _launches(M, N, K, L, strides, dev):
    """The call's kernel launches as (kernel, grid, args, meta); ``strides``: a, b, sfa, sfb, c as uint8
    views (elements); an ``_In`` argument stands for one of the call's tensors."""
    (sam, _, sal), (sbn, _, sbl), (ssam, _, ssal), (ssbn, _, ssbl), (scm, _, scl) = strides
    if _SM100 and M % 128 == 0 and N % 128 == 0 and K % 128 == 0:
        return [(_nvfp4_sm100_kernel, (N // 128, M // 128, L),
                 [_A, _B, _SA_E4M3, _SB_E4M3, _C, M, N, K, sam, sal, sbn, sbl, ssam, ssal, ssbn, ssbl, scm, scl],
                 {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, "num_warps": 4, "num_stages": 3})]
    BM, BN, BK, SPLIT, nw, ns, a_dec = _pick(M, N, K, L)
    out, a_arg = [], _A
    if a_dec:
        a_arg = _buffer(dev, "a_dec", L * M * K, torch.float16)
        out.append((_decode_a_kernel, (M // 64, K // 256, L), [_A, _SA, a_arg, M, K, sam, sal, ssam, ssal],
                    {"BLOCK_R": 64, "BLOCK_K": 256, "num_warps": 4, "num_stages": 1}))
        sam, sal = K, M * K
    grid = (N // BN, M // BM, L * SPLIT)
    ws, cnt = _scratch(dev, L * SPLIT * M * N, grid[0] * grid[1] * L) if SPLIT > 1 else (_C, _C)
    out.append((_nvfp4_kernel, grid,
                [a_arg, _B, _SA, _SB, _C, ws, cnt, M, N, K, sam, sal, sbn, sbl, ssam, ssal, ssbn, ssbl,
                 scm, scl, K // SPLIT],
                {"BLOCK_M": BM, "BLOCK_N": BN, "BLOCK_K": BK, "SPLIT_K": SPLIT, "INTERP": _INTERP,
                 "A_DEC": bool(a_dec), "num_warps": nw, "num_stages": ns}))
    return out


def _plan(launches, handles, dev):
    """A function of the five data pointers that replays ``launches`` through the compiled kernels'
    own launchers, or None where this Triton's kernels do not expose them."""
    if _driver is None or any(getattr(h, n, None) is None for h in handles for n in ("run", "function",
                                                                                    "packed_metadata")):
        return None
    steps = []
    for (_, grid, args, meta), h in zip(launches, handles):
        template = [a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args]
        slots = [(pos, a.ptr) for pos, a in enumerate(args) if isinstance(a, _In)]
        consts = [v for k, v in meta.items() if k not in ("num_warps", "num_stages")]
        steps.append((h, grid, template, slots, consts))
    keep = [a for _, _, args, _ in launches for a in args if isinstance(a, torch.Tensor)]   # scratch stays alive
    get_stream, index = _driver.active.get_current_stream, dev.index

    def run(ptrs):
        stream = get_stream(index)
        for h, (g0, g1, g2), template, slots, consts in steps:
            args = template.copy()
            for pos, i in slots:
                args[pos] = ptrs[i]
            h.run(g0, g1, g2, stream, h.function, h.packed_metadata, None, None, None, *args, *consts)
    run.keep = keep
    return run


def custom_kernel(data):
    a, b, sfa, sfb, _, _, c = data
    key = (a.shape, b.shape, a.stride(), b.stride(), sfa.stride(), sfb.stride(), c.stride(), a.device)
    plan = _PLANS.get(key) if _FAST[0] else None
    if plan is not None:
        try:
            plan((a.data_ptr(), b.data_ptr(), sfa.data_ptr(), sfb.data_ptr(), c.data_ptr()))
            return c
        except Exception:  # noqa: BLE001 - the launcher's API moved: launch through Triton from now on
            _FAST[0] = False
    M, KH, L = a.shape
    views = (a.view(torch.uint8), b.view(torch.uint8), sfa.view(torch.uint8), sfb.view(torch.uint8), c, sfa, sfb)
    launches = _launches(M, b.shape[0], KH * 2, L, [v.stride() for v in views[:5]], a.device)
    handles = [kernel[grid](*[views[x.i] if isinstance(x, _In) else x for x in args], **meta)
               for kernel, grid, args, meta in launches]
    if _FAST[0]:
        _PLANS[key] = _plan(launches, handles, a.device)
    return c
