"""mxfp4_mm in Triton for NVIDIA Hopper (H200): MXFP4 products on the FP8 tensor cores.

C[M, N] = dequant(quant_mxfp4(A)) @ dequant(B_q)^T, bf16 output.  The data path per 32-element K block
(one e8m0 scale per row of A and of B):

* Every e2m1 value (0, 0.5, ... 6, signed) is exact in FP8 e4m3, so the products run on Hopper's FP8
  wgmma with no per-element scale multiply.  B's packed codes become e4m3 bytes with three bit
  operations per 4 bytes (``((c & 7) << 2) | ((c & 8) << 4)`` is the e4m3 byte of e2m1(c) * 2**-6).
* A is quantized with aiter/quark "even" rounding (amax bit-rounding, e2m1 round-half-even on the code,
  saturation at 6) straight to e4m3 values and a per-row power of two; fused into the GEMM (each
  program quantizes its A rows) or, with PRE_A, once in a first kernel when many N tiles would repeat it.
* Each K block is one fp8 dot of K = 32, whose fp32 result is scaled by 2**(scale_B + scale_A + 6)
  (an exact power of two) and added to the fp32 accumulator.  B's scales are read straight from the
  SHUFFLED B_scale_sh with index math.
* Swap-AB: a program computes a C^T tile, N rows on the MMA's M side (M is 4..256 here).
* Split-K without a second launch: every split writes an fp32 partial to a persistent workspace, bumps
  a per-tile counter, and the last split to arrive sums the partials, writes bf16 C and resets the
  counter to 0 for the next call.  The workspace and counters are scratch memory reused for any input;
  nothing is cached by tensor identity or content.
Exact up to fp32 accumulation for |A| < 2**124 (the A factor 2**(scale_A + 6) must be a finite fp32).
"""
import os

import torch
import triton
import triton.language as tl

try:  # pragma: no cover - only on the competition server
    from task import input_t, output_t  # noqa: F401
except Exception:  # noqa: BLE001
    pass


@triton.jit
def _quant_e4m3(x):
    """fp32 x [R, BK] (BK % 32 == 0) -> MXFP4 per 1x32 block, 'even' rounding: (e2m1 values as
    float8e4nv [R, BK], 2**(scale + 6) as fp32 [R, BK // 32])."""
    R: tl.constexpr = x.shape[0]
    BK: tl.constexpr = x.shape[1]
    xb = tl.reshape(x, (R, BK // 32, 32))
    bits = tl.max(tl.abs(xb), axis=2).to(tl.int32, bitcast=True)
    bits = (bits + 0x200000) & -8388608  # 0xFF800000: amax's mantissa rounded away
    s = tl.minimum(tl.maximum(((bits >> 23) & 0xFF) - 129, -127), 127)
    inv = tl.reshape(((127 - s) << 23).to(tl.float32, bitcast=True), (R, BK // 32, 1))  # 2**-s
    q = xb * inv
    aq = tl.abs(q)
    # the e2m1 grid steps 0.5 on [0, 2), 1 on [2, 4), 2 on [4, 6]: round half to even on aq / step
    inv_step = tl.where(aq < 2.0, 2.0, tl.where(aq < 4.0, 1.0, 0.5))
    step = tl.where(aq < 2.0, 0.5, tl.where(aq < 4.0, 1.0, 2.0))
    r = tl.minimum(((aq * inv_step + 12582912.0) - 12582912.0) * step, 6.0)
    r = tl.where(q < 0, -r, r)
    factor = ((s + 133) << 23).to(tl.float32, bitcast=True)  # 2**(s + 6); s <= 121 for |A| < 2**124
    return tl.reshape(r, (R, BK)).to(tl.float8e4nv), factor


@triton.jit
def _e2m1_to_e4m3(b, INTERP: tl.constexpr):
    """uint8 [R, C] packed codes -> float8e4nv [R, 2C] = e2m1 * 2**-6 (element 2i = the low nibble)."""
    R: tl.constexpr = b.shape[0]
    C: tl.constexpr = b.shape[1]
    if INTERP:
        lo = ((b & 7) << 2) | ((b & 8) << 4)
        hi = ((b >> 2) & 0x1C) | (b & 0x80)
    else:  # 4 bytes per instruction
        lo, hi = tl.inline_asm_elementwise(
            "{ .reg .b32 t; and.b32 t, $2, 0x07070707; shl.b32 t, t, 2; and.b32 $0, $2, 0x08080808;"
            " shl.b32 $0, $0, 4; or.b32 $0, $0, t; shr.b32 t, $2, 2; and.b32 t, t, 0x1C1C1C1C;"
            " and.b32 $1, $2, 0x80808080; or.b32 $1, $1, t; }",
            "=r,=r,r", [b], dtype=(tl.uint8, tl.uint8), is_pure=True, pack=4)
    return tl.reshape(tl.join(lo, hi), (R, 2 * C)).to(tl.float8e4nv, bitcast=True)


@triton.jit
def _quant_a_kernel(a_ptr, q_ptr, f_ptr, M, K, stride_am, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr):
    """PRE_A: q[M, K] (e4m3 e2m1 values) and f[M, K/32] (fp32 2**(scale + 6)) = A quantized once."""
    offs_r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    offs_k = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
    mask = offs_r[:, None] < M
    a = tl.load(a_ptr + offs_r[:, None] * stride_am + offs_k[None, :], mask=mask, other=0.0).to(tl.float32)
    q, f = _quant_e4m3(a)
    tl.store(q_ptr + offs_r[:, None] * K + offs_k[None, :], q, mask=mask)
    offs_f = tl.program_id(1) * (BLOCK_K // 32) + tl.arange(0, BLOCK_K // 32)
    tl.store(f_ptr + offs_r[:, None] * (K // 32) + offs_f[None, :], f, mask=mask)


@triton.jit
def _load_block(kb, b_ptrs, bs_ptr, row_off, a_ptrs, af_ptr, offs_m, n_mask, m_mask, K, PRE_A: tl.constexpr):
    """One 32-element K block's operands: B's packed codes [BN, 16], B's e8m0 bytes [BN] (from the
    shuffled layout), A's rows [BM, 32] (bf16, or e4m3 values with PRE_A) and A's factors [BM] (PRE_A)."""
    b = tl.load(b_ptrs + kb * 16, mask=n_mask[:, None], other=0)
    be = tl.load(bs_ptr + row_off + (kb // 8) * 256 + (kb % 4) * 64 + ((kb // 4) % 2) * 2, mask=n_mask, other=0)
    a = tl.load(a_ptrs + kb * 32, mask=m_mask[:, None], other=0.0)
    if PRE_A:
        fa = tl.load(af_ptr + offs_m * (K // 32) + kb, mask=m_mask, other=0.0)
    else:
        fa = 0.0
    return b, be, a, fa


@triton.jit
def _mxfp4_mm_kernel(a_ptr, af_ptr, bq_ptr, bs_ptr, c_ptr, ws_ptr, cnt_ptr,
                     M, N, K, stride_am, stride_bn, stride_cm, bs_stride, K_SPLIT,
                     BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr,
                     SPLIT_K: tl.constexpr, PRE_A: tl.constexpr, INTERP: tl.constexpr):
    # PRE_A: a_ptr holds A's e4m3 values ([M, K], row stride stride_am) and af_ptr its factors [M, K/32]
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_k = tl.program_id(2)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    n_mask = offs_n < N
    m_mask = offs_m < M
    # shuffled scale of (row r = r0*32 + r1*16 + r2, column c = c0*8 + c1*4 + c2):
    # r0*(C'/8)*256 + c0*256 + c2*64 + r2*4 + c1*2 + r1, with C' = bs_stride
    row_off = (offs_n // 32) * (bs_stride * 32) + (offs_n % 16) * 4 + (offs_n // 16) % 2
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + tl.arange(0, 32)[None, :]
    b_ptrs = bq_ptr + offs_n[:, None] * stride_bn + tl.arange(0, 16)[None, :]
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    kb_lo = pid_k * (K_SPLIT // 32)
    kb_hi = kb_lo + K_SPLIT // 32
    # the loads run two blocks ahead of the math (Triton does not pipeline loads that feed bit operations)
    b1, be1, a1, fa1 = _load_block(kb_lo, b_ptrs, bs_ptr, row_off, a_ptrs, af_ptr, offs_m, n_mask, m_mask, K, PRE_A)
    b2, be2, a2, fa2 = _load_block(tl.minimum(kb_lo + 1, kb_hi - 1), b_ptrs, bs_ptr, row_off, a_ptrs, af_ptr,
                                   offs_m, n_mask, m_mask, K, PRE_A)
    for kb in range(kb_lo, kb_hi):
        b, be, a, fa = b1, be1, a1, fa1
        b1, be1, a1, fa1 = b2, be2, a2, fa2
        b2, be2, a2, fa2 = _load_block(tl.minimum(kb + 2, kb_hi - 1), b_ptrs, bs_ptr, row_off, a_ptrs, af_ptr,
                                       offs_m, n_mask, m_mask, K, PRE_A)
        if PRE_A:
            a8 = a
        else:
            a8, fa_blk = _quant_e4m3(a.to(tl.float32))
            fa = tl.reshape(fa_blk, (BLOCK_M,))
        b8 = _e2m1_to_e4m3(b, INTERP)
        # 2**(e - 127) for the e8m0 byte e (e = 0 is the denormal 2**-127)
        bei = be.to(tl.int32)
        fb = tl.where(bei > 0, (bei << 23).to(tl.float32, bitcast=True), 5.877471754111438e-39)
        if INTERP:  # the interpreter has no fp8 dot; fp32 is exact for these values
            p = tl.dot(b8.to(tl.float32), tl.trans(a8.to(tl.float32)), input_precision="ieee")
        else:
            p = tl.dot(b8, tl.trans(a8))
        acc += p * (fb[:, None] * fa[None, :])
    c_ptrs = c_ptr + offs_m[None, :] * stride_cm + offs_n[:, None]
    out_mask = n_mask[:, None] & m_mask[None, :]
    if SPLIT_K == 1:
        tl.store(c_ptrs, acc.to(tl.bfloat16), mask=out_mask)
    else:
        ws_ptrs = ws_ptr + offs_m[None, :] * N + offs_n[:, None]
        tl.store(ws_ptrs + pid_k * M * N, acc, mask=out_mask)
        tl.debug_barrier()
        tile = pid_n * tl.num_programs(1) + pid_m
        old = tl.atomic_add(cnt_ptr + tile, 1, sem="acq_rel", scope="gpu")
        if old == SPLIT_K - 1:
            tot = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
            for s in range(SPLIT_K):
                tot += tl.load(ws_ptrs + s * M * N, mask=out_mask, other=0.0, cache_modifier=".cg")
            tl.store(c_ptrs, tot.to(tl.bfloat16), mask=out_mask)
            tl.atomic_xchg(cnt_ptr + tile, 0)


# (BLOCK_N, BLOCK_M, SPLIT_K, PRE_A, num_warps) per (M, N, K); a rule for the rest.
CONFIGS = {
}


def _pick_config(M, N, K):
    cfg = CONFIGS.get((M, N, K))
    if cfg is not None:
        return cfg
    BM = 16 if M <= 16 else (32 if M <= 32 else 64)
    BN = 128 if M <= 32 else 64
    tiles = triton.cdiv(N, BN) * triton.cdiv(M, BM)
    split = 1   # K is a multiple of 64 (the task's rule): every split is a whole number of 32-blocks
    while tiles * split * 2 <= 264 and (K // 32) % (split * 2) == 0 and K // (split * 2) >= 128:
        split *= 2
    return (BN, BM, split, int(M > 32), 4)


_INTERP = os.environ.get("TRITON_INTERPRET", "0") == "1"
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


# Triton's launcher binds and checks every argument on each call (tens of microseconds on a slow
# host). After the first launch of a (kernel, shape, strides, config) the compiled kernel's own
# launcher is called directly (what Triton's JIT cache holds, minus the binding).
_HANDLES = {}
_FAST = [True]
try:
    from triton.runtime import driver as _driver
except Exception:  # noqa: BLE001
    _driver = None


def _launch(kernel, grid, args, key, meta):
    """``kernel[grid](*args, **meta)``; ``meta`` lists the constexprs in signature order, then
    num_warps / num_stages."""
    h = _HANDLES.get(key) if _FAST[0] and not _INTERP else None
    if h is not None:
        try:
            consts = [v for k, v in meta.items() if k not in ("num_warps", "num_stages")]
            h.run(*grid, _driver.active.get_current_stream(args[0].device.index), h.function, h.packed_metadata,
                  None, None, None, *args, *consts)
            return
        except Exception:  # noqa: BLE001 - the launcher's API moved: use the normal launch from now on
            _FAST[0] = False
    h = kernel[grid](*args, **meta)
    if _FAST[0] and not _INTERP and _driver is not None and getattr(h, "function", None) is not None \
            and getattr(h, "packed_metadata", None) is not None:
        _HANDLES[key] = h


def custom_kernel(data):
    A, _, B_q, _, B_scale_sh = data
    M, K = A.shape
    N = B_q.shape[0]
    cfg = _pick_config(M, N, K)
    BN, BM, SPLIT, pre_a, nw = cfg
    bq = B_q.view(torch.uint8)
    bs = B_scale_sh.view(torch.uint8)
    C = torch.empty((M, N), dtype=torch.bfloat16, device=A.device)
    g0, g1 = (N + BN - 1) // BN, (M + BM - 1) // BM
    ws, cnt = _scratch(A.device, SPLIT * M * N, g0 * g1) if SPLIT > 1 else (C, C)
    key = (M, N, K, A.stride(0), bq.stride(0), bs.stride(0), cfg, A.device)
    a, af, stride_am = A, A, A.stride(0)
    if pre_a:
        a = _buffer(A.device, "a_e4m3", M * K, torch.uint8).view(torch.float8_e4m3fn)
        af = _buffer(A.device, "a_factor", M * K // 32, torch.float32)
        _launch(_quant_a_kernel, ((M + 15) // 16, K // 128 if K % 128 == 0 else K // 64),
                (A, a, af, M, K, A.stride(0)), ("quant",) + key,
                {"BLOCK_R": 16, "BLOCK_K": 128 if K % 128 == 0 else 64, "num_warps": 4, "num_stages": 1})
        stride_am = K
    _launch(_mxfp4_mm_kernel, (g0, g1, SPLIT),
            (a, af, bq, bs, C, ws, cnt, M, N, K, stride_am, bq.stride(0), C.stride(0), bs.stride(0), K // SPLIT),
            ("mm",) + key, {"BLOCK_N": BN, "BLOCK_M": BM, "SPLIT_K": SPLIT, "PRE_A": bool(pre_a),
                            "INTERP": _INTERP, "num_warps": nw, "num_stages": 1})
    return C
