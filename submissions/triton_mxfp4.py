"""mxfp4_mm in Triton for NVIDIA Hopper (H200), one or two kernel launches per call.

C[M, N] = dequant(quant_mxfp4(A)) @ dequant(B_q)^T, bf16 output.

* A's MXFP4 quantization (aiter/quark "even" rounding: amax bit-rounding, e2m1 RNE ties-to-even on
  the code, saturation at 6) is fused into the GEMM: each program quantize-dequantizes its A tile in
  registers to bf16 (exact: an e2m1 value times a power of two is a bf16). PRE_A configs quantize A
  once in a first kernel instead, when many N tiles would otherwise repeat it.
* B's FP4 codes are read from B_q ([N, K/2] packed, row-major) and its e8m0 scales straight from the
  SHUFFLED B_scale_sh with index math (no host-side unshuffle).
* Swap-AB: the kernel computes C^T tiles = B_tile (N rows fill the MMA M dimension) x A_tile^T.
* H200 has no FP4 tensor cores.  Two decode paths (per-shape config picks one):
    DS=0: decode e2m1 -> bf16 with bit ops + scale in the exponent, then a bf16 tl.dot (wgmma);
    DS=1: tl.dot_scaled(B codes, B scales, "e2m1", A_deq^T, None, "bf16") (Triton's software path).
* Split-K without a second launch: every split writes an fp32 partial to a persistent workspace, bumps
  a per-tile counter, and the last split to arrive sums the partials, writes bf16 C and resets the
  counter to 0 for the next call.  The workspace/counters are scratch memory (reused for any input);
  nothing is cached by tensor identity or content.
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
def _qdq_mxfp4(x):
    """Quantize-dequantize fp32 x [R, BK] (BK % 32 == 0) per 1x32 block, aiter 'even' rounding."""
    R: tl.constexpr = x.shape[0]
    BK: tl.constexpr = x.shape[1]
    xb = tl.reshape(x, (R, BK // 32, 32))
    amax = tl.max(tl.abs(xb), axis=2)
    bits = amax.to(tl.int32, bitcast=True)
    bits = (bits + 0x200000) & -8388608  # 0xFF800000
    e = (bits >> 23) & 0xFF  # biased exponent of the rounded amax (= floor(log2) + 127)
    s = e - 127 - 2
    s = tl.minimum(tl.maximum(s, -127), 127)
    # 2**s and 2**-s as fp32 (s in [-127, 127]; 2**-127 is denormal: build via two factors)
    sc = ((s + 127 + 1).to(tl.int32) << 23).to(tl.float32, bitcast=True) * 0.5  # 2**s
    isc = ((127 - s).to(tl.int32) << 23).to(tl.float32, bitcast=True)  # 2**-s (s >= -127 -> ok up to 2**127)
    sc3 = tl.reshape(sc, (R, BK // 32, 1))
    isc3 = tl.reshape(isc, (R, BK // 32, 1))
    q = xb * isc3
    aq = tl.abs(q)
    # grid step 0.5 on [0,2), 1 on [2,4), 2 on [4,6]; round-half-even on the code == on aq/step
    inv_step = tl.where(aq < 2.0, 2.0, tl.where(aq < 4.0, 1.0, 0.5))
    step = tl.where(aq < 2.0, 0.5, tl.where(aq < 4.0, 1.0, 2.0))
    r = (aq * inv_step + 12582912.0) - 12582912.0  # RNE to integer (|.| < 2**22)
    r = tl.minimum(r * step, 6.0)
    sign = q.to(tl.int32, bitcast=True) & -2147483648
    r = (r.to(tl.int32, bitcast=True) | sign).to(tl.float32, bitcast=True)
    return tl.reshape(r * sc3, (R, BK))


@triton.jit
def _decode_e2m1_bf16(b, sc):
    """b: uint8 [R, BK/2] packed codes, sc: uint8 e8m0 [R, BK/32] -> bf16 [R, BK] dequantized."""
    R: tl.constexpr = b.shape[0]
    BKH: tl.constexpr = b.shape[1]
    bi = b.to(tl.int32)
    lo = bi & 0xF
    hi = bi >> 4
    c = tl.reshape(tl.join(lo, hi), (R, BKH * 2))  # element 2i = low nibble
    c3 = tl.reshape(c, (R, BKH // 16, 32))
    e = tl.reshape(sc.to(tl.int32), (R, BKH // 16, 1))
    mag = c3 & 7
    # fp32 bits: value = e2m1(mag) * 2**(e-127).  mag>=2: exponent field e-1+(mag>>1), mantissa mag&1;
    # mag==1: 2**(e-128); mag==0: 0.   (mag << 22) + ((e - 1) << 23) covers mag >= 2.  (exact in bf16)
    bits = tl.where(mag >= 2, (mag << 22) + ((e - 1) << 23), tl.where(mag == 1, (e - 1) << 23, 0))
    bits = bits | ((c3 & 8) << 28)
    v = bits.to(tl.float32, bitcast=True).to(tl.bfloat16)
    return tl.reshape(v, (R, BKH * 2))


@triton.jit
def _qdq_a_kernel(a_ptr, out_ptr, M, K, stride_am, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr):
    """PRE_A: out[M, K] (bf16, contiguous) = A quantized to MXFP4 and dequantized (exact in bf16)."""
    offs_r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    offs_k = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)
    mask = offs_r[:, None] < M
    a = tl.load(a_ptr + offs_r[:, None] * stride_am + offs_k[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs_r[:, None] * K + offs_k[None, :], _qdq_mxfp4(a).to(tl.bfloat16), mask=mask)


@triton.jit
def _mxfp4_mm_kernel(a_ptr, bq_ptr, bs_ptr, c_ptr, ws_ptr, cnt_ptr,
                     M, N, K, stride_am, stride_bn, stride_cm, bs_stride,
                     K_SPLIT,
                     BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
                     SPLIT_K: tl.constexpr, DS: tl.constexpr, INTERP: tl.constexpr = False,
                     PRE_A: tl.constexpr = False):
    # PRE_A: a_ptr holds A already quantize-dequantized (bf16, by _qdq_a_kernel), so the N/BLOCK_N
    # programs sharing an A tile do not each quantize it again.
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_k = tl.program_id(2)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    n_mask = offs_n < N
    m_mask = offs_m < M
    offs_kh = tl.arange(0, BLOCK_K // 2)
    offs_ka = tl.arange(0, BLOCK_K)
    offs_ks = tl.arange(0, BLOCK_K // 32)
    # shuffled-scale row part: r = r0*32 + r1*16 + r2 -> r0*(C'/8)*256 ... (see _scale_offsets)
    r0 = offs_n // 32
    r1 = (offs_n // 16) % 2
    r2 = offs_n % 16
    row_off = r0 * (bs_stride * 32) + r2 * 4 + r1
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_ka[None, :]
    b_ptrs = bq_ptr + offs_n[:, None] * stride_bn + offs_kh[None, :]
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    k_lo = pid_k * K_SPLIT
    for k in range(k_lo, k_lo + K_SPLIT, BLOCK_K):
        a = tl.load(a_ptrs + k, mask=m_mask[:, None], other=0.0).to(tl.float32)
        b = tl.load(b_ptrs + k // 2, mask=n_mask[:, None], other=0)
        kb = k // 32 + offs_ks  # scale column c = c0*8 + c1*4 + c2
        col_off = (kb // 8) * 256 + (kb % 4) * 64 + ((kb // 4) % 2) * 2
        bs = tl.load(bs_ptr + row_off[:, None] + col_off[None, :], mask=n_mask[:, None], other=127)
        if PRE_A:
            a_dq = a.to(tl.bfloat16)
        else:
            a_dq = _qdq_mxfp4(a).to(tl.bfloat16)
        if DS:
            acc = tl.dot_scaled(b, bs, "e2m1", tl.trans(a_dq), None, "bf16", acc)
        else:
            b_dq = _decode_e2m1_bf16(b, bs)
            if INTERP:  # the CPU interpreter's bf16 dot is wrong; fp32 ieee is exact here too
                acc = tl.dot(b_dq.to(tl.float32), tl.trans(a_dq).to(tl.float32), acc, input_precision="ieee")
            else:
                acc = tl.dot(b_dq, tl.trans(a_dq), acc)
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


# (BLOCK_N, BLOCK_M, BLOCK_K, SPLIT_K, DS, num_warps, num_stages[, PRE_A]) per (M, N, K); a fallback picks by rule.
# Tuned on the H200 (per-call protocol): the benchmark shapes by scripts/validation/tune_examples.py
# (results/h200_tuning_mxfp4.json), the test shapes by an earlier sweep.
CONFIGS = {
    (4, 2880, 512): (128, 16, 128, 2, 1, 4, 3, 1),
    (8, 2112, 7168): (64, 16, 64, 8, 0, 4, 3),
    (16, 2112, 7168): (64, 16, 64, 8, 0, 4, 3, 1),
    (16, 3072, 1536): (64, 16, 128, 2, 1, 4, 3),
    (32, 4096, 512): (128, 32, 128, 4, 1, 4, 3),
    (32, 2880, 512): (128, 32, 128, 4, 1, 4, 3),
    (64, 3072, 1536): (128, 64, 64, 4, 0, 8, 3),
    (64, 7168, 2048): (128, 64, 64, 4, 0, 8, 3, 1),
    (256, 2880, 512): (128, 128, 64, 1, 1, 8, 3),
    (256, 3072, 1536): (128, 128, 128, 2, 0, 8, 3, 1),
}


def _pick_config(M, N, K):
    cfg = CONFIGS.get((M, N, K))
    if cfg is not None:
        return cfg
    BM = 16 if M <= 16 else (32 if M <= 32 else 64)
    BN = 128 if M <= 32 else 64
    BK = 128 if M <= 32 and K % 128 == 0 else 64   # K is a multiple of 64 (the task's rule)
    nw = 4 if M <= 32 else 8
    tiles = triton.cdiv(N, BN) * triton.cdiv(M, BM)
    split = 1
    while tiles * split * 2 <= 160 and K // (split * 2) >= BK * 2 and (K // (split * 2)) % BK == 0:
        split *= 2
    return (BN, BM, BK, split, 0, nw, 3)


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
    BN, BM, BK, SPLIT, DS, nw, ns = cfg[:7]
    pre_a = bool(cfg[7]) if len(cfg) > 7 else False
    bq = B_q.view(torch.uint8)
    bs = B_scale_sh.view(torch.uint8)
    C = torch.empty((M, N), dtype=torch.bfloat16, device=A.device)
    g0, g1 = (N + BN - 1) // BN, (M + BM - 1) // BM
    ws, cnt = _scratch(A.device, SPLIT * M * N, g0 * g1) if SPLIT > 1 else (C, C)
    key = (M, N, K, A.stride(0), bq.stride(0), bs.stride(0), cfg, A.device)
    a, stride_am = A, A.stride(0)
    if pre_a:
        a = _buffer(A.device, "a_qdq", M * K, torch.bfloat16)
        _launch(_qdq_a_kernel, ((M + 15) // 16, K // 64), (A, a, M, K, A.stride(0)), ("qdq",) + key,
                {"BLOCK_R": 16, "BLOCK_K": 64, "num_warps": 4, "num_stages": 1})
        stride_am = K
    _launch(_mxfp4_mm_kernel, (g0, g1, SPLIT),
            (a, bq, bs, C, ws, cnt, M, N, K, stride_am, bq.stride(0), C.stride(0), bs.stride(0), K // SPLIT),
            ("mm",) + key, {"BLOCK_N": BN, "BLOCK_M": BM, "BLOCK_K": BK, "SPLIT_K": SPLIT, "DS": DS,
                            "INTERP": _INTERP, "PRE_A": pre_a, "num_warps": nw, "num_stages": ns})
    return C
