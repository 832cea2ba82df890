"""mxfp4_mm in Triton for NVIDIA Hopper (H200): the fast example, one or two launches a call.

What it computes: C[M, N] = dequant(quant_mxfp4(A)) @ dequant(B_q)^T in bf16; A is quantized to MXFP4
(e2m1, an e8m0 scale per 32 elements, aiter's "even" rounding) and multiplied by the pre-quantized B.
For the plain version read torch_mxfp4.py first.

Speed: 10.65 us ranked (geometric mean; 7.83 / 14.31 / 8.73 / 8.50 / 13.14 / 13.39 us at m = 4, 16, 32,
32, 64, 256; 95% interval 10.60-10.70 from 10 blocks; the published baseline is 11.50), from
results/h200_examples_ranked.json (H200, Triton 3.6, 2026-12-04).

What it shows: an e2m1 value times a power of two is exact in bf16 (and, within 12 binades, in e4m3), so
both operands reach Hopper's tensor cores (wgmma) with their scales folded in, and the result is exact
up to fp32 accumulation. The data path (per shape in CONFIGS, below):
* B is decoded in the GEMM's loop by inline PTX, four code bytes a time: ((c & 7) << 6) | ((c & 8) << 12)
  is the bf16 of e2m1(c) * 2**-126, and two bf16x2 products apply 2**126 and the block's scale, read
  straight from the SHUFFLED B_scale_sh with index math. Even and odd K stay in two tensors and a chunk
  is two dots (even with even, odd with odd), which spares an interleave through shared memory.
* A is quantized (amax bit-rounding, round-half-even on the e2m1 code, saturation at 6) and dequantized
  in registers: in the GEMM (m = 4 and 32), or once by a first kernel that writes A's even and odd
  columns as two planes (PRE_A: m = 16, whose 7168 K many N tiles would otherwise quantize again).
* FP8 (m = 64 and 256): both operands as e4m3 relative to a power-of-two base per row (its largest scale
  / 2**6), which the epilogue applies. B: prmt lookups in two 4-byte tables of e4m3 bytes of e2m1 * 2**d
  for the block's power of two d (_DECODE_FP8_ASM, 9 instructions per 8 elements); A by _prep_fp8_kernel,
  which also finds every row's base. A tile with a row whose blocks span more than 12 binades takes the
  exact bf16 loop in the same kernel, so the output is right for any input. Each dot gets a fresh
  accumulator (Hopper's fp8 accumulator keeps fewer bits).
* Swap-AB: a program computes a C^T tile (N on the MMA's M side) with the decoded B as the register
  operand; M is 4..256 here. Small programs at M = 16 and 32 (64 rows of B, 4 warps, two or more to an
  SM): m=16 14.34 against 16.59 us (results/h200_tuning_mxfp4_four_warps_*.json).
* STAGES = 1 loads the next chunk into registers before this one's math; STAGES >= 2 lets Triton's
  pipeliner stage B's codes and A by cp.async, and with BLOCK_K 256 (and 4 chunks a split) B's scales
  too, as 256-byte segments of the shuffled layout (_load_scale_segments).
* Split-K without a second launch: each split writes an fp32 partial, bumps a per-tile counter, and the
  last to arrive sums them and resets the counter. Scratch memory is reused for any input; nothing is
  cached by tensor identity or content.

Driver-level trick, kept for its measured gain: the GEMM after a first kernel is a programmatic
dependent launch (PDL): it launches while the first kernel runs and waits for it in the kernel, which
hides the second launch's latency: m=64 14.75 against 16.72 us (results/h200_pdl_mxfp4_m64_on.json and
_off.json). The first kernel lets it launch only after its stores (with the trigger at its start the
GEMM's programs crowded the SMs: 17.98 against 16.93 us, results/probes/h200_pdl_mxfp4_m64_*_a630ab6.json).
The launches go through Triton's own launcher: mxfp4_mm's per-call protocol hides the host's launch
time behind the launch gate.

Tried and slower on the H200 (results/README.md at commit 2d68822 names each file and its commit):
PREPARE (a first kernel writes both operands as bf16, then one cuBLAS GEMM; m=256's path until the FP8
decode got cheaper, and still selectable in CONFIGS), an FP8 version rescaling each block's partial
product, cuBLAS's FP8 GEMM, a three-chunk register prefetch, B written as e4m3 by the first kernel, FP8
in one launch with a grid barrier, split-K on the FP8 path, and C tiles (SWAP_AB = 0) at m=16 and m=64.

Why more than 700 lines (about 620 before ruff format laid the long calls out one argument a line): the
kernels take about 600 (the A quantization, two B decodes, the PRE_A / PREPARE and FP8 first kernels, and
three loops), the host side 170.
"""

import os

import torch
import triton
import triton.language as tl
from triton.language.extra import cuda as _cuda

try:  # pragma: no cover - only on the competition server
    from task import input_t, output_t  # noqa: F401
except Exception:
    pass


@triton.jit
def _quant_mxfp4(x):
    """Quantize fp32 x [R, BK] (BK % 32 == 0) per 1x32 block, aiter 'even' rounding: the e2m1 values
    [R, BK/32, 32], the block exponents s [R, BK/32] (value = e2m1 * 2**s) and whether a block is nonzero."""
    R: tl.constexpr = x.shape[0]
    BK: tl.constexpr = x.shape[1]
    xb = tl.reshape(x, (R, BK // 32, 32))
    amax = tl.max(tl.abs(xb), axis=2).to(tl.int32, bitcast=True)
    bits = (amax + 0x200000) & -8388608  # 0xFF800000: amax's mantissa rounded away
    s = tl.minimum(tl.maximum(((bits >> 23) & 0xFF) - 129, -127), 127)
    q = xb * tl.reshape(((127 - s) << 23).to(tl.float32, bitcast=True), (R, BK // 32, 1))  # x * 2**-s
    aq = tl.abs(q)
    # the e2m1 grid steps 0.5 on [0, 2), 1 on [2, 4), 2 on [4, 6]: round half to even on aq / step
    inv_step = tl.where(aq < 2.0, 2.0, tl.where(aq < 4.0, 1.0, 0.5))
    step = tl.where(aq < 2.0, 0.5, tl.where(aq < 4.0, 1.0, 2.0))
    r = tl.minimum(((aq * inv_step + 12582912.0) - 12582912.0) * step, 6.0)
    return tl.where(q < 0, -r, r), s, amax != 0


@triton.jit
def _pow2_scale(s):
    """2**s as fp32 for block exponents s in [-127, 127] (2**-127 a denormal)."""
    return ((s + 128) << 23).to(tl.float32, bitcast=True) * 0.5


@triton.jit
def _qdq_mxfp4(x):
    """Quantize-dequantize fp32 x [R, BK] per 1x32 block; the result is exact in bf16 (an e2m1 value
    times a power of two)."""
    R: tl.constexpr = x.shape[0]
    BK: tl.constexpr = x.shape[1]
    r, s, _ = _quant_mxfp4(x)
    return tl.reshape(r * tl.reshape(_pow2_scale(s), (R, BK // 32, 1)), (R, BK))


@triton.jit
def _pow2(x):
    """2**x as fp32 for integers x in [-126, 127]."""
    return ((x + 127) << 23).to(tl.float32, bitcast=True)


@triton.jit
def _even_odd(x):
    """[R, 2C] -> ([R, C] of the even columns, [R, C] of the odd ones)."""
    R: tl.constexpr = x.shape[0]
    C: tl.constexpr = x.shape[1] // 2
    return tl.split(tl.reshape(x, (R, C, 2)))


@triton.jit
def _decode_b(b, e, INTERP: tl.constexpr):
    """b: uint8 [R, BK/2] packed codes, e: uint8 e8m0 [R, BK/32] -> bf16 ([R, BK/2], [R, BK/2]) = the
    dequantized low-nibble (even) and high-nibble (odd) elements."""
    R: tl.constexpr = b.shape[0]
    C: tl.constexpr = b.shape[1]
    ei = e.to(tl.int16)
    s = tl.where(ei > 0, ei << 7, 0x40).to(tl.bfloat16, bitcast=True)  # 2**(e - 127), e = 0: 2**-127
    s = tl.reshape(tl.broadcast_to(tl.reshape(s, (R, C // 16, 1)), (R, C // 16, 16)), (R, C))
    if INTERP:  # the same values in fp32 (e2m1 * 2**-126 by bit operations, exact)
        bi = b.to(tl.int32)
        two126 = 8.507059173023462e37
        lo = (((bi & 7) << 22) | ((bi & 8) << 28)).to(tl.float32, bitcast=True) * two126 * s.to(tl.float32)
        hi = (((bi & 0x70) << 18) | ((bi & 0x80) << 24)).to(tl.float32, bitcast=True) * two126 * s.to(tl.float32)
        lo, hi = lo.to(tl.bfloat16), hi.to(tl.bfloat16)
    else:  # 4 bytes (8 elements) per instance: bit operations, then two exact bf16x2 products
        lo, hi = tl.inline_asm_elementwise(
            "{ .reg .b32 t0, t1, u, m, c;\n"
            "mov.b32 c, 0x7E807E80;\n"
            "prmt.b32 t0, $4, 0, 0x4140; prmt.b32 t1, $4, 0, 0x4342;\n"
            "and.b32 u, t0, 0x00070007; shl.b32 u, u, 6; and.b32 m, t0, 0x00080008; shl.b32 m, m, 12; or.b32 $0, u, m;\n"
            "and.b32 u, t1, 0x00070007; shl.b32 u, u, 6; and.b32 m, t1, 0x00080008; shl.b32 m, m, 12; or.b32 $1, u, m;\n"
            "and.b32 u, t0, 0x00700070; shl.b32 u, u, 2; and.b32 m, t0, 0x00800080; shl.b32 m, m, 8; or.b32 $2, u, m;\n"
            "and.b32 u, t1, 0x00700070; shl.b32 u, u, 2; and.b32 m, t1, 0x00800080; shl.b32 m, m, 8; or.b32 $3, u, m;\n"
            "mul.rn.bf16x2 $0, $0, c; mul.rn.bf16x2 $1, $1, c; mul.rn.bf16x2 $2, $2, c; mul.rn.bf16x2 $3, $3, c;\n"
            "mul.rn.bf16x2 $0, $0, $5; mul.rn.bf16x2 $1, $1, $6; mul.rn.bf16x2 $2, $2, $5; mul.rn.bf16x2 $3, $3, $6; }",
            "=r,=r,=r,=r,r,r,r",
            [b, s],
            dtype=(tl.bfloat16, tl.bfloat16),
            is_pure=True,
            pack=4,
        )
    return lo, hi


# B's fp8 decode, 4 code bytes (8 elements) per instance, all of one 32-element block (a thread's 16-byte
# vector of B is one block, and Triton packs 4 consecutive bytes of it). The block's scale is in its two
# lookup tables ($3, $7; the other table operands are the same values): prmt looks up the 8 magnitudes
# (in K order) in the 8 bytes {H, L} = e4m3 of e2m1 * 2**d for the block's power of two d, two more prmt
# split even from odd, and the sign bits are or-ed back in.
_DECODE_FP8_ASM = tl.constexpr(
    "{ .reg .b32 m, x, y, w;\n"
    "and.b32 m, $2, 0x77777777;\n"
    "prmt.b32 x, $3, $7, m; shr.b32 m, m, 16; prmt.b32 y, $3, $7, m;\n"
    "prmt.b32 $0, x, y, 0x6420; prmt.b32 $1, x, y, 0x7531;\n"
    "shl.b32 w, $2, 4; and.b32 w, w, 0x80808080; or.b32 $0, $0, w;\n"
    "and.b32 w, $2, 0x80808080; or.b32 $1, $1, w; }"
)


@triton.jit
def _fp8_tables(e, bb):
    """The decode's lookup tables for blocks with scale bytes e [R, C] (int32) of rows with bases bb [R],
    whose powers of two d = e - 127 - bb are in -5..6: L (magnitude codes 0..3) and H (codes 4..7), the
    e4m3 bytes of e2m1 * 2**d. Those of e2m1 * 2**-5 (0, 0x08, 0x10, 0x14 | 0x18, 0x1C, 0x20, 0x24) are
    normal numbers, so adding 8 * (d + 5) to their exponent fields (no carry: the largest byte is 0x7C,
    6 * 2**6) scales them; 0 stays 0. One multiply-add each: the rows' terms are loop invariants
    (the products wrap modulo 2**32, which leaves the sum right)."""
    r = (122 + bb)[:, None]
    return e * 0x08080800 + (0x14100800 - r * 0x08080800), e * 0x08080808 + (0x24201C18 - r * 0x08080808)


@triton.jit
def _decode_b_fp8(b, e, bb, INTERP: tl.constexpr):
    """b: uint8 [R, BK/2] packed codes, e: int32 [R, BK/32] the blocks' scale bytes, bb: int32 [R] the
    rows' bases, d = e - 127 - bb in -5..6 -> float8e4nv ([R, BK/2], [R, BK/2]) = e2m1 * 2**d of the
    low-nibble (even) and high-nibble (odd) elements, exact."""
    R: tl.constexpr = b.shape[0]
    C: tl.constexpr = b.shape[1]
    if INTERP:  # the same values through fp32
        d = tl.reshape(tl.broadcast_to(tl.reshape(e - 127 - bb[:, None], (R, C // 16, 1)), (R, C // 16, 16)), (R, C))
        bi = b.to(tl.int32)
        f = _pow2(d)
        two126 = 8.507059173023462e37
        lo = (((bi & 7) << 22) | ((bi & 8) << 28)).to(tl.float32, bitcast=True) * two126 * f
        hi = (((bi & 0x70) << 18) | ((bi & 0x80) << 24)).to(tl.float32, bitcast=True) * two126 * f
        lo, hi = lo.to(tl.float8e4nv), hi.to(tl.float8e4nv)
    else:
        lut_lo, lut_hi = _fp8_tables(e, bb)
        lut_lo = tl.reshape(tl.broadcast_to(tl.reshape(lut_lo, (R, C // 16, 1)), (R, C // 16, 16)), (R, C))
        lut_hi = tl.reshape(tl.broadcast_to(tl.reshape(lut_hi, (R, C // 16, 1)), (R, C // 16, 16)), (R, C))
        lo, hi = tl.inline_asm_elementwise(
            _DECODE_FP8_ASM,
            "=r,=r,r,r,r,r,r,r,r,r,r",
            [b, lut_lo, lut_hi],
            dtype=(tl.uint8, tl.uint8),
            is_pure=True,
            pack=4,
        )
        lo, hi = lo.to(tl.float8e4nv, bitcast=True), hi.to(tl.float8e4nv, bitcast=True)
    return lo, hi


@triton.jit
def _base(hi, lo):
    """Per row, from the largest and smallest block exponent (hi = -1000: no block): the base hi - 6 and
    whether the fp8 path is exact for the row: its blocks span at most 12 binades (s - base in -5..6)
    and |base| <= 60 (so that 2**(base_A + base_B) is a normal fp32). A row without blocks: base 0."""
    base = tl.where(hi == -1000, 0, hi - 6)
    ok = (hi == -1000) | ((hi - lo <= 11) & (base >= -60) & (base <= 60))
    return tl.where(ok, base, 1 << 20)  # 1 << 20: this row takes the bf16 path


@triton.jit
def _scale_row(r, bs_stride):
    """Offset of scale row r = r0*32 + r1*16 + r2 in the shuffled layout of row stride C' = bs_stride:
    r0*(C'/8)*256 + r2*4 + r1."""
    return (r // 32) * (bs_stride * 32) + (r % 16) * 4 + (r // 16) % 2


@triton.jit
def _scale_column(c):
    """Offset of scale column c = c0*8 + c1*4 + c2 in the shuffled layout: c0*256 + c2*64 + c1*2."""
    return (c // 8) * 256 + (c % 4) * 64 + ((c // 4) % 2) * 2


@triton.jit
def _prepare_kernel(
    a_ptr,
    bq_ptr,
    bs_ptr,
    ap_ptr,
    bp_ptr,
    M,
    N,
    K,
    stride_am,
    stride_bn,
    bs_stride,
    BLOCK_R: tl.constexpr,
    BLOCK_K: tl.constexpr,
    INTERP: tl.constexpr,
    PDL: tl.constexpr = False,
    BLOCK_RA: tl.constexpr = 16,
):
    """PREPARE: both operands of one plain bf16 GEMM, exact: bp [N, K] = B dequantized and ap [M, K] =
    A quantize-dequantized, each with K reordered to (even columns | odd columns), which leaves A @ B^T
    unchanged. Programs 0 .. cdiv(M, BLOCK_RA) - 1 take BLOCK_RA-row blocks of A, the rest BLOCK_R-row
    blocks of B: A's quantization, the heavier work, starts first instead of trailing the grid (PRE_A
    runs it with N = 0: A alone, whose two halves the GEMM below reads as its even and odd planes).
    With 32-row blocks of B and BLOCK_K = 256 its scales are loaded as whole 256-byte segments of the
    shuffled layout (_load_scale_segments). PDL: the GEMM that follows may launch once every program has
    stored (programmatic dependent launch)."""
    pid = tl.program_id(0)
    na = tl.cdiv(M, BLOCK_RA)
    k0 = tl.program_id(1) * BLOCK_K
    offs_h = k0 // 2 + tl.arange(0, BLOCK_K // 2)
    if pid < na:
        rows_a = pid * BLOCK_RA + tl.arange(0, BLOCK_RA)
        mask_a = rows_a < M
        a = tl.load(
            a_ptr + rows_a[:, None] * stride_am + k0 + tl.arange(0, BLOCK_K)[None, :], mask=mask_a[:, None], other=0.0
        )
        a_even, a_odd = _even_odd(_qdq_mxfp4(a.to(tl.float32)).to(tl.bfloat16))  # names apart from B's: the
        a_out = ap_ptr + rows_a[:, None] * K + offs_h[None, :]  # branches' shapes differ
        tl.store(a_out, a_even, mask=mask_a[:, None])
        tl.store(a_out + K // 2, a_odd, mask=mask_a[:, None])
    else:
        rows = (pid - na) * BLOCK_R + tl.arange(0, BLOCK_R)
        mask = rows < N
        b = tl.load(bq_ptr + rows[:, None] * stride_bn + offs_h[None, :], mask=mask[:, None], other=0)
        if BLOCK_K == 256 and BLOCK_R % 32 == 0:
            seg_ptrs = _segment_ptrs(bs_ptr, (pid - na) * (BLOCK_R // 32), BLOCK_R // 32, N, bs_stride)
            e = _load_scale_segments(k0, seg_ptrs)
        else:
            s_ptrs = bs_ptr + _scale_row(rows, bs_stride) + _scale_column(k0 // 32)
            e = tl.load(
                s_ptrs[:, None] + _scale_column(tl.arange(0, BLOCK_K // 32))[None, :], mask=mask[:, None], other=127
            )
        even, odd = _decode_b(b, e, INTERP)
        out = bp_ptr + rows[:, None] * K + offs_h[None, :]
        tl.store(out, even, mask=mask[:, None])
        tl.store(out + K // 2, odd, mask=mask[:, None])
    if PDL:
        _cuda.gdc_launch_dependents()


@triton.jit
def _prep_fp8_kernel(
    a_ptr,
    bs_ptr,
    a8_ptr,
    ab_ptr,
    base_ptr,
    M,
    N,
    K,
    stride_am,
    bs_stride,
    ROWS: tl.constexpr,
    KP: tl.constexpr,
    CP: tl.constexpr,
    PDL: tl.constexpr = False,
):
    """FP8, the first kernel. Programs 0 .. cdiv(M, ROWS) - 1: whole rows of A, quantized and written as
    e4m3 values e2m1 * 2**(s - base) (a8 [2, M, K/2]: the even columns, then the odd ones) with the row's
    base (_base) in base[m], and as exact bf16 (ab [M, K], per row its even columns, then its odd
    ones: for tiles on the bf16 path).
    The rest: 32-row groups of B, whose base[M + n] comes from B's scale bytes (read from the shuffled
    layout). KP: K rounded up to a power of two, CP: K/32 rounded up to one, at least 8 (>= the row stride
    of the shuffled scales, K/32 rounded up to a multiple of 8). PDL: as in _prepare_kernel."""
    pid = tl.program_id(0)
    na = tl.cdiv(M, ROWS)
    if pid < na:
        rows = pid * ROWS + tl.arange(0, ROWS)
        cols = tl.arange(0, KP)
        a = tl.load(
            a_ptr + rows[:, None] * stride_am + cols[None, :], mask=(rows < M)[:, None] & (cols < K)[None, :], other=0.0
        )
        r, s, nz = _quant_mxfp4(a.to(tl.float32))
        base = _base(tl.max(tl.where(nz, s, -1000), axis=1), tl.min(tl.where(nz, s, 1000), axis=1))
        d = tl.minimum(tl.maximum(s - base[:, None], -126), 127)  # in -5..6 where base is not the flag
        even, odd = _even_odd(tl.reshape(r * tl.reshape(_pow2(d), (ROWS, KP // 32, 1)), (ROWS, KP)))
        offs = rows[:, None] * (K // 2) + tl.arange(0, KP // 2)[None, :]
        mask = (rows < M)[:, None] & (tl.arange(0, KP // 2) < K // 2)[None, :]
        tl.store(a8_ptr + offs, even.to(tl.float8e4nv), mask=mask)
        tl.store(a8_ptr + offs + M * (K // 2), odd.to(tl.float8e4nv), mask=mask)
        offs = rows[:, None] * K + tl.arange(0, KP // 2)[None, :]
        even, odd = _even_odd(
            tl.reshape(r * tl.reshape(_pow2_scale(s), (ROWS, KP // 32, 1)), (ROWS, KP)).to(tl.bfloat16)
        )
        tl.store(ab_ptr + offs, even, mask=mask)
        tl.store(ab_ptr + offs + K // 2, odd, mask=mask)
        tl.store(base_ptr + rows, base, mask=rows < M)
    else:
        # a 32-row group of B: its scales are 32 * C' contiguous bytes (C' = bs_stride), 256-byte segments
        # of 8 columns each, at c0*256 + c2*64 + r2*4 + c1*2 + r1 (r = r1*16 + r2, c = c0*8 + c1*4 + c2):
        # loaded flat (16-byte vectors; the mask is per segment), then permuted to [32 rows, CP columns]
        # ([c0, c2, r2, c1, r1] -> [r1, r2, c0, c1, c2]), and the padding columns (c >= K/32) dropped
        g = pid - na
        o = tl.arange(0, 32 * CP)
        e = tl.load(bs_ptr + g * 32 * bs_stride + o, mask=o // 256 < bs_stride // 8, other=0)
        e = tl.reshape(tl.permute(tl.reshape(e, (CP // 8, 4, 16, 2, 2)), (4, 2, 0, 3, 1)), (32, CP)).to(tl.int32)
        valid = (tl.arange(0, CP) < K // 32)[None, :]
        n = g * 32 + tl.arange(0, 32)
        tl.store(
            base_ptr + M + n,
            _base(tl.max(tl.where(valid, e, 0), axis=1) - 127, tl.min(tl.where(valid, e, 255), axis=1) - 127),
            mask=n < N,
        )
    if PDL:
        _cuda.gdc_launch_dependents()


@triton.jit
def _load_scales(k, s_ptrs, n_mask):
    """B's e8m0 bytes [BN, BK/32] of the BLOCK_K chunk at k, from the shuffled layout."""
    # offset(k/32 + j) = offset(k/32) + offset(j) for j < BLOCK_K/32: k/32 is a multiple of BLOCK_K/32
    return tl.load(s_ptrs + _scale_column(k // 32), mask=n_mask[:, None], other=127)


@triton.jit
def _segment_ptrs(bs_ptr, first, G: tl.constexpr, N, bs_stride):
    """[G, 256] pointers to the first 256-byte segments (c0 = 0) of the 32-row groups first .. first +
    G - 1 of B's shuffled scales (row stride C' = bs_stride, so a group is 32 * C' bytes); past N the
    last group again, so that their segments need no mask (the scales have R' >= N rounded up to 32
    rows; the rows of a repeated group, and rows >= N, are stored nowhere)."""
    groups = tl.minimum(first + tl.arange(0, G), (N - 1) // 32)
    return bs_ptr + groups[:, None] * (bs_stride * 32) + tl.arange(0, 256)[None, :]


@triton.jit
def _load_scale_segments(k, seg_ptrs):
    """B's e8m0 bytes [BN, 8] of the BLOCK_K = 256 chunk at k: in the shuffled layout the scales of 32
    rows x 8 blocks (r = r1*16 + r2, c = c0*8 + c1*4 + c2) are one contiguous 256-byte segment, at
    c2*64 + r2*4 + c1*2 + r1. seg_ptrs [BN/32, 256] point at the segments of c0 = 0; the loads are
    16-byte vectors that Triton's pipeliner stages with cp.async like B's codes."""
    G: tl.constexpr = seg_ptrs.shape[0]
    x = tl.load(seg_ptrs + (k // 256) * 256)
    x = tl.permute(tl.reshape(x, (G, 4, 16, 2, 2)), (0, 4, 2, 3, 1))  # [g, r1, r2, c1, c2]
    return tl.reshape(x, (G * 32, 8))


@triton.jit
def _load_b(k, b_ptrs, n_mask):
    """B's packed codes [BN, BK/2] of the BLOCK_K chunk at k (a multiple of BLOCK_K >= 64)."""
    return tl.load(b_ptrs + tl.multiple_of(k // 2, 32), mask=n_mask[:, None], other=0)


@triton.jit
def _load_a(k, a_ptrs, a2_ptrs, m_mask, PRE_A: tl.constexpr):
    """A's chunk at k: its bf16 rows [BM, BK] (twice), or with PRE_A its even and odd planes [BM, BK/2]."""
    if PRE_A:
        a = tl.load(a_ptrs + tl.multiple_of(k // 2, 32), mask=m_mask[:, None], other=0.0)
        a2 = tl.load(a2_ptrs + tl.multiple_of(k // 2, 32), mask=m_mask[:, None], other=0.0)
    else:
        a = tl.load(a_ptrs + k, mask=m_mask[:, None], other=0.0)
        a2 = a
    return a, a2


@triton.jit
def _dot(x, y, acc, INTERP: tl.constexpr):
    """acc += x @ y^T (bf16 or e4m3 operands, exact products, fp32 accumulation)."""
    if INTERP:  # the CPU interpreter's bf16 dot is wrong and it has no fp8 dot; fp32 ieee is exact here too
        acc = tl.dot(x.to(tl.float32), tl.trans(y).to(tl.float32), acc, input_precision="ieee")
    elif x.dtype == tl.float8e4nv:
        # Hopper's fp8 wgmma accumulates with fewer bits than fp32: each dot (K = BLOCK_K / 2) gets a
        # fresh accumulator, added to acc in fp32. (Triton's max_num_imprecise_acc would add after every
        # K = 32 instruction, reading the registers of a wgmma in flight, and ptxas then serializes
        # every wgmma of the kernel.)
        acc += tl.dot(x, tl.trans(y))
    else:
        acc = tl.dot(x, tl.trans(y), acc)
    return acc


@triton.jit
def _chunk_dots(
    acc, b, e, a, a2, bb, PRE_A: tl.constexpr, FP8: tl.constexpr, SWAP_AB: tl.constexpr, INTERP: tl.constexpr
):
    """One chunk as two dots (even K with even K, odd with odd): acc [BN, BM] += B @ A^T with SWAP_AB,
    else acc [BM, BN] += A @ B^T. FP8: a, a2 are A's e4m3 planes and B is decoded to e4m3 relative to
    its rows' bases bb."""
    if PRE_A:
        a_even, a_odd = a, a2
    else:
        a_even, a_odd = _even_odd(_qdq_mxfp4(a.to(tl.float32)).to(tl.bfloat16))
    if FP8:
        b_even, b_odd = _decode_b_fp8(b, e.to(tl.int32), bb, INTERP)
    else:
        b_even, b_odd = _decode_b(b, e, INTERP)
    if SWAP_AB:
        acc = _dot(b_odd, a_odd, _dot(b_even, a_even, acc, INTERP), INTERP)
    else:
        acc = _dot(a_odd, b_odd, _dot(a_even, b_even, acc, INTERP), INTERP)
    return acc


@triton.jit
def _tile(
    acc,
    a_ptrs,
    a2_ptrs,
    b_ptrs,
    s_ptrs,
    seg_ptrs,
    bb,
    n_mask,
    m_mask,
    k_lo,
    K_SPLIT,
    BLOCK_K: tl.constexpr,
    PRE_A: tl.constexpr,
    FP8: tl.constexpr,
    PIPELINED: tl.constexpr,
    SEGMENTS: tl.constexpr,
    SWAP_AB: tl.constexpr,
    INTERP: tl.constexpr,
):
    """acc plus this program's K range [k_lo, k_lo + K_SPLIT), chunk by chunk."""
    k_last = k_lo + K_SPLIT - BLOCK_K
    if PIPELINED and SEGMENTS:  # BLOCK_K = 256, every load a plain one, staged by the pipeliner
        for k in range(k_lo, k_lo + K_SPLIT, BLOCK_K):
            e = _load_scale_segments(k, seg_ptrs)
            b = _load_b(k, b_ptrs, n_mask)
            a, a2 = _load_a(k, a_ptrs, a2_ptrs, m_mask, PRE_A)
            acc = _chunk_dots(acc, b, e, a, a2, bb, PRE_A, FP8, SWAP_AB, INTERP)
    elif PIPELINED:
        # B and A: plain loads that Triton's pipeliner stages in shared memory (cp.async); B's scale
        # bytes (too narrow for cp.async) are loaded one chunk ahead, in registers
        e1 = _load_scales(k_lo, s_ptrs, n_mask)
        for k in range(k_lo, k_lo + K_SPLIT, BLOCK_K):
            e = e1
            e1 = _load_scales(tl.minimum(k + BLOCK_K, k_last), s_ptrs, n_mask)
            b = _load_b(k, b_ptrs, n_mask)
            a, a2 = _load_a(k, a_ptrs, a2_ptrs, m_mask, PRE_A)
            acc = _chunk_dots(acc, b, e, a, a2, bb, PRE_A, FP8, SWAP_AB, INTERP)
    else:  # every load runs one chunk ahead of the math, in registers
        b1 = _load_b(k_lo, b_ptrs, n_mask)
        e1 = _load_scales(k_lo, s_ptrs, n_mask)
        a1, a21 = _load_a(k_lo, a_ptrs, a2_ptrs, m_mask, PRE_A)
        for k in range(k_lo, k_lo + K_SPLIT, BLOCK_K):
            b, e, a, a2 = b1, e1, a1, a21
            k_next = tl.minimum(k + BLOCK_K, k_last)
            b1 = _load_b(k_next, b_ptrs, n_mask)
            e1 = _load_scales(k_next, s_ptrs, n_mask)
            a1, a21 = _load_a(k_next, a_ptrs, a2_ptrs, m_mask, PRE_A)
            acc = _chunk_dots(acc, b, e, a, a2, bb, PRE_A, FP8, SWAP_AB, INTERP)
    return acc


@triton.jit
def _mxfp4_mm_kernel(
    a_ptr,
    a2_ptr,
    a8_ptr,
    base_ptr,
    bq_ptr,
    bs_ptr,
    c_ptr,
    ws_ptr,
    cnt_ptr,
    M,
    N,
    K,
    stride_am,
    stride_bn,
    stride_cm,
    bs_stride,
    K_SPLIT,
    BLOCK_N: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr,
    PRE_A: tl.constexpr,
    INTERP: tl.constexpr,
    PIPELINED: tl.constexpr = False,
    SWAP_AB: tl.constexpr = True,
    FP8: tl.constexpr = False,
    SEGMENTS: tl.constexpr = False,
    PDL: tl.constexpr = False,
):
    # PRE_A: a_ptr / a2_ptr are the even / odd halves of A prepared by _prepare_kernel (row stride stride_am)
    # FP8 (with PRE_A): a8_ptr holds A's e4m3 planes and base_ptr the row bases of A and B (_prep_fp8_kernel)
    # PDL: launched while the first kernel runs (programmatic dependent launch); waits for it before
    # the first load of what that kernel writes
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_k = tl.program_id(2)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    n_mask = offs_n < N
    m_mask = offs_m < M
    s_ptrs = (bs_ptr + _scale_row(offs_n, bs_stride))[:, None] + _scale_column(tl.arange(0, BLOCK_K // 32))[None, :]
    seg_ptrs = _segment_ptrs(bs_ptr, pid_n * (BLOCK_N // 32), BLOCK_N // 32, N, bs_stride)
    b_ptrs = bq_ptr + offs_n[:, None] * stride_bn + tl.arange(0, BLOCK_K // 2)[None, :]
    if PRE_A:
        a_ptrs = a_ptr + offs_m[:, None] * stride_am + tl.arange(0, BLOCK_K // 2)[None, :]
        a2_ptrs = a2_ptr + offs_m[:, None] * stride_am + tl.arange(0, BLOCK_K // 2)[None, :]
    else:
        a_ptrs = a_ptr + offs_m[:, None] * stride_am + tl.arange(0, BLOCK_K)[None, :]
        a2_ptrs = a_ptrs
    if SWAP_AB:
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    k_lo = pid_k * K_SPLIT
    if PDL:
        _cuda.gdc_wait()
    if FP8:
        ba = tl.load(base_ptr + offs_m, mask=m_mask, other=0)
        bb = tl.load(base_ptr + M + offs_n, mask=n_mask, other=0)
        if tl.maximum(tl.max(ba, axis=0), tl.max(bb, axis=0)) < (1 << 20):  # every row in the fp8 window
            half_k = tl.multiple_of(K // 2, 32)  # K is a multiple of 64
            a8_ptrs = a8_ptr + offs_m[:, None] * half_k + tl.arange(0, BLOCK_K // 2)[None, :]
            acc = _tile(
                acc,
                a8_ptrs,
                a8_ptrs + M * half_k,
                b_ptrs,
                s_ptrs,
                seg_ptrs,
                bb,
                n_mask,
                m_mask,
                k_lo,
                K_SPLIT,
                BLOCK_K,
                True,
                True,
                PIPELINED,
                SEGMENTS,
                SWAP_AB,
                INTERP,
            )
            if SWAP_AB:
                acc = acc * _pow2(bb[:, None] + ba[None, :])
            else:
                acc = acc * _pow2(ba[:, None] + bb[None, :])
        else:  # the exact bf16 path on A's bf16 planes (the register loop: its shared memory stays
            # within the fp8 loop's, so that two programs can share an SM)
            acc = _tile(
                acc,
                a_ptrs,
                a2_ptrs,
                b_ptrs,
                s_ptrs,
                seg_ptrs,
                bb,
                n_mask,
                m_mask,
                k_lo,
                K_SPLIT,
                BLOCK_K,
                True,
                False,
                False,
                False,
                SWAP_AB,
                INTERP,
            )
    else:
        acc = _tile(
            acc,
            a_ptrs,
            a2_ptrs,
            b_ptrs,
            s_ptrs,
            seg_ptrs,
            0,
            n_mask,
            m_mask,
            k_lo,
            K_SPLIT,
            BLOCK_K,
            PRE_A,
            False,
            PIPELINED,
            SEGMENTS,
            SWAP_AB,
            INTERP,
        )
    if SWAP_AB:  # acc is a C^T tile
        c_ptrs = c_ptr + offs_m[None, :] * stride_cm + offs_n[:, None]
        out_mask = n_mask[:, None] & m_mask[None, :]
        ws_ptrs = ws_ptr + offs_m[None, :] * N + offs_n[:, None]
    else:
        c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :]
        out_mask = m_mask[:, None] & n_mask[None, :]
        ws_ptrs = ws_ptr + offs_m[:, None] * N + offs_n[None, :]
    if SPLIT_K == 1:
        tl.store(c_ptrs, acc.to(tl.bfloat16), mask=out_mask)
    else:
        tl.store(ws_ptrs + pid_k * M * N, acc, mask=out_mask)
        tl.debug_barrier()
        tile = pid_n * tl.num_programs(1) + pid_m
        old = tl.atomic_add(cnt_ptr + tile, 1, sem="acq_rel", scope="gpu")
        if old == SPLIT_K - 1:
            tot = tl.zeros(acc.shape, dtype=tl.float32)
            for s in range(SPLIT_K):
                tot += tl.load(ws_ptrs + s * M * N, mask=out_mask, other=0.0, cache_modifier=".cg")
            tl.store(c_ptrs, tot.to(tl.bfloat16), mask=out_mask)
            tl.atomic_xchg(cnt_ptr + tile, 0)


PREPARE, FP8 = 2, 3
# (BLOCK_N, BLOCK_M, BLOCK_K, SPLIT_K, PRE_A, num_warps, STAGES, SWAP_AB) per (M, N, K); a rule for the rest.
# PRE_A: 0 = A quantized in the GEMM, 1 = in a first kernel, PREPARE = _prepare_kernel, then cuBLAS,
# FP8 = _prep_fp8_kernel, then the GEMM on e4m3 operands (bf16 for tiles whose rows leave the fp8 window).
# STAGES: 1 = the register prefetch loop, >= 2 = the PIPELINED loop with that many cp.async stages.
# SWAP_AB: 1 = C^T tiles (N on the MMA's M side, B decoded into its register operand), 0 = C tiles (the
# decoded B is the MMA's shared-memory operand).
# The benchmark shapes: scripts/validation/tune_examples.py on the H200 (STAGES = 1 and PREPARE:
# results/h200_tuning_mxfp4.json and h200_tuning_mxfp4_prepare.json; the PIPELINED loop and SWAP_AB = 0:
# results/h200_tuning_mxfp4_pipelined_large_m.json and h200_tuning_mxfp4_pipelined_small_m.json; BLOCK_K
# 256 with the scale segments: h200_tuning_mxfp4_scale_segments.json; FP8: h200_tuning_mxfp4_fp8_segments.json;
# with PDL: h200_tuning_mxfp4_fp8_pdl.json (m=64) and h200_tuning_mxfp4_pre_a_pdl_m*.json; PREPARE with
# A's programs first and its own row blocks: h200_tuning_mxfp4_prepare_a_first.json; C tiles at m=16:
# h200_tuning_mxfp4_c_tiles_m16.json, slower; four-warp programs at m <= 32: h200_tuning_mxfp4_four_warps_*.json;
# FP8 with the table decode at m=64 and m=256: probes/h200_tuning_mxfp4_fp8_tables_*_edabced.json).
CONFIGS = {
    (4, 2880, 512): (64, 16, 64, 8, 0, 4, 1, 1),
    (16, 2112, 7168): (64, 16, 256, 7, 1, 4, 3, 1),
    (32, 4096, 512): (64, 16, 256, 1, 0, 4, 3, 1),
    (32, 2880, 512): (64, 16, 256, 1, 0, 4, 3, 1),
    (64, 7168, 2048): (64, 64, 256, 1, FP8, 4, 4, 1),
    (256, 3072, 1536): (64, 64, 256, 1, FP8, 4, 3, 1),
}


def _pick_config(M, N, K):
    cfg = CONFIGS.get((M, N, K))
    if cfg is not None:
        return cfg
    BM = 16 if M <= 16 else (32 if M <= 32 else 64)
    BN = 128 if M <= 32 else 64
    BK = 128 if K % 128 == 0 else 64  # K is a multiple of 64 (the task's rule)
    tiles = triton.cdiv(N, BN) * triton.cdiv(M, BM)
    split = 1
    while tiles * split * 2 <= 264 and K % (split * 2 * BK) == 0 and K // (split * 2) >= 2 * BK:
        split *= 2
    return (BN, BM, BK, split, int(M > 32), 4, 1, 1)


def _segments(bk, split, k, stages):
    """Whether the PIPELINED loop loads B's scales as 256-byte segments (_load_scale_segments): with
    BLOCK_K 256 and at least 4 chunks per split. With 2 chunks (k=512) the permute cost more than the
    staging saved: m=32 n=4096 ranked 9.95 us with segments against 9.19 without on the H200
    (results/probes/h200_examples_ranked_segments_at_k512_9f34dc1.json)."""
    return stages > 1 and bk == 256 and k // split >= 4 * 256


_INTERP = os.environ.get("TRITON_INTERPRET", "0") == "1"
# Programmatic dependent launch (Hopper on): a GEMM after a first kernel launches while that kernel runs
# and waits for it in the kernel (PDL), which hides the second launch's latency.
_PDL = not _INTERP and torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9
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
    return (_buffer(dev, "ws", max(nws, 1 << 20), torch.float32), _buffer(dev, "cnt", max(ncnt, 4096), torch.int32))


def _prepare(A, bq, bs, N, rows, bk, nw, pdl=False, rows_a=0):
    """Launches _prepare_kernel on A and the first N rows of B (N = 0: A alone), BLOCK_R = rows of B
    and BLOCK_RA = rows_a of A (0: rows) per program; returns the bf16 operands (ap [M, K], bp [N, K],
    or ap twice)."""
    M, K = A.shape
    ap = _buffer(A.device, "a_prepared", M * K, torch.bfloat16)[: M * K].view(M, K)
    bp = _buffer(A.device, "b_prepared", N * K, torch.bfloat16)[: N * K].view(N, K) if N else ap
    rows_a = rows_a or rows
    _prepare_kernel[(triton.cdiv(N, rows) + triton.cdiv(M, rows_a), K // bk)](
        A,
        bq,
        bs,
        ap,
        bp,
        M,
        N,
        K,
        A.stride(0),
        bq.stride(0),
        bs.stride(0),
        BLOCK_R=rows,
        BLOCK_K=bk,
        INTERP=_INTERP,
        PDL=pdl,
        BLOCK_RA=rows_a,
        num_warps=nw,
        num_stages=1,
    )
    return ap, bp


def custom_kernel(data):
    A, _, B_q, _, B_scale_sh = data
    M, K = A.shape
    N = B_q.shape[0]
    cfg = _pick_config(M, N, K)
    BN, BM, BK, SPLIT, pre_a, nw, stages, swap = cfg
    bq = B_q.view(torch.uint8)
    bs = B_scale_sh.view(torch.uint8)
    if pre_a == PREPARE:  # one kernel makes both bf16 operands, then cuBLAS (BN, BM: rows of B, A per program)
        ap, bp = _prepare(A, bq, bs, N, BN, BK, nw, rows_a=BM)
        return (bp @ ap.T).T if swap else ap @ bp.T  # SWAP_AB: cuBLAS computes C^T (C a transposed view)
    C = torch.empty((M, N), dtype=torch.bfloat16, device=A.device)
    g0, g1 = (N + BN - 1) // BN, (M + BM - 1) // BM
    ws, cnt = _scratch(A.device, SPLIT * M * N, g0 * g1) if SPLIT > 1 else (C, C)
    a, a2, stride_am, a8, base = A, A, A.stride(0), C, C
    pdl = _PDL and pre_a in (1, FP8)  # the GEMM launches while the first kernel runs
    if pre_a == FP8:  # A's e4m3 planes and the row bases of A and B, in a first kernel
        a8 = _buffer(A.device, "a_fp8", M * K, torch.float8_e4m3fn)
        a = _buffer(A.device, "a_prepared", M * K, torch.bfloat16)
        base = _buffer(A.device, "fp8_base", M + N, torch.int32)
        kp = triton.next_power_of_2(K)
        rows = max(1, 2048 // kp)  # rows of A a program: 2048 elements
        _prep_fp8_kernel[(triton.cdiv(M, rows) + triton.cdiv(N, 32),)](
            A,
            bs,
            a8,
            a,
            base,
            M,
            N,
            K,
            A.stride(0),
            bs.stride(0),
            ROWS=rows,
            KP=kp,
            CP=max(8, triton.next_power_of_2(K // 32)),
            PDL=pdl,
            num_warps=4,
            num_stages=1,
        )
    elif pre_a:
        a = _prepare(A, bq, bs, 0, 16, 64, 4, pdl, 16)[0]  # A alone: 16 rows x 64 K, 4 warps a program
    if pre_a:  # A's even and odd halves: one [M, K] bf16 buffer, row stride K
        a2, stride_am = a.view(-1)[K // 2 :], K
    _mxfp4_mm_kernel[(g0, g1, SPLIT)](
        a,
        a2,
        a8,
        base,
        bq,
        bs,
        C,
        ws,
        cnt,
        M,
        N,
        K,
        stride_am,
        bq.stride(0),
        C.stride(0),
        bs.stride(0),
        K // SPLIT,
        BLOCK_N=BN,
        BLOCK_M=BM,
        BLOCK_K=BK,
        SPLIT_K=SPLIT,
        PRE_A=pre_a in (1, FP8),
        INTERP=_INTERP,
        PIPELINED=stages > 1,
        SWAP_AB=bool(swap),
        FP8=pre_a == FP8,
        SEGMENTS=_segments(BK, SPLIT, K, stages),
        PDL=pdl,
        num_warps=nw,
        num_stages=stages,
        **({"launch_pdl": True} if pdl else {}),
    )
    return C
