"""Task contracts: generators, references, check_implementation, and every published shape on CPU."""

import pytest
import torch

import fp4_reference as R
from tasks import load_task

MX = load_task("mxfp4_mm")
NV = load_task("nvfp4_gemm")
FP4 = torch.float4_e2m1fn_x2


def _bytes(t):
    return R.as_uint8(t) if t.element_size() == 1 and t.dtype != torch.bool else t


def _same(d1, d2) -> bool:
    return all(
        x.shape == y.shape and x.stride() == y.stride() and torch.equal(_bytes(x), _bytes(y)) for x, y in zip(d1, d2)
    )


# ---------------------------------------------------------------- generators


def test_mxfp4_generate_layout_and_dtypes():
    a, b, b_q, b_sh, b_sc = MX.generate_input({"m": 4, "n": 48, "k": 128, "seed": 1}, "cpu")
    assert a.dtype == b.dtype == torch.bfloat16 and a.shape == (4, 128) and b.shape == (48, 128)
    assert a.is_contiguous() and b.is_contiguous()
    assert b_q.dtype == b_sh.dtype == FP4 and b_q.shape == b_sh.shape == (48, 64)
    assert b_sc.dtype == torch.float8_e8m0fnu and b_sc.shape == (256, 8)
    q, s = R.quantize_mxfp4(b)
    assert torch.equal(R.as_uint8(b_q), q)
    assert torch.equal(R.as_uint8(b_sh), R.shuffle_weight(q))
    assert torch.equal(R.as_uint8(R.unshuffle_scales_e8m0(b_sc, 48, 4)), s)


def test_mxfp4_generate_draws_a_then_b_from_private_generator():
    state = torch.get_rng_state()
    a, b, *_ = MX.generate_input({"m": 2, "n": 16, "k": 64, "seed": 77}, "cpu")
    assert torch.equal(torch.get_rng_state(), state)  # global RNG untouched
    g = torch.Generator().manual_seed(77)
    assert torch.equal(a, torch.randn((2, 64), dtype=torch.bfloat16, generator=g))
    assert torch.equal(b, torch.randn((16, 64), dtype=torch.bfloat16, generator=g))


@pytest.mark.parametrize(
    "task,case",
    [
        (MX, {"m": 4, "n": 32, "k": 128, "seed": 5}),
        (NV, {"m": 128, "n": 128, "k": 256, "l": 2, "seed": 5}),
    ],
)
def test_generators_deterministic_and_seed_sensitive(task, case):
    d1 = task.generate_input(case, "cpu")
    d2 = task.generate_input(case, "cpu")
    assert _same(d1, d2)
    d3 = task.generate_input({**case, "seed": case["seed"] + 1}, "cpu")
    assert not torch.equal(_bytes(d1[0]), _bytes(d3[0]))


def test_default_device_is_cpu_without_gpu():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    data = MX.module.generate_input(m=2, n=16, k=64, seed=1)
    assert all(t.device.type == "cpu" for t in data)


def test_nvfp4_generate_layout_and_dtypes():
    m, n, k, l = 128, 256, 512, 3
    a, b, sfa, sfb, sfa_p, sfb_p, c = NV.generate_input({"m": m, "n": n, "k": k, "l": l, "seed": 9}, "cpu")
    assert a.dtype == b.dtype == FP4 and a.shape == (m, k // 2, l) and b.shape == (n, k // 2, l)
    assert not a.is_contiguous() and a.permute(2, 0, 1).is_contiguous()  # memory order (L, M, K/2)
    assert not b.is_contiguous() and b.permute(2, 0, 1).is_contiguous()
    assert sfa.dtype == sfb.dtype == torch.float8_e4m3fn
    assert sfa.shape == (m, k // 16, l) and sfb.shape == (n, k // 16, l) and sfa.permute(2, 0, 1).is_contiguous()
    assert set(sfa.float().unique().tolist()) <= {0.0, 1.0, 2.0, 3.0}
    assert sfa_p.shape == (32, 4, m // 128, 4, k // 64, l) and sfa_p.permute(5, 2, 4, 0, 1, 3).is_contiguous()
    assert sfb_p.shape == (32, 4, n // 128, 4, k // 64, l)
    assert torch.equal(R.as_uint8(R.from_blocked_scales(sfa_p)), R.as_uint8(sfa))
    assert torch.equal(R.as_uint8(R.from_blocked_scales(sfb_p)), R.as_uint8(sfb))
    assert c.dtype == torch.float16 and c.shape == (m, n, l) and c.permute(2, 0, 1).is_contiguous()


def test_nvfp4_l1_views():
    a, *_, c = NV.generate_input({"m": 128, "n": 128, "k": 256, "l": 1, "seed": 2}, "cpu")
    assert a.shape == (128, 128, 1) and c.shape == (128, 128, 1)


# ---------------------------------------------------------------- references


def test_references_do_not_mutate_inputs():
    for task, case in (
        (MX, {"m": 4, "n": 32, "k": 128, "seed": 3}),
        (NV, {"m": 128, "n": 128, "k": 256, "l": 2, "seed": 3}),
    ):
        data = task.generate_input(case, "cpu")
        before = [_bytes(t).clone() for t in data]
        out = task.reference(data)
        assert all(torch.equal(_bytes(t), b) for t, b in zip(data, before))
        assert all(out.data_ptr() != t.data_ptr() for t in data)


def test_nvfp4_reference_layout_matches_c():
    data = NV.generate_input({"m": 128, "n": 128, "k": 256, "l": 2, "seed": 4}, "cpu")
    out = NV.reference(data)
    assert out.shape == data[6].shape and out.dtype == torch.float16 and out.stride() == data[6].stride()


def test_mxfp4_reference_uses_quantized_a():
    a, b, b_q, b_sh, b_sc = MX.generate_input({"m": 4, "n": 32, "k": 128, "seed": 3}, "cpu")
    out = MX.reference((a, b, b_q, b_sh, b_sc))
    q, s = R.quantize_mxfp4(a)
    bq, bs = R.quantize_mxfp4(b)
    want = (R.dequantize_mxfp4(q, s) @ R.dequantize_mxfp4(bq, bs).T).to(torch.bfloat16)
    assert torch.equal(out, want)


# ---------------------------------------------------------------- check_implementation reports


@pytest.fixture(scope="module")
def small_mx():
    data = MX.generate_input({"m": 8, "n": 32, "k": 128, "seed": 21}, "cpu")
    return data, MX.reference(data)


def test_check_passes_reference(small_mx):
    data, ref = small_mx
    assert MX.check(data, ref.clone()) == (True, "")


def test_check_reports_nan_and_inf(small_mx):
    data, ref = small_mx
    bad = ref.clone()
    bad[1, 2] = float("nan")
    bad[3, 4] = float("inf")
    ok, msg = MX.check(data, bad)
    assert not ok and "1 NaN" in msg and "1 inf" in msg and "(1, 2)" in msg
    only_inf = ref.clone()
    only_inf[0, 0] = -float("inf")
    ok, msg = MX.check(data, only_inf)
    assert not ok and "0 NaN and 1 inf" in msg


def test_check_reports_shape_dtype_device_and_type(small_mx):
    data, ref = small_mx
    ok, msg = MX.check(data, ref[:, :16])
    assert not ok and "wrong shape" in msg and "(8, 16)" in msg and "(8, 32)" in msg
    ok, msg = MX.check(data, ref.float())
    assert not ok and "wrong dtype" in msg and "torch.float32" in msg and "torch.bfloat16" in msg
    ok, msg = MX.check(data, ref.to("meta"))
    assert not ok and "wrong device" in msg and "meta" in msg
    ok, msg = MX.check(data, ref.tolist())
    assert not ok and "list" in msg and "not a torch.Tensor" in msg
    ok, msg = MX.check(data, None)
    assert not ok and "NoneType" in msg


def test_check_reports_value_mismatches(small_mx):
    data, ref = small_mx
    bad = ref.clone()
    bad[0, 3] += 5.0
    bad[2, 7] = -bad[2, 7] - 1.0
    bad[7, 31] += 100.0
    ok, msg = MX.check(data, bad)
    assert not ok
    assert "3 of 256" in msg
    assert "(0, 3)" in msg and "(2, 7)" in msg and "(7, 31)" in msg
    assert f"expected {ref[0, 3].item()!r}" in msg and f"got {bad[0, 3].item()!r}" in msg
    assert "Max abs error: 100" in msg


def test_check_lists_first_five_only(small_mx):
    data, ref = small_mx
    bad = ref.clone() + 1000.0
    ok, msg = MX.check(data, bad)
    assert not ok and "256 of 256" in msg and msg.count("ERROR at") == 5 and "251 more" in msg


def test_check_tolerance_boundary(small_mx):
    data, ref = small_mx
    near = (ref.float() * (1 + 0.5 * MX.rtol)).to(torch.bfloat16)
    assert MX.check(data, near)[0]
    ok, _msg = MX.module.check_implementation(data, near, rtol=0.0, atol=0.0)
    assert not ok


def test_nvfp4_check_mismatch_and_c_untouched():
    data = NV.generate_input({"m": 128, "n": 128, "k": 256, "l": 2, "seed": 8}, "cpu")
    ref = NV.reference(data)
    assert NV.check(data, ref)[0]
    ok, msg = NV.check(data, data[6])  # returning the random c buffer fails
    assert not ok and "of 32768" in msg and "Max abs error" in msg


# ---------------------------------------------------------------- every published shape, on CPU

ALL_CASES = [
    pytest.param(t, c, id=f"{t.name}-{kind}{i}")
    for t in (MX, NV)
    for kind, cases in (("test", t.tests), ("bench", t.benchmarks))
    for i, c in enumerate(cases)
]


@pytest.mark.parametrize("task,case", ALL_CASES)
def test_published_case_generates_and_passes_own_check(task, case):
    data = task.generate_input(case, "cpu")
    out = task.reference(data)
    m, n = case["m"], case["n"]
    assert out.shape == ((m, n) if task is MX else (m, n, case["l"]))
    assert torch.isfinite(out).all()
    ok, msg = task.check(data, out)
    assert ok, msg


@pytest.mark.gpu
def test_generators_on_gpu_match_reference_semantics():
    data = MX.generate_input({"m": 8, "n": 64, "k": 256, "seed": 3}, "cuda")
    assert all(t.device.type == "cuda" for t in data)
    q, _s = R.quantize_mxfp4(data[1].cpu())
    assert torch.equal(R.as_uint8(data[2]).cpu(), q)
    out = MX.reference(data)
    cpu = MX.reference(tuple(t.cpu() for t in data))
    assert torch.allclose(out.cpu().float(), cpu.float(), rtol=1e-2, atol=1e-2)
