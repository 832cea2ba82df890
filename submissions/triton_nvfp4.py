"""nvfp4_gemm in Triton and Gluon for NVIDIA Hopper (H200): the fast example.

What it computes: C[:, :, l] = dequant(a[:, :, l]) @ dequant(b[:, :, l])^T in fp16; e2m1 elements, one
e4m3 scale per 16 of them (the task's scales are 0..3). For the plain version read torch_nvfp4.py first.

Speed: 24.64 us ranked (geometric mean; 41.88 / 20.90 / 17.09 us at k=16384 / n=4096 / k=2048; 95%
interval 23.87-25.44 from 10 blocks), from results/h200_examples_ranked.json (H200, Triton 3.6, 2026-12-04).
The same kernels (same sm_90 PTX and launch configs) read 21.69 us in one process at commit dc7a925 (git
show dc7a925:results/h200_examples_ranked.json); the k=2048 shape is host-bound and moves most between
runs and machines (docs/measurement.md).

What it shows: Hopper has no FP4 tensor cores, so the kernels fold the scales into the elements and use
the int8 tensor cores (wgmma): 2 * e2m1 * s is an exact int8 for an integer scale s in 0..10, and the
int32 accumulator is exact. The data path on the benchmark shapes (I8F, one launch a call):
1. The GEMM's programs first fold A into int8 (_gl_prep_a, inline-PTX prmt lookups: _FOLD_I8), each its
   share, and count the shares in global memory; B's first TMA loads are already in flight.
2. Then the kernel is warp-specialized (gl.warp_specialize): a warp loads A's int8 chunks by TMA, a warp
   B's codes and scales, two fold warpgroups turn B's chunks into int8 in shared memory, and a wgmma
   warpgroup multiplies them into one int32 accumulator; mbarriers hand each chunk over. Triton's own
   pipeline cannot overlap a decode with the wgmma (it waits for every wgmma when an operand is computed
   in the loop), hence Gluon.
3. A tile with a scale that does not fold (not an integer 0..10: adversarial inputs only) is computed
   again in fp32 on the CUDA cores (_gl_fp32_tile), so the output is right for any e4m3 scale.
Elsewhere (other shapes: FP8; non-Hopper GPUs, batches not one after the other and Triton's CPU
interpreter, which the tests use: INT8) a first kernel decodes A (and for INT8 also B) and a Triton GEMM follows as a
programmatic dependent launch (PDL); its scale check redoes a tile on fp16 (_fp16_tile), which is exact
for every e4m3 scale. FP8 folds a scale 2**E * f (f 1 or 1.5) into e4m3 elements; B is decoded in the
loop by prmt lookups (_DECODE_FP8_ASM).

Driver-level tricks, each kept for its measured gain:
* The chain: a call's first launch is a PDL launch of the call before's GEMM, which triggers it at its
  start, so the next call's programs fold their part of A on the SMs that GEMM leaves free and wait for
  its end (PDL's wait) before writing the scratch it reads. A dependent grid is placed only once every
  program of the one before has started, so I8F's programs, which wait for each other, never wait on a
  program with no SM. At k=2048: 11.21 against 15.60 us unchained (tune_examples.py,
  results/probes/h200_tuning_nvfp4_chain2_040f468.json and _chain0_f29435a.json; commits 040f468,
  f29435a), and I8F (one launch) became faster than I8G (two) on all three shapes: 41.44 / 17.88 / 11.21
  against 42.62 / 19.10 / 15.34 us (h200_tuning_nvfp4_chain2_040f468.json).
* The launch plan with cuLaunchKernelEx by ctypes: the batched protocol times the host whenever the host
  is slower than the GPU (at k=2048 the kernel takes 9.9 us, README), and Triton's launcher spends 5.5-7.2
  us a launch binding arguments. After a call's first launch the plan keeps each kernel's CUDA parameter
  block (laid out from the kernel's PTX entry), writes the five data pointers into it and calls
  cuLaunchKernelEx itself (3.7-5.6 us a launch: results/probes/h200_host_time_nvfp4_launch_api_0ce8111.json,
  commit 0ce8111); k=2048 ranked 17.6 against 26.6 us through Triton's launchers (commit ca22fd7,
  results/superseded/h200_examples_ranked_ca22fd7.json and probes/h200_host_time_nvfp4_libcuda_ca22fd7.json).
  The TMA descriptors are made on the host: a tensor map encoded once, then for each new address a copy
  with the address replaced (cuTensorMapReplaceAddress, under 1 us), kept by address; made in the kernel
  they cost 3.4 and 2.6 us at k=16384 and n=4096 (probes/h200_profile_nvfp4_{head,host_desc}_8e46a8c.json).
  Where the plan cannot lay a kernel's parameters out (another Triton), it launches through Triton's own
  launchers; nothing is cached by input identity or content.

Tried and slower on the H200 (results/README.md at commit 2d68822 names each file and its commit):
BLOCK_N 128, three fold warpgroups, four folded-B buffers, the wgmma warpgroup checking B's scales, one
loop in every warp instead of the partitions (59.7 against 49.2 us at k=16384), cp.async instead of TMA,
stream-K, B folded into the wgmma's register operand, both INT8 steps in one cooperative launch, FP8 on
the benchmark shapes (93.2 / 31.3 / 22.4 us), and I8F unchained (its programs made A only after the call
before had ended).

Why more than 700 lines (about 1,100 before ruff format laid the long calls out one argument a line): the
Gluon kernel (its partitions, the fold, the in-kernel A) takes about 380, the FP8 / INT8 Triton kernels,
which serve every GPU and input that the Gluon kernel does not (and the CPU tests), 470, and the host side
(configs, TMA descriptors, the launch plan) 580.
"""

import ctypes
import os
import re

import torch
import triton
import triton.language as tl
from triton.language.extra import cuda as _cuda

try:  # Gluon (Triton >= 3.5): the I8G path's explicit shared memory, TMA, warp specialization and async wgmma
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia import hopper
    from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as _TensorDescriptor

    _GLUON = True
except Exception:
    _GLUON = False

try:  # pragma: no cover
    from task import input_t, output_t  # noqa: F401
except Exception:
    pass

_INTERP = os.environ.get("TRITON_INTERPRET", "0") == "1"


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
def _planes_f32(p, sf):
    """p: uint8 [R, BK/2] packed e2m1, sf: uint8 e4m3 [R, BK/16] -> fp32 ([R, BK/2], [R, BK/2]) = the
    dequantized low-nibble (even K) and high-nibble (odd K) elements, exact."""
    R: tl.constexpr = p.shape[0]
    C: tl.constexpr = p.shape[1]
    s = sf.to(tl.float8e4nv, bitcast=True).to(tl.float32)
    s = tl.reshape(tl.broadcast_to(tl.reshape(s, (R, C // 8, 1)), (R, C // 8, 8)), (R, C))
    pi = p.to(tl.int32)
    two126 = 8.507059173023462e37  # bits (c & 7) << 22 | (c & 8) << 28 are e2m1(c) * 2**-126
    lo = (((pi & 7) << 22) | ((pi & 8) << 28)).to(tl.float32, bitcast=True) * two126 * s
    hi = (((pi & 0x70) << 18) | ((pi & 0x80) << 24)).to(tl.float32, bitcast=True) * two126 * s
    return lo, hi


@triton.jit
def _fp8_code(sf):
    """FP8: per block, e4m3 scale bytes sf (uint8 [R, C]) -> (q, bad). The fp8 path folds a scale
    2**E * f into the elements, exact in e4m3 for f in {1, 1.5} and E in -5..5 (the task's scales 1, 2,
    3 among them) or a zero scale; bad = 1 for any other (the tile then takes the fp16 path).
    q (uint8): bit 7 = the scale is nonzero, bits 3-6 = E + 5, bit 0 = f is 1.5 (_DECODE_FP8_ASM)."""
    s = sf.to(tl.int32)
    nonzero = (s & 0x7F) != 0
    # good: sign 0, mantissa 0 or 4 (f = 1 or 1.5), exponent field E + 7 in 2..12 (s in 16..103)
    bad = nonzero & (((s & 3) != 0) | (s < 16) | (s > 103))
    q = tl.where(nonzero, 0x80 | ((s - 16) & 0x78) | ((s >> 2) & 1), 0)
    return q.to(tl.uint8), bad.to(tl.int8)


# B's fp8 decode, 4 bytes (8 elements) per instance, each byte with its own q (_fp8_code; no assumption on
# which bytes Triton packs together). Codes of a zero-scale block are cleared first. prmt looks the 8
# magnitudes up (in K order) in two constant tables of e4m3 bytes, e2m1 * 2**-5 and e2m1 * 1.5 * 2**-5
# (all normal numbers), and q's bit 0 (moved to bit 7, which prmt's sign mode replicates) selects one per
# byte; a third prmt in a table of 0x00, 0xFF x 7 masks zeros out of 8 * (E + 5), which is added to the
# exponent fields (no carry: the largest byte is 0x79, 9 * 2**5). Two more prmt split even from odd, and
# the sign bits are or-ed back in.
_DECODE_FP8_ASM = tl.constexpr(
    "{ .reg .b32 w, m, q7, x, y, t, c, z, r, l0, h0, l4, h4, zl, zh;\n"
    "mov.b32 l0, 0x14100800; mov.b32 h0, 0x24201C18; mov.b32 l4, 0x19140C00; mov.b32 h4, 0x2924211C;\n"
    "mov.b32 zl, 0xFFFFFF00; mov.b32 zh, 0xFFFFFFFF;\n"
    "prmt.b32 t, $3, 0, 0xBA98; and.b32 w, $2, t; and.b32 m, w, 0x77777777; shl.b32 q7, $3, 7;\n"
    "prmt.b32 x, l0, h0, m; prmt.b32 t, l4, h4, m; prmt.b32 c, q7, 0, 0x9988;\n"
    "and.b32 t, t, c; not.b32 c, c; and.b32 x, x, c; or.b32 x, x, t;\n"
    "prmt.b32 z, zl, zh, m; prmt.b32 r, $3, 0, 0x1100; and.b32 r, r, z; and.b32 r, r, 0x78787878; add.u32 x, x, r;\n"
    "shr.b32 m, m, 16;\n"
    "prmt.b32 y, l0, h0, m; prmt.b32 t, l4, h4, m; prmt.b32 c, q7, 0, 0xBBAA;\n"
    "and.b32 t, t, c; not.b32 c, c; and.b32 y, y, c; or.b32 y, y, t;\n"
    "prmt.b32 z, zl, zh, m; prmt.b32 r, $3, 0, 0x3322; and.b32 r, r, z; and.b32 r, r, 0x78787878; add.u32 y, y, r;\n"
    "prmt.b32 $0, x, y, 0x6420; prmt.b32 $1, x, y, 0x7531;\n"
    "shl.b32 t, w, 4; and.b32 t, t, 0x80808080; or.b32 $0, $0, t;\n"
    "and.b32 t, w, 0x80808080; or.b32 $1, $1, t; }"
)


@triton.jit
def _decode_fp8(p, sf, INTERP: tl.constexpr):
    """FP8: p: uint8 [R, BK/2] packed e2m1, sf: uint8 e4m3 [R, BK/16] -> float8e4nv ([R, BK/2], [R, BK/2])
    = the even and odd elements with their scales folded in, and bad [R, BK/16] (_fp8_code: where it is
    1 the values are not exact)."""
    R: tl.constexpr = p.shape[0]
    C: tl.constexpr = p.shape[1]
    q, bad = _fp8_code(sf)
    if INTERP:  # the same values through fp32
        lo, hi = _planes_f32(p, sf)
        lo, hi = lo.to(tl.float8e4nv), hi.to(tl.float8e4nv)
    else:
        q = tl.reshape(tl.broadcast_to(tl.reshape(q, (R, C // 8, 1)), (R, C // 8, 8)), (R, C))
        lo, hi = tl.inline_asm_elementwise(
            _DECODE_FP8_ASM, "=r,=r,r,r", [p, q], dtype=(tl.uint8, tl.uint8), is_pure=True, pack=4
        )
        lo, hi = lo.to(tl.float8e4nv, bitcast=True), hi.to(tl.float8e4nv, bitcast=True)
    return lo, hi, bad


@triton.jit
def _decode_a_kernel(
    a_ptr,
    sa_ptr,
    out_ptr,
    bad_ptr,
    M,
    K,
    sam,
    sal,
    ssam,
    ssal,
    BLOCK_R: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PDL: tl.constexpr = False,
):
    """FP8, the first kernel: decodes a [M, K/2, L] once into e4m3 out [L, M, K] with the scales folded
    in, exact where _fp8_code finds no bad scale, so that the GEMM's N/BLOCK_N programs do not each
    decode the same A tiles again, and whether this program's tile has a bad scale in
    bad [L, M/BLOCK_R, K/BLOCK_K] (every slot written on every call). PDL: then lets the GEMM launch."""
    pid_r, pid_k, l = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    offs_r = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
    k0 = pid_k * BLOCK_K
    a = tl.load(a_ptr + l * sal + offs_r[:, None] * sam + k0 // 2 + tl.arange(0, BLOCK_K // 2)[None, :])
    sa = tl.load(sa_ptr + l * ssal + offs_r[:, None] * ssam + k0 // 16 + tl.arange(0, BLOCK_K // 16)[None, :])
    out = out_ptr + l * M * K + offs_r[:, None] * K + k0 + tl.arange(0, BLOCK_K)[None, :]
    lo, hi = _planes_f32(a, sa)
    tl.store(out, tl.reshape(tl.join(lo, hi), (BLOCK_R, BLOCK_K)).to(tl.float8e4nv))
    tl.store(
        bad_ptr + (l * tl.num_programs(0) + pid_r) * tl.num_programs(1) + pid_k,
        tl.max(tl.max(_fp8_code(sa)[1], axis=1), axis=0).to(tl.int32),
    )
    if PDL:  # after the stores: GEMM programs placed early would crowd the SMs that this kernel holds
        _cuda.gdc_launch_dependents()


@triton.jit
def _i8_code(sf):
    """INT8: per block, e4m3 scale bytes sf (uint8) -> (s, bad): s (int32) the scale as an integer, and
    bad (int8) 1 unless it is one of 0..10, which fold into int8 exactly (2 * e2m1 * s is an integer of
    at most 120)."""
    v = sf.to(tl.float8e4nv, bitcast=True).to(tl.float32)
    s = v.to(tl.int32)
    return s, ((s.to(tl.float32) != v) | (s < 0) | (s > 10)).to(tl.int8)  # NaN: the compare fails


# INT8: one 32-bit word of packed codes (8 elements in K order, one block's) and its block's integer
# scale s in 0..10 (the low byte of $3: the Gluon loop passes it in all four bytes) -> two words of int8
# 2 * e2m1 * s in K order (elements 0..3, 4..7). Two constant tables of 2 * e2m1 (0 1 2 3 | 4 6 8 12)
# times s (bytes of at most 120: no carry); prmt looks the 4 codes of a half word up: with the code as
# selector a negative code gives 0 (its sign bit replicates the table byte's, 0), with the sign bit
# flipped a positive one does. Per byte, p - q is then ((p | 0x80) - q) ^ 0x80 (no borrow: q <= 120),
# the two's complement the int8 tensor cores take.
_FOLD_I8 = (
    "{ .reg .b32 s, t0, t1, n, p, q, w;\n"
    "and.b32 s, $3, 0xFF; mul.lo.u32 t0, s, 0x03020100; mul.lo.u32 t1, s, 0x0C080604; xor.b32 n, $2, 0x88888888;\n"
    "prmt.b32 p, t0, t1, $2; prmt.b32 q, t0, t1, n;\n"
    "or.b32 p, p, 0x80808080; sub.u32 p, p, q; xor.b32 $0, p, 0x80808080;\n"
    "shr.b32 w, $2, 16; shr.b32 n, n, 16;\n"
    "prmt.b32 p, t0, t1, w; prmt.b32 q, t0, t1, n;\n"
    "or.b32 p, p, 0x80808080; sub.u32 p, p, q; xor.b32 $1, p, 0x80808080; }"
)
_FOLD_I8_ASM = tl.constexpr(_FOLD_I8)


@triton.jit
def _fold_i8_rows(
    x_ptr,
    sx_ptr,
    out_ptr,
    bad_ptr,
    rows,
    k0,
    sxr,
    sxl,
    ssxr,
    ssxl,
    R,
    K,
    l,
    tile,
    BLOCK_K: tl.constexpr,
    INTERP: tl.constexpr,
    WAIT: tl.constexpr = 0,
):
    """INT8: one [rows, BLOCK_K] tile of a packed operand (a or b, [R, K/2, L]) as int8 2 * value in K
    order (out [L, R, K]) and whether a scale there is not an integer 0..10 (bad[tile]). The codes are
    read and the values written as 32-bit words (8 and 4 elements). WAIT: PDL's wait (for the kernel
    before, which may still read out and bad) between the loads and the stores, then lets the GEMM
    launch (its own wait is for this kernel's end)."""
    NR: tl.constexpr = rows.shape[0]
    sx = tl.load(sx_ptr + l * ssxl + rows[:, None] * ssxr + k0 // 16 + tl.arange(0, BLOCK_K // 16)[None, :])
    s, bad = _i8_code(sx)
    if INTERP:  # the same values through fp32
        x = tl.load(x_ptr + l * sxl + rows[:, None] * sxr + k0 // 2 + tl.arange(0, BLOCK_K // 2)[None, :])
        lo, hi = _planes_f32(x, sx)
        v = (tl.reshape(tl.join(lo, hi), (NR, BLOCK_K)) * 2.0).to(tl.int8)
        out = out_ptr + l * R * K + rows[:, None] * K + k0 + tl.arange(0, BLOCK_K)[None, :]
    else:
        words = (x_ptr + l * sxl + rows[:, None] * sxr + k0 // 2).to(tl.pointer_type(tl.int32))
        w = tl.load(words + tl.arange(0, BLOCK_K // 8)[None, :])
        s = tl.reshape(
            tl.broadcast_to(tl.reshape(s, (NR, BLOCK_K // 16, 1)), (NR, BLOCK_K // 16, 2)), (NR, BLOCK_K // 8)
        )  # a block is two words
        w0, w1 = tl.inline_asm_elementwise(
            _FOLD_I8_ASM, "=r,=r,r,r", [w, s], dtype=(tl.int32, tl.int32), is_pure=True, pack=1
        )
        v = tl.reshape(tl.join(w0, w1), (NR, BLOCK_K // 4))
        out = (out_ptr + l * R * K + rows[:, None] * K + k0).to(tl.pointer_type(tl.int32)) + tl.arange(0, BLOCK_K // 4)[
            None, :
        ]
    if WAIT:
        _cuda.gdc_wait()
        _cuda.gdc_launch_dependents()
    tl.store(bad_ptr + tile, tl.max(tl.max(bad, axis=1), axis=0).to(tl.int32))
    tl.store(out, v)


@triton.jit
def _prep_i8_kernel(
    a_ptr,
    b_ptr,
    sa_ptr,
    sb_ptr,
    a8_ptr,
    b8_ptr,
    fa_ptr,
    fb_ptr,
    M,
    N,
    K,
    sam,
    sal,
    sbn,
    sbl,
    ssam,
    ssal,
    ssbn,
    ssbl,
    BLOCK_R: tl.constexpr,
    BLOCK_K: tl.constexpr,
    INTERP: tl.constexpr,
    PDL: tl.constexpr = False,
    WAIT: tl.constexpr = 0,
):
    """INT8, the first kernel: both operands as int8 (2 * value, exact for the scales that _i8_code
    finds good) in K order, a8 [L, M, K] and b8 [L, N, K], and a flag per BLOCK_R-row x BLOCK_K tile
    (fa [L, M/BLOCK_R, K/BLOCK_K], fb [L, N/BLOCK_R, K/BLOCK_K]; every slot written on every call).
    Programs 0 .. M/BLOCK_R - 1 take row blocks of a, the rest those of b. PDL: then lets the GEMM launch.
    WAIT (launched as a dependent of the call before's GEMM, the chain): its loads before PDL's wait,
    its stores after."""
    pid_r, pid_k, l = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    na, kt = M // BLOCK_R, tl.num_programs(1)
    if pid_r < na:
        _fold_i8_rows(
            a_ptr,
            sa_ptr,
            a8_ptr,
            fa_ptr,
            pid_r * BLOCK_R + tl.arange(0, BLOCK_R),
            pid_k * BLOCK_K,
            sam,
            sal,
            ssam,
            ssal,
            M,
            K,
            l,
            (l * na + pid_r) * kt + pid_k,
            BLOCK_K,
            INTERP,
            WAIT,
        )
    else:
        r = pid_r - na
        _fold_i8_rows(
            b_ptr,
            sb_ptr,
            b8_ptr,
            fb_ptr,
            r * BLOCK_R + tl.arange(0, BLOCK_R),
            pid_k * BLOCK_K,
            sbn,
            sbl,
            ssbn,
            ssbl,
            N,
            K,
            l,
            (l * (N // BLOCK_R) + r) * kt + pid_k,
            BLOCK_K,
            INTERP,
            WAIT,
        )
    if PDL:  # after the stores
        _cuda.gdc_launch_dependents()


@triton.jit
def _i8_tile(acc, a8_rows, b8_rows, fa_rows, fb_rows, k_lo, k_hi, BLOCK_K: tl.constexpr, INTERP: tl.constexpr):
    """INT8: acc (int32) plus the chunks [k_lo, k_hi) of the first kernel's int8 operands on the int8
    tensor cores (exact), and whether a flag of the tile's row blocks (fa_rows, fb_rows: per 256 K) is set."""
    offs_k = tl.arange(0, BLOCK_K)[None, :]
    FLAGS: tl.constexpr = (BLOCK_K + 255) // 256  # flags per chunk
    bad_a = tl.zeros((fa_rows.shape[0], FLAGS), dtype=tl.int32)
    bad_b = tl.zeros((fb_rows.shape[0], FLAGS), dtype=tl.int32)
    for k in range(k_lo, k_hi, BLOCK_K):
        kk = tl.multiple_of(k, 64)
        bad_a |= tl.load(fa_rows[:, None] + k // 256 + tl.arange(0, FLAGS)[None, :])
        bad_b |= tl.load(fb_rows[:, None] + k // 256 + tl.arange(0, FLAGS)[None, :])
        acc = _dot(tl.load(a8_rows[:, None] + kk + offs_k), tl.load(b8_rows[:, None] + kk + offs_k), acc, INTERP)
    return acc, tl.max(tl.max(bad_a, axis=1), axis=0) | tl.max(tl.max(bad_b, axis=1), axis=0)


@triton.jit
def _fp16_tile(acc, a_rows, sa_rows, b_rows, sb_rows, k_lo, k_hi, BLOCK_K: tl.constexpr, INTERP: tl.constexpr):
    """The fallback: acc plus the chunks [k_lo, k_hi) on fp16 tensor cores; every operand is
    value * 2**-14 (exact for every e4m3 scale), so the tile is acc * 2**28. *_rows: pointers to the
    tile's rows at k = 0 in a, sfa, b and sfb."""
    offs_kh = tl.arange(0, BLOCK_K // 2)[None, :]
    offs_ks = tl.arange(0, BLOCK_K // 16)[None, :]
    for k in range(k_lo, k_hi, BLOCK_K):  # k: a multiple of 64
        kh, ks = tl.multiple_of(k // 2, 32), tl.multiple_of(k // 16, 4)
        av = _decode(tl.load(a_rows[:, None] + kh + offs_kh), tl.load(sa_rows[:, None] + ks + offs_ks))
        bv = _decode(tl.load(b_rows[:, None] + kh + offs_kh), tl.load(sb_rows[:, None] + ks + offs_ks))
        acc = _dot(av, bv, acc, INTERP)
    return acc


@triton.jit
def _dot(x, y, acc, INTERP: tl.constexpr):
    """acc += x @ y^T for fp16 or e4m3 x, y (exact products, fp32 accumulation) or int8 ones (int32)."""
    if INTERP:  # the interpreter has no fp8 dot; fp32 ieee is exact here too (int8: for one chunk)
        acc += tl.dot(x.to(tl.float32), tl.trans(y).to(tl.float32), input_precision="ieee").to(acc.dtype)
    elif x.dtype == tl.int8:  # int32 accumulation: exact
        acc = tl.dot(x, tl.trans(y), acc, out_dtype=tl.int32)
    elif x.dtype == tl.float8e4nv:
        # Hopper's fp8 wgmma accumulates with fewer bits than fp32: each dot gets a fresh accumulator,
        # added to acc in fp32
        acc += tl.dot(x, tl.trans(y))
    else:
        acc = tl.dot(x, tl.trans(y), acc)
    return acc


@triton.jit
def _fp8_tile(acc, a8_rows, bad_a_rows, b_rows, sb_rows, k_lo, k_hi, BLOCK_K: tl.constexpr, INTERP: tl.constexpr):
    """FP8: acc plus the chunks [k_lo, k_hi) on e4m3 tensor cores, one dot per chunk: A's e4m3 rows
    (a8_rows, K order) with B decoded by _decode_fp8, its even and odd elements interleaved in
    registers; and whether a scale of A (bad_a_rows: _decode_a_kernel's flags of the tile's row blocks,
    per 256 K) or of B was bad there (_fp8_code; 0: the tile is exact)."""
    offs_kh = tl.arange(0, BLOCK_K // 2)[None, :]
    offs_ks = tl.arange(0, BLOCK_K // 16)[None, :]
    FLAGS: tl.constexpr = (BLOCK_K + 255) // 256  # flags per chunk
    bad_a = tl.zeros((bad_a_rows.shape[0], FLAGS), dtype=tl.int32)
    bad_b = tl.zeros((b_rows.shape[0], BLOCK_K // 16), dtype=tl.int8)
    for k in range(k_lo, k_hi, BLOCK_K):  # k: a multiple of 64
        kh, ks = tl.multiple_of(k // 2, 32), tl.multiple_of(k // 16, 4)
        bad_a |= tl.load(bad_a_rows[:, None] + k // 256 + tl.arange(0, FLAGS)[None, :])
        b_even, b_odd, bad = _decode_fp8(
            tl.load(b_rows[:, None] + kh + offs_kh), tl.load(sb_rows[:, None] + ks + offs_ks), INTERP
        )
        bad_b |= bad
        b = tl.reshape(tl.join(b_even, b_odd), (b_even.shape[0], BLOCK_K))
        acc = _dot(tl.load(a8_rows[:, None] + tl.multiple_of(k, 64) + tl.arange(0, BLOCK_K)[None, :]), b, acc, INTERP)
    return acc, tl.max(tl.max(bad_a, axis=1), axis=0) | tl.max(tl.max(bad_b, axis=1), axis=0).to(tl.int32)


@triton.jit
def _nvfp4_kernel(
    a_ptr,
    a8_ptr,
    fa_ptr,
    b_ptr,
    b8_ptr,
    fb_ptr,
    sa_ptr,
    sb_ptr,
    c_ptr,
    ws_ptr,
    cnt_ptr,
    M,
    N,
    K,
    sam,
    sal,
    sbn,
    sbl,
    ssam,
    ssal,
    ssbn,
    ssbl,
    scm,
    scl,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr,
    INTERP: tl.constexpr,
    A_DEC: tl.constexpr,
    PDL: tl.constexpr = False,
):
    # A_DEC = FP8: a8_ptr holds A's e4m3 values ([L, M, K]), fa_ptr the flags of its bad scales
    # ([L, M/64, K/256]) and a_ptr is a (for the fp16 fallback). A_DEC = INT8: a8_ptr, b8_ptr hold both
    # operands as _prep_i8_kernel wrote them ([L, M, K], [L, N, K]), fa_ptr, fb_ptr their flags.
    # SPLIT_K: split k of SPLIT_K takes the BLOCK_K chunks [k * chunks / SPLIT_K, (k + 1) * chunks / SPLIT_K).
    # PDL: launched while the first kernel runs; waits for it before the first load of A.
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_z = tl.program_id(2)
    l = pid_z // SPLIT_K
    pid_k = pid_z % SPLIT_K
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    b_rows = b_ptr + l * sbl + offs_n * sbn
    sa_rows = sa_ptr + l * ssal + offs_m * ssam
    sb_rows = sb_ptr + l * ssbl + offs_n * ssbn
    chunks = K // BLOCK_K
    k_lo = (pid_k * chunks // SPLIT_K) * BLOCK_K
    k_hi = ((pid_k + 1) * chunks // SPLIT_K) * BLOCK_K
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if PDL:
        _cuda.gdc_wait()
    a_rows = a_ptr + l * sal + offs_m * sam
    blocks = l * (M // 64) + pid_m * (BLOCK_M // 64) + tl.arange(0, BLOCK_M // 64)  # 64-row blocks of A
    if A_DEC == 2:  # FP8
        acc, bad = _fp8_tile(
            acc,
            a8_ptr + l * M * K + offs_m * K,
            fa_ptr + blocks * (K // 256),
            b_rows,
            sb_rows,
            k_lo,
            k_hi,
            BLOCK_K,
            INTERP,
        )
    if A_DEC == 3:  # INT8: 4 * C, exact in int32
        b_blocks = l * (N // 64) + pid_n * (BLOCK_N // 64) + tl.arange(0, BLOCK_N // 64)
        acc_i, bad = _i8_tile(
            tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32),
            a8_ptr + l * M * K + offs_m * K,
            b8_ptr + l * N * K + offs_n * K,
            fa_ptr + blocks * (K // 256),
            fb_ptr + b_blocks * (K // 256),
            k_lo,
            k_hi,
            BLOCK_K,
            INTERP,
        )
        acc = acc_i.to(tl.float32) * 0.25
    if bad > 0:  # a scale that the path cannot fold: this tile again, exactly, on fp16, in chunks of 64,
        # whose registers stay within the fp8 loop's
        acc = (
            _fp16_tile(
                tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32), a_rows, sa_rows, b_rows, sb_rows, k_lo, k_hi, 64, INTERP
            )
            * 268435456.0
        )
    c_ptrs = c_ptr + l * scl + offs_m[:, None] * scm + offs_n[None, :]
    if SPLIT_K == 1:
        tl.store(c_ptrs, acc.to(tl.float16))
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
            tl.store(c_ptrs, tot.to(tl.float16))
            tl.atomic_xchg(cnt_ptr + tile, 0)


# ---- I8G: the INT8 path with B decoded in the GEMM, in Gluon (Hopper) --------------------------------------
# Triton waits for each wgmma at once when an operand is computed in the loop, so the decode and the
# tensor cores take turns. Here they overlap: A (int8 2 * value in K order, written by _prep_i8_kernel
# or, I8F, by the GEMM's own programs: _gl_prep_a) and B's codes and scales reach shared memory ahead of
# use by TMA, in chunks of 256 K; B is folded into int8 by _FOLD_I8 (prmt lookups in tables times the
# block's integer scale) and stored as the wgmma's first operand (C^T tile: BLOCK_N rows of B, all 128
# rows of A); one int32 accumulator, exact, so no partial sums leave the tensor cores. The kernel is
# warp-specialized (_ws_*: two load warps, two fold warpgroups, the wgmma warpgroup). A tile whose
# scales do not fold (not an integer 0..10) is computed again in fp32 on the CUDA cores (exact
# products, as the reference): slow, and only adversarial inputs reach it.
if _GLUON:
    _gl_barrier = getattr(gl, "thread_barrier", None) or gl.barrier
    _tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared

    if hasattr(gl.shared_memory_descriptor, "reinterpret"):  # Triton >= 3.7; 3.6 has _reinterpret

        @gluon.jit
        def _gl_flat(smem, shape: gl.constexpr):
            return smem.reinterpret(gl.uint8, shape, gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
    else:

        @gluon.jit
        def _gl_flat(smem, shape: gl.constexpr):
            return smem._reinterpret(gl.uint8, shape, gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))

    _FOLD_I8_GL = gl.constexpr(_FOLD_I8)

    @gluon.jit
    def _gl_fold(c_s, s_s, cl: gl.constexpr, BLOCK_N: gl.constexpr, BK: gl.constexpr):
        """B's codes [BLOCK_N, BK / 2] and scales in shared memory -> (int8 2 * value [BLOCK_N, BK] in K
        order, and 1 per block whose scale is not an integer 0..10)."""
        codes = c_s.reshape([BLOCK_N, BK // 16, 2, 4]).load(cl)  # [rows, blocks, words, bytes]
        return _gl_fold_words(codes, s_s.load(gl.SliceLayout(2, gl.SliceLayout(3, cl))), BLOCK_N, BK)

    @gluon.jit
    def _gl_fold_words(codes, sf, BLOCK_N: gl.constexpr, BK: gl.constexpr):
        """_gl_fold on codes [rows, blocks, words, bytes] and scale bytes sf [rows, blocks] in registers."""
        v = sf.to(gl.float8e4nv, bitcast=True).to(gl.float32)
        s = v.to(gl.int32)
        bad = ((s.to(gl.float32) != v) | (s < 0) | (s > 10)).to(gl.int32)  # NaN: the compare fails
        s4 = gl.broadcast(gl.expand_dims(gl.expand_dims(s.to(gl.uint8), 2), 3), codes)[0]
        lo, hi = gl.inline_asm_elementwise(
            _FOLD_I8_GL, "=r,=r,r,r", [codes, s4], dtype=(gl.int8, gl.int8), is_pure=True, pack=4
        )  # a word's elements 0..3 and 4..7
        return gl.reshape(gl.permute(gl.join(lo, hi), [0, 1, 2, 4, 3]), [BLOCK_N, BK]), bad

    @gluon.jit
    def _gl_prep_a(a_ptr, sa_ptr, a8_ptr, fa_ptr, unit, M, K, sam, sal, ssam, ssal, cl: gl.constexpr):
        """FUSED_A: unit ``unit`` of A (64 rows x 256 K of batch l) as _prep_i8_kernel writes it: int8
        2 * value into a8 [L, M, K] and its flag into fa [L, M / 64, K / 256] (the unit's index)."""
        kt, na = K // 256, M // 64
        kc, r, l = unit % kt, (unit // kt) % na, unit // (kt * na)
        s3: gl.constexpr = gl.SliceLayout(3, cl)
        s2: gl.constexpr = gl.SliceLayout(2, s3)
        rows = r * 64 + gl.arange(0, 64, layout=gl.SliceLayout(1, s2))
        blocks = gl.arange(0, 16, layout=gl.SliceLayout(0, s2))
        sf = gl.load(sa_ptr + l * ssal + kc * 16 + gl.expand_dims(rows * ssam, 1) + gl.expand_dims(blocks, 0))
        # the codes [rows, blocks, words, bytes]: a row's byte at block * 8 + word * 4 + byte
        at = gl.expand_dims(gl.expand_dims(rows * sam, 1) + gl.expand_dims(blocks * 8, 0), 2)
        words = gl.arange(0, 2, layout=gl.SliceLayout(0, gl.SliceLayout(1, s3)))
        at = at + gl.expand_dims(gl.expand_dims(words * 4, 0), 1)
        nbytes = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, cl))))
        at = gl.expand_dims(at, 3) + gl.expand_dims(gl.expand_dims(gl.expand_dims(nbytes, 0), 1), 2)
        vals, bad = _gl_fold_words(gl.load(a_ptr + l * sal + kc * 128 + at), sf, 64, 256)
        out_l: gl.constexpr = gl.BlockedLayout([1, 16], [4, 8], [cl.warps_per_cta[0], 1], [1, 0])
        orow = l * M + r * 64 + gl.arange(0, 64, layout=gl.SliceLayout(1, out_l))
        ocol = kc * 256 + gl.arange(0, 256, layout=gl.SliceLayout(0, out_l))
        _cuda.gdc_wait()  # (the chain: the kernel before, which reads a8 and fa, has ended)
        gl.store(a8_ptr + gl.expand_dims(orow * K, 1) + gl.expand_dims(ocol, 0), gl.convert_layout(vals, out_l))
        gl.store(fa_ptr + unit, gl.max(gl.max(bad, axis=1), axis=0))

    @gluon.jit
    def _gl_fence_global():
        """Generic-proxy global writes and TMA (async-proxy) reads of them, ordered (fence.proxy.async)."""
        gl.inline_asm_elementwise(
            "fence.proxy.async.global; mov.u32 $0, 0;", "=r", [], dtype=gl.int32, is_pure=False, pack=1
        )

    @gluon.jit
    def _gl_wait_a(rdy):
        """A and its flags written: by the first kernel (PDL's wait; a no-op without PDL), and (FUSED_A)
        its ``units`` units counted at ``rdy_ptr`` by the programs that made them."""
        rdy_ptr, units = rdy
        _cuda.gdc_wait()
        waiting = units > 0
        while waiting:
            waiting = gl.atomic_add(rdy_ptr, 0, sem="acquire", scope="gpu") < units
        _gl_fence_global()

    @gluon.jit
    def _gl_fp32_tile(
        a_ptr, sa_ptr, b_ptr, sb_ptr, rows_a, rows_b, k_lo, k_hi, sam, ssam, sbn, ssbn, layout: gl.constexpr
    ):
        """The fallback: the tile's dequantized products summed in fp32 on the CUDA cores, two K (one
        byte) a step. *_ptr at the batch's element 0; rows_a / rows_b: the tile's rows (slices of layout)."""
        acc = gl.zeros([rows_b.shape[0], rows_a.shape[0]], gl.float32, layout=layout)
        two126 = 8.507059173023462e37  # bits (c & 7) << 22 | (c & 8) << 28 are e2m1(c) * 2**-126
        for k in range(k_lo, k_hi, 2):
            pa = gl.load(a_ptr + rows_a * sam + k // 2).to(gl.int32)
            pb = gl.load(b_ptr + rows_b * sbn + k // 2).to(gl.int32)
            sa = gl.load(sa_ptr + rows_a * ssam + k // 16).to(gl.float8e4nv, bitcast=True).to(gl.float32) * two126
            sb = gl.load(sb_ptr + rows_b * ssbn + k // 16).to(gl.float8e4nv, bitcast=True).to(gl.float32) * two126
            for h in gl.static_range(2):
                ca, cb = pa >> (4 * h), pb >> (4 * h)
                va = (((ca & 7) << 22) | ((ca & 8) << 28)).to(gl.float32, bitcast=True) * sa
                vb = (((cb & 7) << 22) | ((cb & 8) << 28)).to(gl.float32, bitcast=True) * sb
                acc += gl.expand_dims(vb, 1) * gl.expand_dims(va, 0)
        return acc

    @gluon.jit
    def _gl_tma_a(a_desc, a_s, bar, row_a, kc, pred):
        """Chunk kc's A tile into one stage of A's ring by TMA, counted by mbarrier ``bar``."""
        mbarrier.expect(bar, a_desc.block_type.nbytes, pred=pred)
        _tma_load(a_desc, [row_a, kc * a_desc.block_type.shape[1]], bar, a_s, pred=pred)

    @gluon.jit
    def _gl_tma_b(b_desc, s_desc, c_s, s_s, bar, n0, kc, pred):
        """Chunk kc's B codes and B scales into one stage of B's ring by TMA, counted by mbarrier ``bar``."""
        mbarrier.expect(bar, b_desc.block_type.nbytes + s_desc.block_type.nbytes, pred=pred)
        _tma_load(b_desc, [n0, kc * b_desc.block_type.shape[1]], bar, c_s, pred=pred)
        _tma_load(s_desc, [n0, kc * s_desc.block_type.shape[1]], bar, s_s, pred=pred)

    @gluon.jit
    def _ws_mma(acc, a_smem, f_smem, bars, n_it, fa_ptrs, fmask, rdy):
        """Warp-specialized I8G, the default partition (one warpgroup): A's flags once A is written
        (_gl_wait_a), then chunk c's wgmma once its A tile and its folded B are in; a chunk's A stage and
        folded-B slot are released when its wgmma is done. Returns the accumulator and A's flags."""
        a_ready, a_empty, _b_ready, _b_empty, f_ready, f_empty = bars
        _gl_wait_a(rdy)
        fa = gl.load(fa_ptrs, mask=fmask, other=0)
        SA: gl.constexpr = a_smem.shape[0]
        SF: gl.constexpr = f_smem.shape[0]
        for c in range(n_it):
            mbarrier.wait(a_ready.index(c % SA), (c // SA) & 1)
            mbarrier.wait(f_ready.index(c % SF), (c // SF) & 1)
            acc = hopper.warpgroup_mma(f_smem.index(c % SF), a_smem.index(c % SA).permute((1, 0)), acc, is_async=True)
            acc = hopper.warpgroup_mma_wait(num_outstanding=1, deps=[acc])  # chunk c - 1's is done
            mbarrier.arrive(a_empty.index((c + SA - 1) % SA), pred=c > 0)
            mbarrier.arrive(f_empty.index((c + SF - 1) % SF), pred=c > 0)
        return hopper.warpgroup_mma_wait(num_outstanding=0, deps=[acc]), fa

    # The worker partitions share one signature (Gluon's rule for warp_specialize); each takes what it needs.
    @gluon.jit
    def _ws_load_a(descs, smems, bars, row_a, n0, c_lo, n_it, rdy, part):
        """Warp-specialized I8G, A's load warp: waits until A is written (_gl_wait_a), then A's chunks
        into A's ring as the wgmmas free its stages."""
        a_desc, _b_desc, _s_desc = descs
        a_smem, _c_smem, _s_smem, _f_smem, _bad_smem = smems
        a_ready, a_empty, _b_ready, _b_empty, _f_ready, _f_empty = bars
        SA: gl.constexpr = a_smem.shape[0]
        _gl_wait_a(rdy)
        for c in range(n_it):
            mbarrier.wait(a_empty.index(c % SA), ((c // SA) & 1) ^ 1)
            _gl_tma_a(a_desc, a_smem.index(c % SA), a_ready.index(c % SA), row_a, c_lo + c, True)

    @gluon.jit
    def _ws_load_b(descs, smems, bars, row_a, n0, c_lo, n_it, rdy, part):
        """Warp-specialized I8G, B's load warp: B's codes and scales of chunk c + B_STAGES once chunk c is
        folded (the first B_STAGES chunks came before the partitions, and before PDL's wait)."""
        _a_desc, b_desc, s_desc = descs
        _a_smem, c_smem, s_smem, _f_smem, _bad_smem = smems
        _a_ready, _a_empty, b_ready, b_empty, _f_ready, _f_empty = bars
        SB: gl.constexpr = c_smem.shape[0]
        for c in range(n_it - SB):
            mbarrier.wait(b_empty.index(c % SB), (c // SB) & 1)
            _gl_tma_b(
                b_desc,
                s_desc,
                c_smem.index(c % SB),
                s_smem.index(c % SB),
                b_ready.index(c % SB),
                n0,
                c_lo + c + SB,
                True,
            )

    @gluon.jit
    def _ws_fold(descs, smems, bars, row_a, n0, c_lo, n_it, rdy, part):
        """Warp-specialized I8G, a fold partition (one warpgroup of two): B's codes to int8 (_gl_fold) into
        the folded-B ring, its flags to bad_smem[part]. BLOCK_N 64: the two take alternate chunks; BLOCK_N
        128: both take every chunk, rows part * 64 .. part * 64 + 63 each (a B stage is freed, and a folded
        buffer filled, when both have arrived)."""
        _a_smem, c_smem, s_smem, f_smem, bad_smem = smems
        _a_ready, _a_empty, b_ready, b_empty, f_ready, f_empty = bars
        SB: gl.constexpr = c_smem.shape[0]
        SF: gl.constexpr = f_smem.shape[0]
        NH: gl.constexpr = c_smem.shape[1] // 64  # 64 rows of B folded at a time (registers)
        BK: gl.constexpr = c_smem.shape[2] * 2
        # a warp reads two whole rows of codes (256 contiguous bytes: two shared-memory wavefronts; four
        # rows of 64 bytes, 128 bytes apart, took four)
        cl: gl.constexpr = gl.BlockedLayout([1, 1, 2, 4], [2, 16, 1, 1], [4, 1, 1, 1], [3, 2, 1, 0])
        c_view = _gl_flat(c_smem, [SB * NH, 64, BK // 2])
        s_view = _gl_flat(s_smem, [SB * NH, 64, BK // 16])
        bad = gl.zeros([64, BK // 16], gl.int32, layout=gl.SliceLayout(2, gl.SliceLayout(3, cl)))
        for c in range(part * (2 - NH), n_it, 3 - NH):  # BLOCK_N 64: chunks part, part + 2, ...; 128: all
            mbarrier.wait(b_ready.index(c % SB), (c // SB) & 1)
            u = c % SB * NH + part * (NH - 1)  # the 64 rows to fold: the stage's, or its half part
            vals, nb = _gl_fold(c_view.index(u), s_view.index(u), cl, 64, BK)
            bad |= nb
            hopper.fence_async_shared()  # the loads above before the next TMA write of this stage
            mbarrier.arrive(b_empty.index(c % SB))
            mbarrier.wait(f_empty.index(c % SF), ((c // SF) & 1) ^ 1)
            if NH == 2 and part == 1:  # (a slice's start is a constant)
                f_smem.index(c % SF).slice(64, 64).store(vals)
            else:
                f_smem.index(c % SF).slice(0, 64).store(vals)
            hopper.fence_async_shared()
            mbarrier.arrive(f_ready.index(c % SF))
        bad_smem.index(part).store(gl.max(bad, axis=1))

    @gluon.jit
    def _i8g_kernel(
        a_desc,
        b_desc,
        s_desc,
        a8_ptr,
        fa_ptr,
        a_ptr,
        sa_ptr,
        b_ptr,
        sb_ptr,
        c_ptr,
        ws_ptr,
        cnt_ptr,
        rdy_ptr,
        M,
        N,
        K,
        sam,
        sal,
        ssam,
        ssal,
        sbn,
        sbl,
        ssbn,
        ssbl,
        scm,
        scl,
        BLOCK_N: gl.constexpr,
        SPLIT_K: gl.constexpr,
        STAGES: gl.constexpr,
        FLAGS: gl.constexpr,
        B_STAGES: gl.constexpr,
        FUSED_A: gl.constexpr,
        CHAIN: gl.constexpr,
    ):
        """C^T tile [BLOCK_N, 128] of batch l and K split pid_k: B decoded in the loop (see above), A from
        a8 [L, M, K] with its flags fa [L, M / 64, K / 256] (_prep_i8_kernel); split-K partials in ws
        (fp32), summed by the last split to arrive (cnt: per-tile counters, reset by it). FUSED_A
        (warp-specialized, every program resident at once): no first kernel; the programs make A's units
        in turn (_gl_prep_a) before their partitions start and count them at rdy_ptr[0], where the
        partitions wait for all of them (_gl_wait_a); the last program to finish resets rdy_ptr[0:2]."""
        BM: gl.constexpr = 128
        BK: gl.constexpr = 256  # a TMA box's rows start on 16 bytes: B's scales, BK / 16 bytes a row
        num_warps: gl.constexpr = 4  # the wgmma warpgroup (the partitions add their own warps)
        F_STAGES: gl.constexpr = 2  # folded-B buffers (four were no faster)
        mma: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BM, 32]
        )
        cl: gl.constexpr = gl.BlockedLayout([1, 1, 2, 4], [4, 8, 1, 1], [num_warps, 1, 1, 1], [3, 2, 1, 0])
        op_sl: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=8, rank=2)
        out_l: gl.constexpr = gl.BlockedLayout([1, 1], [32, 1], [1, num_warps], [0, 1])
        pid_n, pid_m, pid_z = gl.program_id(0), gl.program_id(1), gl.program_id(2)
        l = pid_z // SPLIT_K
        pid_k = pid_z % SPLIT_K
        chunks = K // BK
        c_lo = pid_k * chunks // SPLIT_K
        n_it = (pid_k + 1) * chunks // SPLIT_K - c_lo

        a_smem = gl.allocate_shared_memory(gl.int8, [STAGES, BM, BK], op_sl)
        b_smem = gl.allocate_shared_memory(gl.int8, [F_STAGES, BLOCK_N, BK], op_sl)  # folded B
        row_a, row_b = l * M + pid_m * BM, l * N + pid_n * BLOCK_N  # (TMA: the batches' rows follow each other)
        # descriptors made on the host (_Tma); B's first loads go before PDL's wait
        raw: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=8, rank=2)
        c_smem = gl.allocate_shared_memory(gl.uint8, [B_STAGES, BLOCK_N, BK // 2], raw)
        s_smem = gl.allocate_shared_memory(gl.uint8, [B_STAGES, BLOCK_N, BK // 16], raw)
        ready_a = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        ready_b = gl.allocate_shared_memory(gl.int64, [B_STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(STAGES):
            mbarrier.init(ready_a.index(i), count=1)
        for i in gl.static_range(B_STAGES):
            mbarrier.init(ready_b.index(i), count=1)
        # the slots' "free" barriers, and the folded-B ring's
        empty_a = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty_b = gl.allocate_shared_memory(gl.int64, [B_STAGES, 1], mbarrier.MBarrierLayout())
        ready_f = gl.allocate_shared_memory(gl.int64, [F_STAGES, 1], mbarrier.MBarrierLayout())
        empty_f = gl.allocate_shared_memory(gl.int64, [F_STAGES, 1], mbarrier.MBarrierLayout())
        bad_smem = gl.allocate_shared_memory(gl.int32, [2, 64], gl.SwizzledSharedLayout(1, 1, 1, [0]))
        for i in gl.static_range(STAGES):
            mbarrier.init(empty_a.index(i), count=1)
        for i in gl.static_range(B_STAGES):  # (BLOCK_N 128: both fold warpgroups arrive)
            mbarrier.init(empty_b.index(i), count=BLOCK_N // 64)
        for i in gl.static_range(F_STAGES):
            mbarrier.init(ready_f.index(i), count=BLOCK_N // 64)
            mbarrier.init(empty_f.index(i), count=1)
        hopper.fence_async_shared()
        for i in gl.static_range(B_STAGES):
            _gl_tma_b(b_desc, s_desc, c_smem.index(i), s_smem.index(i), ready_b.index(i), row_b, c_lo + i, i < n_it)
        if CHAIN:  # the next call's first kernel may launch now (its stores wait for this kernel's end)
            _cuda.gdc_launch_dependents()
        units = pid_n * 0  # FUSED_A: A's units, made here by programs pid, pid + nprog, ... (B's loads in flight)
        if FUSED_A:
            nprog = gl.num_programs(0) * gl.num_programs(1) * gl.num_programs(2)
            pid = (pid_z * gl.num_programs(1) + pid_m) * gl.num_programs(0) + pid_n  # the launch order
            units = (gl.num_programs(2) // SPLIT_K) * (M // 64) * (K // 256)
            for u in range(pid, units, nprog):
                _gl_prep_a(a_ptr, sa_ptr, a8_ptr, fa_ptr, u, M, K, sam, sal, ssam, ssal, cl)
            if pid < units:
                _gl_barrier()  # every warp's stores, then one count (release) for them
                _gl_fence_global()
                gl.atomic_add(rdy_ptr, (units - pid + nprog - 1) // nprog, sem="release", scope="gpu")
        # A's flags (64 rows x 256 K each) over this split's K range: FLAGS covers the blocks it touches
        fl: gl.constexpr = gl.BlockedLayout([1, 1], [2, 16], [1, num_warps], [1, 0])
        fk = c_lo * BK // 256 + gl.arange(0, FLAGS, layout=gl.SliceLayout(0, fl))
        fr = l * (M // 64) + pid_m * 2 + gl.arange(0, 2, layout=gl.SliceLayout(1, fl))
        fmask = gl.expand_dims(fk * 256 < (c_lo + n_it) * BK, 0) & gl.expand_dims(fr >= 0, 1)
        fa_ptrs = fa_ptr + gl.expand_dims(fr * (K // 256), 1) + gl.expand_dims(fk, 0)
        acc = gl.zeros([BLOCK_N, BM], gl.int32, layout=mma)
        bars = (ready_a, empty_a, ready_b, empty_b, ready_f, empty_f)
        descs = (a_desc, b_desc, s_desc)
        smems = (a_smem, c_smem, s_smem, b_smem, bad_smem)
        rdy = (rdy_ptr, units)
        wargs = (descs, smems, bars, row_a, row_b, c_lo, n_it, rdy)
        p0 = pid_n * 0  # the fold partitions' parity (worker arguments are values, not constants)
        acc, fa = gl.warp_specialize(
            [
                (_ws_mma, (acc, a_smem, b_smem, bars, n_it, fa_ptrs, fmask, rdy)),
                (_ws_load_a, wargs + (p0,)),  # noqa: RUF005
                (_ws_load_b, wargs + (p0,)),  # noqa: RUF005
                (_ws_fold, wargs + (p0,)),  # noqa: RUF005
                (_ws_fold, wargs + (p0 + 1,)),  # noqa: RUF005
            ],
            [1, 1, 4, 4],
            [24, 24, 152, 152],
        )  # the partitions: warps, and registers a thread
        bl: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [1, num_warps], [1, 0])
        bad = gl.expand_dims(
            gl.maximum(bad_smem.index(0).load(gl.SliceLayout(1, bl)), bad_smem.index(1).load(gl.SliceLayout(1, bl))), 1
        )
        bad_a = gl.max(gl.max(fa, axis=1), axis=0)
        on = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, out_l))
        om = pid_m * BM + gl.arange(0, BM, layout=gl.SliceLayout(0, out_l))
        if (gl.max(gl.max(bad, axis=1), axis=0) | bad_a) > 0:
            res = _gl_fp32_tile(
                a_ptr + l * sal,
                sa_ptr + l * ssal,
                b_ptr + l * sbl,
                sb_ptr + l * ssbl,
                om,
                on,
                c_lo * BK,
                (c_lo + n_it) * BK,
                sam,
                ssam,
                sbn,
                ssbn,
                out_l,
            )
        else:
            res = gl.convert_layout(acc, out_l).to(gl.float32) * 0.25
        c_ptrs = c_ptr + l * scl + gl.expand_dims(om * scm, 0) + gl.expand_dims(on, 1)
        if SPLIT_K == 1:
            gl.store(c_ptrs, res.to(gl.float16))
        else:
            MN = M * N
            ws_ptrs = ws_ptr + (l * SPLIT_K) * MN + gl.expand_dims(om * N, 0) + gl.expand_dims(on, 1)
            gl.store(ws_ptrs + pid_k * MN, res)
            _gl_barrier()
            tile = (l * gl.num_programs(1) + pid_m) * gl.num_programs(0) + pid_n
            old = gl.atomic_add(cnt_ptr + tile, 1, sem="acq_rel", scope="gpu")
            if old == SPLIT_K - 1:
                tot = gl.zeros([BLOCK_N, BM], gl.float32, layout=out_l)
                for sk in range(SPLIT_K):
                    tot += gl.load(ws_ptrs + sk * MN, cache_modifier=".cg")
                gl.store(c_ptrs, tot.to(gl.float16))
                gl.atomic_xchg(cnt_ptr + tile, 0)
        if FUSED_A:  # the last program out resets the count for the next call (no program reads it now)
            _gl_barrier()
            if gl.atomic_add(rdy_ptr + 1, 1, sem="acq_rel", scope="gpu") == nprog - 1:
                gl.atomic_xchg(rdy_ptr, 0)
                gl.atomic_xchg(rdy_ptr + 1, 0)


FP8, INT8, I8G, I8F = 2, 3, 4, 5
# CONFIGS: (M, N, K) -> (BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K, num_warps, num_stages, path), the path one of
# FP8 (A to e4m3 by a first kernel, then the fp8 GEMM), INT8 (both operands to int8 by a first kernel, then
# the int8 GEMM), I8G (A to int8 by a first kernel, B folded in the Gluon GEMM) and I8F (I8G with A made by
# the GEMM's own programs: one launch a call where the grid fits on the SMs at once, else I8G). I8G and I8F
# need Hopper, Gluon, 4 warps and BLOCK_K 256; elsewhere they take INT8. (Operands not laid out as the
# task's generator lays them out, e.g. not on 16 bytes, which TMA and INT8's 32-bit loads need, are copied.)
# The benchmark shapes, tuned by tune_examples.py on the H200: I8F, chained (see the header; A's stages
# results/probes/h200_tuning_nvfp4_i8g_ws_fe1ce8f.json: 4 stages 47.0 and 23.3 us at k=16384 and n=4096,
# 3 stages 48.1 and 24.5, 2 stages 65.4 and 26.0, BLOCK_N 128 60.5 and 35.6). Other shapes: FP8, one dot
# (a fresh fp8 accumulator) per 128 K (with 256 a ranked run was off by 0.25 in one output of 524288:
# results/probes/h200_examples_ranked_nvfp4_bk256_4555d03.json).
CONFIGS = {
    (128, 7168, 16384): (128, 64, 256, 1, 4, 4, I8F),
    (128, 4096, 7168): (128, 64, 256, 2, 4, 4, I8F),
    (128, 7168, 2048): (128, 64, 256, 1, 4, 4, I8F),
}


def _pick(M, N, K, L):
    cfg = CONFIGS.get((M, N, K))
    if cfg is not None:
        return cfg
    BM, BN, BK = 128, 64, 128  # FP8 (M % 128, N % 128 and K % 256 are 0 in this task)
    tiles = (M // BM) * (N // BN) * L
    split = 1
    while tiles * split * 2 <= 264 and K // (split * 2) >= 8 * BK:
        split *= 2
    return (BM, BN, BK, split, 4, 3, FP8)


_BUFFERS = {}
_OPTIONS = ("num_warps", "num_stages", "launch_pdl")  # launch options in a meta dict, not constexprs
# Programmatic dependent launch (Hopper on): the GEMM after a first kernel (_decode_a_kernel,
# _prep_i8_kernel) launches while that kernel runs and waits for it in the kernel (PDL), which hides
# the second launch's latency.
_PDL = not _INTERP and torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9
_HOPPER = not _INTERP and torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9


def _b_stages(a_stages, BN, smem=220 * 1024):
    """I8G: B's ring fills the shared memory that A's ring (a_stages of 128 x 256 int8) and the two
    folded-B buffers (BN x 256 int8 each) leave; a stage holds BN x 128 codes and BN x 16 scales."""
    stages = (smem - a_stages * 128 * 256 - 2 * BN * 256) // (BN * 128 + BN * 16)
    if BN == 64:  # even: a fold warpgroup takes every other chunk, so a stage's chunks stay with one of them
        stages -= stages % 2  # (a wait on its mbarrier then never finds it two phases behind)
    if stages < 2:
        raise ValueError(f"I8G: {a_stages} stages of A leave too little shared memory for two stages of B")
    return stages


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


# Triton's launcher binds and checks every argument on each call, and every tensor view, stride read and
# pointer check adds to it: about 57 us per call on the H200's host, more than the GPU needs for the
# smaller shapes, so the batched protocol (50 calls between two events) measured the host. After the
# first call for a (shapes, strides, device), a plan holds what does not change between such calls:
# the compiled kernels, grids, scalar arguments and scratch pointers; a later call passes only the five
# data pointers (plain ints, which the launcher takes as they are) to each compiled kernel's launcher.
# Even so each launch took 5.5-6.6 us of host time (probes/h200_host_time_nvfp4_direct_launch_a507d71.json),
# its arguments parsed again by Triton's launcher; so the plan also builds each launch's CUDA parameter
# block once (sizes from the kernel's PTX entry), and a call writes the five pointers into it and calls
# libcuda's cuLaunchKernelEx itself: 1-4 us less host time a call than Triton's launchers on the same
# H200, most of what is left being libcuda's own (probes/h200_host_time_nvfp4_libcuda_*.json).
# Nothing is cached by input identity or content.
class _In:
    """An argument slot filled with one of the call's tensors: 0..4 = a, b, sfa, sfb (as uint8) and c;
    ``ptr``: which data pointer."""

    def __init__(self, i):
        self.i = self.ptr = i


_A, _B, _SA, _SB, _C = (_In(i) for i in range(5))


class _Address:
    """What a TensorDescriptor reads of its base tensor: the address and the element type."""

    __slots__ = ("dtype", "ptr")

    def __init__(self, ptr, dtype):
        self.ptr, self.dtype = ptr, dtype

    def data_ptr(self):
        return self.ptr


class _Tma:
    """An argument slot filled with a TMA descriptor (I8G): of one of the call's tensors (``src`` an
    ``_In``) or of a scratch buffer, as rows x cols bytes with a row stride, in boxes of box[0] x box[1],
    128-byte swizzled or not. A descriptor is a function of the address and these values alone, so those
    made for earlier calls are kept by address (a few microseconds of host time each to make)."""

    def __init__(self, src, rows, cols, stride, box, swizzle, dtype=torch.uint8):
        self.src, self.rows, self.cols, self.stride, self.box, self.dtype = src, rows, cols, stride, box, dtype
        self.layout = gl.NVMMASharedLayout(swizzle_byte_width=swizzle, element_bitwidth=8, rank=2)
        self.made = {}
        self.maps, self.buffers, self.first = {}, [], None  # the direct launch's tensor maps (tensor_map)

    def descriptor(self, ptr):
        desc = self.made.get(ptr)
        if desc is None:
            if len(self.made) > 64:
                self.made.clear()
            desc = self.made[ptr] = _TensorDescriptor(
                _Address(ptr, self.dtype), [self.rows, self.cols], [self.stride, 1], list(self.box), self.layout
            )
        return desc

    def value(self, ptrs):
        return self.descriptor(ptrs[self.src.ptr] if isinstance(self.src, _In) else self.src.data_ptr())

    def params(self):
        """The kernel parameters that follow its tensor map (Triton's ABI): the shape, then the strides."""
        return [self.rows, self.cols, self.stride, 1]

    def tensor_map(self, ptrs, meta):
        """The address of a CUtensorMap (128 bytes, 64-aligned) of this slot holding the call's tensor:
        the first encoded by libcuda as Triton's launcher encodes it from the compiled kernel's ``meta``
        (its box: a 256-byte row of a 128-byte swizzle is two boxes; no interleave, L2 promotion of 128
        bytes, no fill); one for another address is a copy with the address replaced
        (cuTensorMapReplaceAddress), kept by address like ``made``, so an address seen before costs
        a dictionary lookup."""
        ptr = ptrs[self.src.ptr] if isinstance(self.src, _In) else self.src.data_ptr()
        at = self.maps.get(ptr)
        if at is not None:
            return at
        if len(self.maps) >= 256:  # (the driver copies a map's bytes when a launch is made)
            self.maps.clear()
            self.buffers.clear()
        buf = (ctypes.c_uint8 * 192)()
        at = (ctypes.addressof(buf) + 63) // 64 * 64
        if self.first is None:
            u64, u32 = ctypes.c_uint64, ctypes.c_uint32
            rows, cols = meta["block_size"]
            err = _libcuda().cuTensorMapEncodeTiled(
                at,
                {8: 10, 9: 8, 10: 9}.get(meta["elem_type"], meta["elem_type"]),
                2,
                ptr,
                (u64 * 2)(self.cols, self.rows),
                (u64 * 1)(self.stride * meta["elem_size"]),
                (u32 * 2)(cols, rows),
                (u32 * 2)(1, 1),
                0,
                meta["swizzle"],
                2,
                0,
            )
            if err:
                raise RuntimeError(f"cuTensorMapEncodeTiled returned CUresult {err}")
            self.first = (buf, at)
        else:
            ctypes.memmove(at, self.first[1], 128)
            err = _libcuda().cuTensorMapReplaceAddress(at, ptr)
            if err:
                raise RuntimeError(f"cuTensorMapReplaceAddress returned CUresult {err}")
        self.maps[ptr] = at
        self.buffers.append(buf)
        return at


_PLANS = {}
_FAST = [not _INTERP]
try:
    from triton.runtime import driver as _driver
except Exception:
    _driver = None


def _path(M, N, K, L, strides):
    """The call's config with its path resolved for this machine and these operands: (BLOCK_M, BLOCK_N,
    BLOCK_K, SPLIT_K, num_warps, num_stages, path), path FP8, INT8 or I8G, and whether I8G makes A itself
    (I8F). (The Gluon kernel's tiles have 128 rows of A whatever BLOCK_M.)"""
    (_, _, _), (sbn, sbk, sbl), _, (ssbn, ssbk, ssbl), _ = strides
    BM, BN, BK, SPLIT, nw, ns, a_dec = _pick(M, N, K, L)
    fused = a_dec == I8F
    if fused:
        a_dec = I8G
    # I8G: descriptors over all batches (a batch's rows follow the last one's), 16-byte aligned rows
    tma = (
        BK == 256
        and sbk == ssbk == 1
        and all(x % 16 == 0 for x in (sbn, ssbn, sbl, ssbl))
        and (L == 1 or (sbl == N * sbn and ssbl == N * ssbn))
    )
    if a_dec == I8G and not (_GLUON and _HOPPER and tma and nw == 4 and BN in (64, 128)):
        a_dec, BK, nw, fused = INT8, 256, 8, False  # (the Gluon kernel is written for Hopper's wgmma and TMA)
    if a_dec in (INT8, I8G) and K > 131072:  # int32 holds K * 120 * 120 up to K = 149130; FP8 keeps 128 K a dot
        a_dec, BK, nw, fused = FP8, 128, 4, False
    return BM, BN, BK, SPLIT, nw, ns, a_dec, fused


def _launches(M, N, K, L, strides, dev):
    """The call's kernel launches as (kernel, grid, args, meta); ``strides``: a, b, sfa, sfb, c as uint8
    views (elements); an ``_In`` argument stands for one of the call's tensors (each _fits)."""
    (sam, _, sal), (sbn, _, sbl), (ssam, _, ssal), (ssbn, _, ssbl), (scm, _, scl) = strides
    BM, BN, BK, SPLIT, nw, ns, a_dec, fused = _path(M, N, K, L, strides)
    grid = (N // BN, M // BM, L * SPLIT)
    # I8F: no first kernel where every program is resident at once (one an SM), as they wait for each
    # other's units of A; a dependent launch of the call before's GEMM (the chain)
    fused = fused and grid[0] * grid[1] * grid[2] <= torch.cuda.get_device_properties(dev).multi_processor_count
    out, a8_arg, bad_arg, b8_arg, fb_arg, pdl = [], _C, _C, _C, _C, _PDL
    if a_dec in (INT8, I8G):  # the operands (I8G: A alone) folded into int8 once, with their bad-scale flags
        a8_arg = _buffer(dev, "a_i8", L * M * K, torch.int8)
        bad_arg = _buffer(dev, "a_i8_bad", L * (M // 64) * (K // 256), torch.int32)
        if a_dec == INT8:
            b8_arg = _buffer(dev, "b_i8", L * N * K, torch.int8)
            fb_arg = _buffer(dev, "b_i8_bad", L * (N // 64) * (K // 256), torch.int32)
    chain = int(pdl and a_dec == I8G)  # I8G's first launch: a dependent launch of the call before's GEMM
    if a_dec in (INT8, I8G) and not fused:
        out.append(
            (
                _prep_i8_kernel,
                (M // 64 + (N // 64 if a_dec == INT8 else 0), K // 256, L),
                [
                    _A,
                    _B,
                    _SA,
                    _SB,
                    a8_arg,
                    b8_arg,
                    bad_arg,
                    fb_arg,
                    M,
                    N,
                    K,
                    sam,
                    sal,
                    sbn,
                    sbl,
                    ssam,
                    ssal,
                    ssbn,
                    ssbl,
                ],
                {
                    "BLOCK_R": 64,
                    "BLOCK_K": 256,
                    "INTERP": _INTERP,
                    "PDL": pdl,
                    "WAIT": chain,
                    "num_warps": 8 if a_dec == I8G else 4,  # (A alone: 8 warps, 0.3 us faster)
                    "num_stages": 1,
                    **({"launch_pdl": True} if chain else {}),
                },
            )
        )
    elif a_dec == FP8:  # A decoded once to e4m3, with its bad-scale flags, in a first kernel
        a8_arg = _buffer(dev, "a_fp8", L * M * K, torch.float8_e4m3fn)
        bad_arg = _buffer(dev, "a_fp8_bad", L * (M // 64) * (K // 256), torch.int32)
        out.append(
            (
                _decode_a_kernel,
                (M // 64, K // 256, L),
                [_A, _SA, a8_arg, bad_arg, M, K, sam, sal, ssam, ssal],
                {"BLOCK_R": 64, "BLOCK_K": 256, "PDL": pdl, "num_warps": 4, "num_stages": 1},
            )
        )
    ws, cnt = _scratch(dev, L * SPLIT * M * N, grid[0] * grid[1] * L) if SPLIT > 1 else (_C, _C)
    if a_dec == I8G:  # FLAGS: A's flag blocks (256 K) that one split's chunks (BK) can touch
        flags = triton.next_power_of_2(-(-K // (BK * SPLIT)) * BK // 256 + 2)
        descs = [
            _Tma(a8_arg, L * M, K, K, (128, BK), 128, torch.int8),
            _Tma(_B, L * N, K // 2, sbn, (BN, BK // 2), 0),
            _Tma(_SB, L * N, K // 16, ssbn, (BN, BK // 16), 0),
        ]
        rdy = _buffer(dev, "a_ready", 2, torch.int32)  # (FUSED_A: A's units made, programs done)
        out.append(
            (
                _i8g_kernel,
                grid,
                [
                    *descs,
                    a8_arg,
                    bad_arg,
                    _A,
                    _SA,
                    _B,
                    _SB,
                    _C,
                    ws,
                    cnt,
                    rdy,
                    M,
                    N,
                    K,
                    sam,
                    sal,
                    ssam,
                    ssal,
                    sbn,
                    sbl,
                    ssbn,
                    ssbl,
                    scm,
                    scl,
                ],
                {
                    "BLOCK_N": BN,
                    "SPLIT_K": SPLIT,
                    "STAGES": ns,
                    "FLAGS": flags,
                    "B_STAGES": _b_stages(ns, BN),
                    "FUSED_A": int(fused),
                    "CHAIN": chain,
                    "num_warps": nw,
                    **({"launch_pdl": True} if pdl else {}),
                },
            )
        )
        return out
    out.append(
        (
            _nvfp4_kernel,
            grid,
            [
                _A,
                a8_arg,
                bad_arg,
                _B,
                b8_arg,
                fb_arg,
                _SA,
                _SB,
                _C,
                ws,
                cnt,
                M,
                N,
                K,
                sam,
                sal,
                sbn,
                sbl,
                ssam,
                ssal,
                ssbn,
                ssbl,
                scm,
                scl,
            ],
            {
                "BLOCK_M": BM,
                "BLOCK_N": BN,
                "BLOCK_K": BK,
                "SPLIT_K": SPLIT,
                "INTERP": _INTERP,
                "A_DEC": a_dec,
                "PDL": pdl,
                "num_warps": nw,
                "num_stages": ns,
                **({"launch_pdl": True} if pdl else {}),
            },
        )
    )
    return out


class _LaunchAttr(ctypes.Structure):  # CUlaunchAttribute: an id, padding, a 64-byte value union
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int * 16)]


class _LaunchConfig(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [
        ("grid", ctypes.c_uint * 3),
        ("block", ctypes.c_uint * 3),
        ("shared", ctypes.c_uint),
        ("stream", ctypes.c_void_p),
        ("attrs", ctypes.POINTER(_LaunchAttr)),
        ("num_attrs", ctypes.c_uint),
    ]


_PDL_ATTR = 6  # CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
_PTX_CTYPES = {
    "u64": ctypes.c_uint64,
    "b64": ctypes.c_uint64,
    "s64": ctypes.c_int64,
    "u32": ctypes.c_uint32,
    "b32": ctypes.c_uint32,
    "s32": ctypes.c_int32,
    "f32": ctypes.c_float,
    "f64": ctypes.c_double,
    "u8": ctypes.c_uint8,
    "b8": ctypes.c_uint8,
    "s8": ctypes.c_int8,
    "u16": ctypes.c_uint16,
    "b16": ctypes.c_uint16,
    "s16": ctypes.c_int16,
}


_LIBCUDA = []


def _libcuda():
    """libcuda (the library torch has loaded already), its functions' types set once."""
    if not _LIBCUDA:
        lib = ctypes.CDLL("libcuda.so.1")
        lib.cuLaunchKernelEx.argtypes = [ctypes.c_void_p] * 4
        lib.cuTensorMapEncodeTiled.argtypes = (
            [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p]
            + [ctypes.c_void_p] * 4
            + [ctypes.c_int] * 4
        )
        lib.cuTensorMapReplaceAddress.argtypes = [ctypes.c_void_p] * 2
        for fn in (lib.cuLaunchKernelEx, lib.cuTensorMapEncodeTiled, lib.cuTensorMapReplaceAddress):
            fn.restype = ctypes.c_int
        _LIBCUDA.append(lib)
    return _LIBCUDA[0]


def _direct_step(h, grid, values, slots):
    """One launch of compiled kernel ``h`` by cuLaunchKernelEx with a parameter block made once:
    (config, function, parameter array, [(parameter, data-pointer index)], [(parameter index, _Tma)]);
    None unless the kernel's PTX entry has exactly its non-constexpr arguments (a TMA descriptor: its
    128-byte tensor map, then its shape and strides) and two scratch pointers, both unused (Triton's ABI:
    global scratch, which a kernel that needs it gets from Triton's launcher instead, and profiler
    scratch)."""
    md, sig = h.metadata, list(getattr(getattr(h, "src", None), "signature", {}).values())
    entry = re.search(r"\.entry\s+" + re.escape(h.name) + r"\s*\((.*?)\)", h.asm["ptx"], re.S)
    if (
        entry is None
        or len(sig) != len(values)
        or getattr(md, "num_ctas", 1) != 1
        or getattr(md, "profile_scratch_size", 0)
        or getattr(md, "global_scratch_size", 0)
        or getattr(md, "launch_cooperative_grid", False)
        or md.shared > 227 * 1024
    ):
        return None
    kept = []  # (argument position, value) per kernel parameter; a descriptor's map: value None
    for pos, (v, t) in enumerate(zip(values, sig)):
        if t != "constexpr":
            kept += [(pos, None)] + [(pos, x) for x in v.params()] if isinstance(v, _Tma) else [(pos, v)]
    types = [
        "map" if d.rstrip().endswith("[128]") else re.match(r"\s*\.param\s+\.(\w+)", d).group(1)
        for d in entry.group(1).split(",")
    ]
    if (
        len(types) != len(kept) + 2
        or types[-2:] != ["u64"] * 2
        or any((t == "map") != (v is None) or (t != "map" and t not in _PTX_CTYPES) for t, (_, v) in zip(types, kept))
    ):
        return None
    objs = [None if t == "map" else _PTX_CTYPES[t](v) for t, (_, v) in zip(types, kept)] + [
        ctypes.c_uint64(0),
        ctypes.c_uint64(0),
    ]
    params = (ctypes.c_void_p * len(objs))(*[0 if o is None else ctypes.addressof(o) for o in objs])
    metas = getattr(md, "tensordesc_meta", None) or []
    maps = [(n, values[pos]) for n, (pos, v) in enumerate(kept) if v is None]
    if len(metas) != len(maps):
        return None
    maps = [(n, tma, meta) for (n, tma), meta in zip(maps, metas)]
    where = {pos: n for n, (pos, _) in enumerate(kept)}
    attr = _LaunchAttr(id=_PDL_ATTR)
    attr.value[0] = 1
    cfg = _LaunchConfig(
        grid=(ctypes.c_uint * 3)(*grid),
        block=(ctypes.c_uint * 3)(32 * md.num_warps, 1, 1),
        shared=md.shared,
        attrs=ctypes.pointer(attr),
        num_attrs=int(bool(md.launch_pdl)),
    )
    return cfg, h.function, params, [(objs[where[pos]], i) for pos, i in slots], maps, (objs, attr)


def _plan(launches, handles, dev):
    """A function of the five data pointers that replays ``launches`` through the compiled kernels:
    by cuLaunchKernelEx with parameter blocks made here (``run.direct``), or else through the kernels'
    own launchers; None where this Triton's kernels expose neither."""
    if _driver is None or any(
        getattr(h, n, None) is None for h in handles for n in ("run", "function", "packed_metadata")
    ):
        return None
    steps = []
    for (_, grid, args, meta), h in zip(launches, handles):
        template = [a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args]
        slots = [(pos, a.ptr) for pos, a in enumerate(args) if isinstance(a, _In)]
        consts = [v for k, v in meta.items() if k not in _OPTIONS]
        steps.append((h, grid, template, slots, consts))
    keep = [a for _, _, args, _ in launches for a in args if isinstance(a, torch.Tensor)]  # scratch stays alive
    get_stream, index = _driver.active.get_current_stream, dev.index
    try:
        launch = _libcuda().cuLaunchKernelEx
        direct = [
            _direct_step(h, grid, [0 if isinstance(a, _In) else a for a in template] + consts, slots)
            for h, grid, template, slots, consts in steps
        ]
    except Exception:
        direct = [None]
    if all(d is not None for d in direct):
        for _, _, params, _, maps, _ in direct:  # a scratch buffer's map: the same on every call
            for n, tma, meta in maps:
                if not isinstance(tma.src, _In):
                    params[n] = tma.tensor_map(None, meta)
        configs = [
            (
                d[0],
                ctypes.addressof(d[0]),
                d[1],
                d[2],
                ctypes.addressof(d[2]),
                d[3],
                [m for m in d[4] if isinstance(m[1].src, _In)],
            )
            for d in direct
        ]

        def run(ptrs):
            stream = get_stream(index)
            for cfg, cfg_at, function, params, params_at, slots, maps in configs:
                cfg.stream = stream
                for obj, i in slots:
                    obj.value = ptrs[i]
                for n, tma, meta in maps:
                    params[n] = tma.tensor_map(ptrs, meta)
                err = launch(cfg_at, function, params_at, None)
                if err:
                    raise RuntimeError(f"cuLaunchKernelEx returned CUresult {err}")

        run.direct = direct
    else:

        def run(ptrs):
            stream = get_stream(index)
            for h, (g0, g1, g2), template, slots, consts in steps:
                args = [a.value(ptrs) if isinstance(a, _Tma) else a for a in template]
                for pos, i in slots:
                    args[pos] = ptrs[i]
                h.run(g0, g1, g2, stream, h.function, h.packed_metadata, None, None, None, *args, *consts)

        run.direct = None
    run.keep, run.steps = keep, steps  # (steps: for scripts/validation/host_time.py)
    return run


def _fits(t):
    """Whether t ([rows, cols, L]) is laid out as every path reads it (and as the task's generate_input
    makes it): starts on 16 bytes (TMA; INT8's 32-bit loads; the kernels are compiled for 16-byte aligned
    pointers), unit column stride, rows and batches 16 bytes apart."""
    (sr, sc, sl), e = t.stride(), t.element_size()
    return t.data_ptr() % 16 == 0 and sc == 1 and sr * e % 16 == 0 and sl * e % 16 == 0


def _packed_like(t):
    """An empty tensor shaped as t, laid out as generate_input lays the inputs out (order L, rows, cols)."""
    rows, cols, L = t.shape
    return torch.empty((L, rows, cols), dtype=t.dtype, device=t.device).permute(1, 2, 0)


def _on_copies(data):
    """The call on copies of the operands (and into a copy of c) that _fits does not accept; a harness never
    hands such tensors (generate_input's are fresh allocations), so this costs nothing on the benchmark."""
    a, b, sfa, sfb, sfa_p, sfb_p, c = data
    ins = [
        t if _fits(t) else _packed_like(t.view(torch.uint8)).copy_(t.view(torch.uint8)).view(t.dtype)
        for t in (a, b, sfa, sfb)
    ]
    out = c if _fits(c) else _packed_like(c)
    copies = (*ins, sfa_p, sfb_p, out)
    # (copies that still do not fit, of shapes this task never has: launched as they are, without a plan)
    (custom_kernel if all(_fits(t) for t in (*ins, out)) else _first_call)(copies)
    if out is not c:
        c.copy_(out)
    return c


def custom_kernel(data):
    a, b, sfa, sfb, _, _, c = data
    ptrs = (a.data_ptr(), b.data_ptr(), sfa.data_ptr(), sfb.data_ptr(), c.data_ptr())
    # a plan exists only for strides that _fits (they are in its key); the addresses are checked here
    if _FAST[0] and (ptrs[0] | ptrs[1] | ptrs[2] | ptrs[3] | ptrs[4]) % 16 == 0:
        plan = _PLANS.get(
            (a.shape, b.shape, a.stride(), b.stride(), sfa.stride(), sfb.stride(), c.stride(), a.get_device())
        )
        if plan is not None:
            try:
                plan(ptrs)
                return c
            except Exception:
                _FAST[0] = False
    if not all(_fits(t) for t in (a, b, sfa, sfb, c)):
        return _on_copies(data)
    return _first_call(data)


def _first_call(data):
    """The call through Triton's launchers (compiling the kernels the first time), then its launch plan."""
    a, b, sfa, sfb, _, _, c = data
    ptrs = (a.data_ptr(), b.data_ptr(), sfa.data_ptr(), sfb.data_ptr(), c.data_ptr())
    key = (a.shape, b.shape, a.stride(), b.stride(), sfa.stride(), sfb.stride(), c.stride(), a.get_device())
    M, KH, L = a.shape
    views = (a.view(torch.uint8), b.view(torch.uint8), sfa.view(torch.uint8), sfb.view(torch.uint8), c)
    launches = _launches(M, b.shape[0], KH * 2, L, [v.stride() for v in views], a.device)
    handles = [
        kernel[grid](
            *[views[x.i] if isinstance(x, _In) else x.value(ptrs) if isinstance(x, _Tma) else x for x in args], **meta
        )
        for kernel, grid, args, meta in launches
    ]
    if _FAST[0] and all(_fits(t) for t in (a, b, sfa, sfb, c)):
        _PLANS[key] = _plan(launches, handles, a.device)
    return c
