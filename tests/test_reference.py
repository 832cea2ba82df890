"""fp4_reference numerics vs an independent, slow, per-value implementation of the FP4 formats and the MXFP4
quantization as fp4_reference/fp4.py and mxfp4.py state them (docs/tasks/mxfp4_mm.md)."""

import math
import struct

import numpy as np
import pytest
import torch

import fp4_reference as R

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


# ---------------------------------------------------------------- slow, independent spec implementation


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def bits_f32(b: int) -> float:
    return struct.unpack("<f", struct.pack("<I", b & 0xFFFFFFFF))[0]


def slow_e2m1(v: float) -> int:
    """Nearest e2m1 magnitude, ties to the even code, saturating at 6; sign bit always kept."""
    mag = abs(v)
    if mag >= 6.0:
        return 7 | (8 if math.copysign(1.0, v) < 0 else 0)
    best = min(range(8), key=lambda c: (abs(E2M1[c] - mag), c % 2))
    return best | (8 if math.copysign(1.0, v) < 0 else 0)


def slow_scale(amax: float) -> int:
    r = bits_f32((f32_bits(amax) + 0x200000) & 0xFF800000)
    if r == 0.0:
        s = -127
    elif math.isinf(r):
        s = 127
    else:
        s = math.floor(math.log2(r)) - 2
    return max(-127, min(127, s))


def slow_quantize(x: np.ndarray):
    """x float32 [M, K] -> (codes [M, K] ints, scale bytes [M, K/32]) by loops."""
    m, k = x.shape
    codes = np.zeros((m, k), dtype=np.int64)
    scales = np.zeros((m, k // 32), dtype=np.int64)
    for i in range(m):
        for b in range(k // 32):
            blk = [float(v) for v in x[i, b * 32 : (b + 1) * 32]]
            s = slow_scale(max(abs(v) for v in blk))
            scales[i, b] = s + 127
            for j, v in enumerate(blk):
                scaled = float(np.float32(v * 2.0**-s))  # exact product, one float32 rounding
                codes[i, b * 32 + j] = slow_e2m1(scaled)
    return codes, scales


def slow_pack(codes: np.ndarray) -> np.ndarray:
    m, k = codes.shape
    out = np.zeros((m, k // 2), dtype=np.uint8)
    for i in range(m):
        for j in range(k // 2):
            out[i, j] = codes[i, 2 * j] | (codes[i, 2 * j + 1] << 4)
    return out


def slow_e4m3(byte: int) -> float:
    sign = -1.0 if byte & 0x80 else 1.0
    e, mant = (byte >> 3) & 0xF, byte & 7
    if e == 0xF and mant == 7:
        return float("nan")
    if e == 0:
        return sign * mant / 8 * 2.0**-6
    return sign * (1 + mant / 8) * 2.0 ** (e - 7)


def check_quant(x: torch.Tensor):
    packed, scales = R.quantize_mxfp4(x)
    codes, want_scales = slow_quantize(x.float().numpy())
    assert packed.dtype == torch.uint8 and scales.dtype == torch.uint8
    np.testing.assert_array_equal(scales.numpy(), want_scales)
    np.testing.assert_array_equal(R.unpack_fp4(packed).numpy(), codes)
    np.testing.assert_array_equal(packed.numpy(), slow_pack(codes))
    # dequantization: value = e2m1(code) * 2**(byte - 127), computed in float64 here
    deq = R.dequantize_mxfp4(packed, scales).numpy()
    mags = np.array(E2M1 + [-v for v in E2M1])
    want = mags[codes] * np.exp2(np.repeat(want_scales, 32, axis=1).astype(np.float64) - 127)
    with np.errstate(over="ignore"):
        want = want.astype(np.float32)  # float32 result: 6 * 2**127 overflows to inf there too
    np.testing.assert_array_equal(deq, want)


# ---------------------------------------------------------------- e2m1 codec


@pytest.mark.parametrize(
    "value,code",
    [
        (0.25, 0),
        (0.75, 2),
        (1.25, 2),
        (1.75, 4),
        (2.5, 4),
        (3.5, 6),
        (5.0, 6),
        (-0.25, 8),
        (-0.75, 10),
        (-1.25, 10),
        (-1.75, 12),
        (-2.5, 12),
        (-3.5, 14),
        (-5.0, 14),
        (0.0, 0),
        (-0.0, 8),
        (-0.1, 8),
        (6.0, 7),
        (6.5, 7),
        (1e30, 7),
        (-7.0, 15),
        (0.26, 1),
        (4.99, 6),
        (5.01, 7),
        (0.74, 1),
        (1.74, 3),
        (3.49, 5),
    ],
)
def test_encode_e2m1_ties_and_saturation(value, code):
    assert R.encode_e2m1(torch.tensor([value])).item() == code
    assert slow_e2m1(value) == code  # the slow oracle agrees with the hand table


def test_decode_e2m1_all_codes():
    got = R.decode_e2m1(torch.arange(16)).tolist()
    assert got == E2M1 + [-v for v in E2M1]
    assert math.copysign(1.0, got[8]) < 0  # code 8 is -0


def test_encode_decode_roundtrip_all_codes():
    codes = torch.arange(16, dtype=torch.uint8)
    assert torch.equal(R.encode_e2m1(R.decode_e2m1(codes)), codes)


def test_pack_hand_example_and_roundtrip():
    codes = torch.tensor([[1, 2, 3, 4, 15, 0]], dtype=torch.uint8)
    packed = R.pack_fp4(codes)
    assert packed.tolist() == [[0x21, 0x43, 0x0F]]
    assert torch.equal(R.unpack_fp4(packed), codes)
    g = torch.Generator().manual_seed(3)
    rnd = torch.randint(0, 16, (5, 7, 64), generator=g, dtype=torch.uint8)
    assert torch.equal(R.unpack_fp4(R.pack_fp4(rnd)), rnd)
    with pytest.raises(ValueError):
        R.pack_fp4(torch.zeros(3, dtype=torch.uint8))


def test_byte_views():
    u = torch.arange(24, dtype=torch.uint8).reshape(2, 3, 4)
    for dt in (torch.float4_e2m1fn_x2, torch.float8_e8m0fnu, torch.float8_e4m3fn):
        v = R.from_uint8(u, dt).permute(2, 0, 1)
        assert v.dtype == dt
        back = R.as_uint8(v)
        assert back.dtype == torch.uint8 and back.data_ptr() == u.data_ptr()
        assert torch.equal(back, u.permute(2, 0, 1))
    with pytest.raises(TypeError):
        R.as_uint8(torch.zeros(2, dtype=torch.float32))


def test_e8m0_to_float():
    got = R.e8m0_to_float(torch.tensor([0, 1, 126, 127, 128, 254, 255], dtype=torch.uint8)).tolist()
    assert got[:6] == [2.0**-127, 2.0**-126, 0.5, 1.0, 2.0, 2.0**127]
    assert math.isnan(got[6])
    as_e8 = torch.tensor([127], dtype=torch.uint8).view(torch.float8_e8m0fnu)
    assert R.e8m0_to_float(as_e8).item() == 1.0


def test_e4m3_to_float_all_bytes():
    got = R.e4m3_to_float(torch.arange(256, dtype=torch.uint8)).double().tolist()
    for byte, g in enumerate(got):
        want = slow_e4m3(byte)
        assert (math.isnan(g) and math.isnan(want)) or g == want, byte
    assert got[0x38] == 1.0 and got[0x40] == 2.0 and got[0x44] == 3.0 and got[0x7E] == 448.0


# ---------------------------------------------------------------- MXFP4 quantization, bit-exact


def test_lookup_tables_are_built_once_per_device_and_never_handed_out():
    """The tables are cached (the harness computes a reference per timed output; building them took
    host-to-device copies each time), and every decode returns new memory: changing a result must not
    change the next one."""
    from fp4_reference import fp4

    codes = torch.arange(16, dtype=torch.uint8)
    packed = torch.arange(256, dtype=torch.uint8).reshape(2, 128)
    scales = torch.arange(256, dtype=torch.uint8)
    first = [R.decode_e2m1(codes), R.decode_fp4_packed(packed), R.e8m0_to_float(scales), R.e4m3_to_float(scales)]
    before = {t: t.cache_info().misses for t in (fp4._e2m1_table, fp4._pair_table, fp4._e8m0_table, fp4._e4m3_table)}
    for out in first:
        out.fill_(123.0)
    again = [R.decode_e2m1(codes), R.decode_fp4_packed(packed), R.e8m0_to_float(scales), R.e4m3_to_float(scales)]
    assert all(not torch.equal(a, f) for a, f in zip(again, first))
    assert again[0].tolist()[:8] == [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    assert {t: t.cache_info().misses for t in before} == before


def test_quantize_random_matches_slow():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 128, generator=g)
    x[1] *= 1e-3
    x[2] *= 1e4
    x[3] = torch.randn(128, generator=g, dtype=torch.bfloat16).float() * 37.0
    check_quant(x)


def test_quantize_bf16_input_matches_slow():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 64, generator=g, dtype=torch.bfloat16)
    packed, scales = R.quantize_mxfp4(x)
    p2, s2 = R.quantize_mxfp4(x.float())
    assert torch.equal(packed, p2) and torch.equal(scales, s2)
    check_quant(x.float())


def _block(values):
    vals = list(values) + [0.0] * (32 - len(values))
    return vals[:32]


def test_quantize_edge_cases_match_slow():
    ties = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
    rows = [
        _block([6.0] + ties + [-t for t in ties]),  # amax 6 -> s = 0: ties land exactly
        _block([6.8, 6.0, -6.5, 6.1, 5.0, 0.1]),  # |x| >= 6 after scaling saturates
        _block([7.0, 3.5, 1.75, 0.875, -0.4375]),  # mantissa 0.75 bumps amax to 8 (s = 1)
        _block([-7.0, 7.5, 0.5]),  # mantissa > 0.75, negative max
        _block([5.9999, 2.9999, 3.0001]),  # mantissa just below 0.75 (no bump)
        _block([0.0] * 32),  # all-zero block -> byte 0
        _block([-0.0] * 32),  # all -0 -> codes 8, byte 0
        _block([-0.0, 0.0, -1e-45, 1e-45, -0.1 * 1e-38]),  # subnormals, signed zeros
        _block([1e-40, -3e-40, 2.0**-130 * 3]),  # subnormal amax (scale clamped to -127)
        _block([2.0**-127 * 6, 2.0**-126 * 1.75]),  # amax rounding into 2**-126 (s -> -128 -> -127)
        _block([3e38, -1.5e38, 1e38, 3.3e38]),  # amax rounds to 2**128 (inf): s = 127
        _block([1e38, 5e37, -2.5e37]),  # huge but not clamped
        _block([2.0**20 * 1.5, 2.0**17, -(2.0**18) * 1.25]),
        _block([float(v) for v in range(-16, 16)]),
    ]
    x = torch.tensor(rows, dtype=torch.float32).reshape(7, 64)
    check_quant(x)


@pytest.mark.parametrize(
    "amax,byte",
    [
        (6.0, 127),
        (4.0, 127),
        (5.9999, 127),
        (6.0001, 127),
        (6.9999, 127),
        (7.0, 128),
        (8.0, 128),
        (1.0, 125),
        (0.0, 0),
        (1e-45, 0),
        (3.3e38, 254),
        (float("inf"), 254),
        (2.0**-120, 5),
        (2.0**-124, 1),
        (2.0**-125, 0),
    ],
)
def test_scale_byte_table(amax, byte):
    x = torch.zeros(1, 32)
    x[0, 5] = amax
    _, scales = R.quantize_mxfp4(x)
    assert scales.item() == byte
    if math.isfinite(amax):
        assert slow_scale(amax) + 127 == byte


def test_quantize_rejects_bad_k():
    with pytest.raises(ValueError):
        R.quantize_mxfp4(torch.zeros(2, 48))


def test_quantize_batched_leading_dims():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, 64, generator=g)
    p, s = R.quantize_mxfp4(x)
    p2, s2 = R.quantize_mxfp4(x.reshape(6, 64))
    assert p.shape == (2, 3, 32) and s.shape == (2, 3, 2)
    assert torch.equal(p.reshape(6, 32), p2) and torch.equal(s.reshape(6, 2), s2)


# ---------------------------------------------------------------- NVFP4 dequantization


def test_dequantize_nvfp4_matches_slow():
    g = torch.Generator().manual_seed(7)
    packed = torch.randint(0, 256, (3, 16), generator=g, dtype=torch.uint8)  # K = 32
    scales = torch.tensor([[0x38, 0x40], [0x44, 0x00], [0x7E, 0x31]], dtype=torch.uint8)
    got = R.dequantize_nvfp4(packed.view(torch.float4_e2m1fn_x2), scales.view(torch.float8_e4m3fn))
    assert got.dtype == torch.float32 and got.shape == (3, 32)
    for r in range(3):
        for j in range(32):
            byte = int(packed[r, j // 2])
            code = byte & 0xF if j % 2 == 0 else byte >> 4
            want = (E2M1[code & 7] * (-1 if code & 8 else 1)) * slow_e4m3(int(scales[r, j // 16]))
            assert got[r, j].item() == want, (r, j)


def test_dequantize_nvfp4_batched_strided():
    g = torch.Generator().manual_seed(8)
    raw = torch.randint(0, 256, (2, 4, 16), generator=g, dtype=torch.uint8)
    sc = torch.randint(0, 4, (2, 4, 2), generator=g).float().to(torch.float8_e4m3fn)
    batched = R.dequantize_nvfp4(raw, sc)
    for l in range(2):
        assert torch.equal(batched[l], R.dequantize_nvfp4(raw[l], sc[l]))
    with pytest.raises(ValueError):
        R.dequantize_nvfp4(raw, sc[..., :1])


# ---------------------------------------------------------------- GEMM references vs float64


def test_mxfp4_mm_reference_vs_float64():
    g = torch.Generator().manual_seed(11)
    a = torch.randn(8, 256, generator=g, dtype=torch.bfloat16)
    b = torch.randn(32, 256, generator=g, dtype=torch.bfloat16)
    bq, bs = R.quantize_mxfp4(b)
    out = R.mxfp4_mm_reference(a, bq, bs)
    assert out.dtype == torch.bfloat16 and out.shape == (8, 32)
    codes_a, sa = slow_quantize(a.float().numpy())
    mags = np.array(E2M1 + [-v for v in E2M1])
    a64 = mags[codes_a] * np.exp2(np.repeat(sa, 32, axis=1) - 127.0)
    b64 = R.dequantize_mxfp4(bq, bs).double().numpy()
    exact = a64 @ b64.T
    # bf16 rounding (half an ulp: at most 2**-8 relative) plus float32 accumulation slack
    slack = 2.0**-8 * np.abs(exact) + 1e-5 * (np.abs(a64) @ np.abs(b64).T)
    assert np.all(np.abs(out.double().numpy() - exact) <= slack)


def test_mxfp4_mm_reference_ignores_scale_padding():
    g = torch.Generator().manual_seed(12)
    a = torch.randn(4, 64, generator=g, dtype=torch.bfloat16)
    b = torch.randn(16, 64, generator=g, dtype=torch.bfloat16)
    bq, bs = R.quantize_mxfp4(b)
    padded = torch.full((256, 8), 255, dtype=torch.uint8)
    padded[:16, :2] = bs
    assert torch.equal(R.mxfp4_mm_reference(a, bq, padded), R.mxfp4_mm_reference(a, bq, bs))


def test_nvfp4_gemm_reference_vs_float64():
    g = torch.Generator().manual_seed(13)
    m, n, k, l = 4, 8, 64, 2
    a = torch.randint(0, 256, (l, m, k // 2), generator=g, dtype=torch.uint8)
    b = torch.randint(0, 256, (l, n, k // 2), generator=g, dtype=torch.uint8)
    sfa = torch.randint(0, 4, (l, m, k // 16), generator=g).float().to(torch.float8_e4m3fn)
    sfb = torch.randint(0, 4, (l, n, k // 16), generator=g).float().to(torch.float8_e4m3fn)
    out = R.nvfp4_gemm_reference(a.permute(1, 2, 0), b.permute(1, 2, 0), sfa.permute(1, 2, 0), sfb.permute(1, 2, 0))
    assert out.shape == (m, n, l) and out.dtype == torch.float16
    assert out.permute(2, 0, 1).is_contiguous()
    mags = np.array(E2M1 + [-v for v in E2M1])
    for li in range(l):

        def dense(raw, sf):
            u = raw[li].numpy().astype(np.int64)
            codes = np.stack([u & 0xF, u >> 4], axis=-1).reshape(u.shape[0], -1)
            s = np.vectorize(slow_e4m3)(sf[li].view(torch.uint8).numpy().astype(np.int64))
            return mags[codes] * np.repeat(s, 16, axis=1)

        exact = dense(a, sfa) @ dense(b, sfb).T
        got = out[:, :, li].double().numpy()
        assert np.all(np.abs(got - exact) <= 2.0**-11 * np.abs(exact) + 1e-6), li


def test_decode_fp4_packed_matches_unpack_then_decode():
    packed = torch.arange(256, dtype=torch.uint8).reshape(4, 64).view(torch.float4_e2m1fn_x2)
    want = R.decode_e2m1(R.unpack_fp4(packed))
    got = R.decode_fp4_packed(packed.permute(1, 0).contiguous().permute(1, 0))  # strided input too
    assert got.shape == (4, 128) and torch.equal(got, want)
    assert torch.equal(torch.signbit(got), torch.signbit(want))


def test_magnitude_is_abs_bit_for_bit():
    """The quantizer's abs by a cleared sign bit: torch.abs's bits on every float32 class (zeros, subnormals,
    normals, infinities, NaNs with their payloads)."""
    from fp4_reference.fp4 import magnitude

    g = torch.Generator().manual_seed(4)
    bits = torch.randint(-(2**31), 2**31, (1 << 16,), dtype=torch.int64, generator=g).to(torch.int32)
    special = torch.tensor([0, -(2**31), 1, 0x7F800000, -8388608, 0x7FC00001, -1], dtype=torch.int32)
    v = torch.cat([bits, special]).view(torch.float32)
    assert torch.equal(magnitude(v).view(torch.int32), v.abs().view(torch.int32))
