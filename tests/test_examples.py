"""The Triton example submissions and the launch gate on a CPU-only machine.

Their GPU paths are measured on the device (results/); here: the pre-quantized / pre-decoded A paths
give correct outputs under Triton's interpreter, and the code that only a GPU can run compiles for its
target (the gate and triton_mxfp4's inline-assembly decode for sm_90, the nvfp4 tensor-core path for
sm_100).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")
if tuple(int(x) for x in triton.__version__.split(".")[:2]) < (3, 8):
    pytest.skip("needs Triton >= 3.8 (tl.dot_scaled in the interpreter)", allow_module_level=True)

from tests.helpers import NVFP4_BAD_SCALES, ROOT, load_example  # noqa: E402

# what each interpreted snippet starts with: load(name, task) imports submissions/<name>.py as the
# harness would (the task's compat folder first on sys.path)
_LOADER = """
import importlib.util, sys, torch
from tasks import load_task
def load(name, task):
    spec = importlib.util.spec_from_file_location(name, f"submissions/{name}.py")
    m = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(task.compat_dir))
    spec.loader.exec_module(m)
    return m
"""


def _interpreted(code: str) -> str:
    """Runs the snippet (after _LOADER) under Triton's interpreter; from a file, so that it may define
    @triton.jit functions of its own (Triton reads their source)."""
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "snippet.py"
        script.write_text(_LOADER + textwrap.dedent(code))
        res = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600, check=False
        )
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout


def test_triton_examples_with_and_without_the_separate_a_kernel():
    out = _interpreted("""
        mx = load_task("mxfp4_mm")
        sub = load("triton_mxfp4", mx)
        for cfg in [(64, 16, 64, 2, 0, 4, 1, 1), (64, 16, 128, 2, 1, 4, 1, 1), (64, 32, 64, 1, 1, 4, 1, 1),
                    (32, 0, 64, 0, 2, 4, 1, 1), (64, 16, 64, 2, 0, 4, 3, 1), (64, 32, 128, 2, 1, 4, 2, 1),
                    (64, 64, 64, 2, 1, 4, 3, 0), (128, 64, 128, 1, 0, 4, 2, 0),
                    (32, 8, 256, 0, 2, 4, 1, 1), (64, 16, 128, 0, 2, 4, 1, 0)]:   # PREPARE: segments, C or C^T
            sub.CONFIGS[(20, 256, 512)] = cfg
            data = mx.generate_input({"m": 20, "n": 256, "k": 512, "seed": 3}, torch.device("cpu"))
            print("mxfp4", cfg, mx.check(data, sub.custom_kernel(data))[0])
        nv = load_task("nvfp4_gemm")
        sub = load("triton_nvfp4", nv)
        for cfg in [(128, 128, 64, 1, 4, 1, 0), (128, 128, 64, 2, 4, 1, 1),
                    (128, 128, 128, 2, 8, 4, 4)]:   # I8G (Gluon, Hopper only): INT8 here
            sub.CONFIGS[(128, 256, 512)] = cfg
            data = nv.generate_input({"m": 128, "n": 256, "k": 512, "l": 1, "seed": 3}, torch.device("cpu"))
            data[6].fill_(float("nan"))
            print("nvfp4", cfg, nv.check(data, sub.custom_kernel(data))[0])
    """)
    lines = out.strip().splitlines()
    assert len(lines) == 13 and all(line.endswith("True") for line in lines), out


def _compile(fn, signature: dict, constexprs: dict, capability: int, num_warps: int, num_stages: int = 3, aligned=()):
    """``aligned``: arguments the launcher would specialize as multiples of 16 (as it does on the GPU)."""
    from triton.backends.compiler import GPUTarget

    attrs = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(signature) if name in aligned}
    src = triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    return triton.compile(
        src, target=GPUTarget("cuda", capability, 32), options={"num_warps": num_warps, "num_stages": num_stages}
    )


def test_launch_gate_kernel_compiles_for_hopper():
    from harness.worker.gate_kernel import gate_kernel

    kernel = _compile(
        gate_kernel,
        {
            "count_ptr": "*i32",
            "open_ptr": "*i32",
            "started_ptr": "*i32",
            "release_ptr": "*i32",
            "seq": "i32",
            "nblocks": "i32",
            "cap_ns": "i32",
        },
        {},
        90,
        32,
    )
    ptx = kernel.asm["ptx"]
    assert ".reqntid 1024" in ptx  # one block of 1024 threads: two fill an SM
    assert "st.global.release.sys" in ptx  # the host sees "started" without PCIe atomics
    assert "%globaltimer" in ptx  # the cap


def test_nvfp4_sm100_path_compiles_to_fp4_tensor_cores():
    sub = load_example("triton_nvfp4")
    ints = {
        name: "i32"
        for name in ("M", "N", "K", "sam", "sal", "sbn", "sbl", "ssam", "ssal", "ssbn", "ssbl", "scm", "scl")
    }
    sig = {
        "a_ptr": "*u8",
        "b_ptr": "*u8",
        "sa_ptr": "*fp8e4nv",
        "sb_ptr": "*fp8e4nv",
        "c_ptr": "*fp16",
        **ints,
        "BLOCK_M": "constexpr",
        "BLOCK_N": "constexpr",
        "BLOCK_K": "constexpr",
    }
    kernel = _compile(sub._nvfp4_sm100_kernel, sig, {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128}, 100, 4)
    assert "kind::mxf4nvf4.block_scale.block16" in kernel.asm["ptx"]


@pytest.mark.parametrize("a_dec", [1, 2, 3])
def test_nvfp4_hopper_paths_compile_to_wgmma(a_dec):
    """sm_90: the fp16 path (A decoded by a first kernel), the FP8 path (e4m3 wgmma on B decoded by the
    prmt tables) and the INT8 path (int8 wgmma on both operands as the first kernel wrote them, staged
    by cp.async), the last two with the fp16 wgmma of their fallback; all wait for the first kernel (PDL)."""
    sub = load_example("triton_nvfp4")
    ints = {n: "i32" for n in ("M", "N", "K", "sam", "sal", "sbn", "sbl", "ssam", "ssal", "ssbn", "ssbl", "scm", "scl")}
    sig = {
        "a_ptr": "*fp16" if a_dec == 1 else "*u8",
        "a8_ptr": "*i8" if a_dec == 3 else "*fp8e4nv",
        "fa_ptr": "*i32",
        "b_ptr": "*u8",
        "b8_ptr": "*i8",
        "fb_ptr": "*i32",
        "sa_ptr": "*u8",
        "sb_ptr": "*u8",
        "c_ptr": "*fp16",
        "ws_ptr": "*fp32",
        "cnt_ptr": "*i32",
        **ints,
        **{c: "constexpr" for c in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K", "INTERP", "A_DEC", "PDL")},
    }
    kernel = _compile(
        sub._nvfp4_kernel,
        sig,
        {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 256, "SPLIT_K": 3, "INTERP": False, "A_DEC": a_dec, "PDL": True},
        90,
        4,
        2,
        aligned=[n for n in sig if n.endswith("_ptr")] + ["N", "K", "sam", "sbn", "ssam", "ssbn", "scm"],
    )
    ptx = kernel.asm["ptx"]
    assert "wgmma.mma_async" in ptx and ".f16.f16" in ptx
    assert (".e4m3.e4m3" in ptx) == (a_dec == 2) and ("prmt.b32 t, l4, h4, m" in ptx) == (a_dec == 2)
    assert (".s32.s8.s8" in ptx) == (a_dec == 3)
    assert "griddepcontrol.wait" in ptx
    assert ("cp.async" in ptx) == (a_dec >= 2)  # the fp8 and int8 loops' loads are staged by cp.async


def _i8g_compiled(sub, block_n, warps, tma, ws=False, fused=0):
    """triton_nvfp4's Gluon I8G kernel compiled for sm_90 on the CPU, and its constexprs."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    kern = sub._i8g_kernel
    consts = {
        "BLOCK_N": block_n,
        "SPLIT_K": 2,
        "STAGES": 3,
        "FLAGS": 32,
        "WARPS": warps,
        "PDL": True,
        "BLOCK_K": 256 if tma else 128,
        "TMA": tma,  # TMA: BLOCK_K 256 (B's scales, 16 bytes a row)
        "B_STAGES": sub._b_stages(3, block_n, 256, ws) if tma else 0,
        "WS": ws,
        "F_STAGES": sub._f_stages(ws),
        "WS_REGS": sub._WS_REGS,
        "FUSED_A": fused,
    }
    if not tma:  # no descriptors (None: constexprs)
        consts.update(a_desc=None, b_desc=None, s_desc=None)
    layout = (
        "NVMMASharedLayout(swizzle_byte_width={}, element_bitwidth=8, rank=2, transposed=False, "
        "fp4_padded=False, cga_layout=[])"
    )
    ptrs = {
        "a8_ptr": "*i8",
        "fa_ptr": "*i32",
        "c_ptr": "*fp16",
        "ws_ptr": "*fp32",
        "cnt_ptr": "*i32",
        "rdy_ptr": "*i32",
        "a_desc": f"tensordesc<i8[128, 256],{layout.format(128)}>",
        "b_desc": f"tensordesc<u8[{block_n}, 128],{layout.format(0)}>",
        "s_desc": f"tensordesc<u8[{block_n}, 16],{layout.format(0)}>",
    }
    sig = {
        n: "constexpr" if n in consts else ptrs.get(n, "*u8") if n.endswith(("_ptr", "_desc")) else "i32"
        for n in kern.arg_names
    }
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(sig) if sig[n] != "constexpr"}
    src = GluonASTSource(kern, sig, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps}), consts


@pytest.mark.parametrize("block_n, warps, tma", [(64, 4, True), (128, 8, True), (128, 8, False)])
def test_nvfp4_i8g_loop_folds_b_while_its_wgmma_runs(block_n, warps, tma):
    """sm_90: the Gluon I8G kernel issues its int8 wgmma from shared memory and folds the next chunk of B
    before it waits, for the wgmma before (two buffers of folded B, one wgmma left in flight); its loads
    are staged by TMA (descriptors made on the host, mbarriers, no cp.async) or by cp.async; it waits
    for the first kernel (PDL)."""
    ptx = _i8g_compiled(load_example("triton_nvfp4"), block_n, warps, tma)[0].asm["ptx"]
    assert "wgmma.mma_async" in ptx and ".s32.s8.s8" in ptx
    issued = ptx.index("wgmma.commit_group")  # the loop's wgmma (the kernel's only one)
    waited = ptx.index("wgmma.wait_group.sync.aligned", issued)
    assert "mul.lo.u32 t0, s, 0x03020100" in ptx[issued:waited]  # the int8 fold of B's codes, between
    assert ptx[waited:].startswith("wgmma.wait_group.sync.aligned 1;")
    assert "griddepcontrol.wait" in ptx
    assert ("cp.async.bulk.tensor.2d" in ptx) == ("mbarrier.try_wait" in ptx) == tma
    assert "tensormap.replace" not in ptx
    assert ("cp.async.cg" in ptx or "cp.async.ca" in ptx) != tma


def test_nvfp4_i8g_warp_specialized_kernel_hands_chunks_over_by_mbarriers():
    """sm_90, the file's I8G by TMA: warp-specialized (register budgets set per partition), the int8 wgmma
    from shared memory with one left in flight, B folded in other warps (the fold's asm and the wgmma in
    different partitions), every hand-over an mbarrier, and A's loads after the first kernel (PDL)."""
    sub = load_example("triton_nvfp4")
    ptx = _i8g_compiled(sub, 64, 4, True, ws=True)[0].asm["ptx"]
    assert "setmaxnreg.inc.sync.aligned" in ptx and "setmaxnreg.dec.sync.aligned" in ptx
    assert ".s32.s8.s8" in ptx and "wgmma.wait_group.sync.aligned 1;" in ptx
    issued = ptx.index("wgmma.commit_group")
    waited = ptx.index("wgmma.wait_group.sync.aligned", issued)
    assert "mul.lo.u32 t0, s, 0x03020100" in ptx and "mul.lo.u32 t0, s, 0x03020100" not in ptx[issued:waited]
    assert "mbarrier.try_wait" in ptx and "mbarrier.arrive.shared" in ptx
    assert "cp.async.bulk.tensor.2d" in ptx and "griddepcontrol.wait" in ptx
    assert sub._WS and sub._b_stages(4, 64, 256, True) % 2 == 0  # the file's choice; B's stages stay even
    assert "ld.global.gpu.acquire" not in ptx and "atom.global.gpu.release" not in ptx  # no FUSED_A count


def test_nvfp4_i8g_fused_a_makes_a_then_counts_it_for_the_partitions():
    """sm_90, I8G with FUSED_A: the programs fold A's units (the fold's asm before the partitions),
    count them with a release after a CTA barrier and a proxy fence (TMA reads what generic stores
    wrote), A's load warp and the wgmma warpgroup spin on an acquire load of that count, and the last
    program out resets it; the same kernel without FUSED_A does none of it."""
    sub = load_example("triton_nvfp4")
    ptx = _i8g_compiled(sub, 64, 4, True, ws=True, fused=1)[0].asm["ptx"]
    counted = ptx.index("global.gpu.release.add")  # (atom., or red. where the old value goes unused)
    assert "mul.lo.u32 t0, s, 0x03020100" in ptx[:counted]  # A's fold, before the count
    assert "fence.proxy.async.global" in ptx[:counted] and "bar.sync" in ptx[:counted]
    assert ptx.count("ld.global.gpu.acquire") == 2  # the two waiting partitions' spins
    assert ptx.index("ld.global.gpu.acquire") > counted
    done = ptx.rindex("atom.global.gpu.acq_rel.add")  # the last program out resets both counts
    assert ptx.count("atom.global.gpu.acq_rel.exch", done) == 2


def test_nvfp4_i8f_fuses_a_into_one_launch_where_every_program_fits(monkeypatch):
    """The launches of a warp-specialized I8F shape: one (FUSED_A) when its grid fits on the SMs at
    once (its programs wait for each other's units of A), else A's first kernel, then the GEMM (PDL),
    as an I8G shape always has. With _CHAIN the call's first launch is a dependent one too (of the call
    before's GEMM, which lets it launch early: CHAIN), and the first kernel waits before its stores."""
    import types

    import torch

    sub = load_example("triton_nvfp4")
    monkeypatch.setattr(sub, "_GLUON", True)
    monkeypatch.setattr(sub, "_HOPPER", True)
    monkeypatch.setattr(sub, "_PDL", True)
    monkeypatch.setattr(sub, "_BUFFERS", {})
    strides = [
        (8192, 1, 128 * 8192),
        (8192, 1, 7168 * 8192),
        (1024, 1, 128 * 1024),
        (1024, 1, 7168 * 1024),
        (7168, 1, 128 * 7168),
    ]
    for a_dec, sms, chain in (
        (sub.I8F, 132, 0),
        (sub.I8F, 100, 0),
        (sub.I8G, 132, 0),
        (sub.I8F, 132, 1),
        (sub.I8F, 100, 1),
        (sub.I8G, 132, 1),
    ):
        monkeypatch.setattr(sub, "_CHAIN", chain)
        monkeypatch.setitem(sub.CONFIGS, (128, 7168, 16384), (128, 64, 256, 1, 4, 4, a_dec))
        monkeypatch.setattr(
            torch.cuda, "get_device_properties", lambda dev, sms=sms: types.SimpleNamespace(multi_processor_count=sms)
        )
        launches = sub._launches(128, 7168, 16384, 1, strides, torch.device("cpu"))
        fused = a_dec == sub.I8F and sms == 132
        assert (
            [k.fn.__name__ for k, _, _, _ in launches] == ["_i8g_kernel"]
            if fused
            else ["_prep_i8_kernel", "_i8g_kernel"]
        )
        grid, meta = launches[-1][1], launches[-1][3]
        assert grid == (112, 1, 1) and meta["WS"] and meta["FUSED_A"] == fused
        assert meta["PDL"] == ("launch_pdl" in meta) == (bool(chain) or not fused)
        assert meta["CHAIN"] == bool(chain)
        if not fused:
            first = launches[0][3]
            assert first["WAIT"] == chain and ("launch_pdl" in first) == bool(chain)


@functools.cache
def _sass_loop():
    spec = importlib.util.spec_from_file_location("sass_loop", ROOT / "bench" / "sass_loop.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _mxfp4_compiled(sub, cfg: tuple, segments: bool):
    """triton_mxfp4's GEMM compiled for sm_90 on the CPU with one config (bench/sass_loop.py's)."""
    return _sass_loop().compile_gemm(sub, cfg, segments)


def _fp8_decode_layout_ok(kernel) -> bool:
    """The fp8 decode takes one pair of lookup tables per asm instance, so the 4 code bytes that Triton
    packs into an instance must be 4 K bytes of one row, 4-aligned (one scale block)."""
    ttgir = kernel.asm["ttgir"]
    layout = re.search(
        r"prmt\.b32 x, \$3, \$7, m;.*?: tensor<\d+x\d+xi8, (#ttg\.dot_op<\{[^}]*\}>|#\w+)>", ttgir
    ).group(1)
    if not layout.startswith("#ttg."):  # a named layout: its definition
        layout = re.search(rf"^{layout} = (.*)$", ttgir, re.M).group(1)
    return _packs_four_aligned_k_bytes(layout)


@pytest.mark.parametrize(
    "pre_a, stages, swap, segments",
    [
        (0, 1, True, False),
        (1, 1, True, False),
        (1, 3, True, False),
        (1, 3, False, False),
        (1, 3, False, True),
        (3, 3, False, True),
        (3, 3, False, False),
        (3, 1, True, False),
    ],
)
def test_mxfp4_hopper_path_compiles_to_wgmma_with_the_asm_decode(pre_a, stages, swap, segments):
    """The interpreter runs the plain-Triton decode; the GPU path's inline assembly (bf16x2 products,
    or the fp8 path's prmt lookups) and the wgmma only show when the kernel is compiled for sm_90."""
    sub = load_example("triton_mxfp4")
    fp8 = pre_a == sub.FP8
    kernel = _mxfp4_compiled(
        sub, (64, 64 if pre_a else 16, 256 if segments else 128, 2, pre_a, 4, stages, swap), segments
    )
    ptx = kernel.asm["ptx"]
    assert "wgmma.mma_async" in ptx and ".bf16.bf16" in ptx  # the fp8 kernel keeps the exact bf16 fallback
    assert (".e4m3.e4m3" in ptx) == fp8
    assert "mul.rn.bf16x2" in ptx and "prmt.b32" in ptx
    assert bool(re.search(r"prmt\.b32 x, %r\d+, %r\d+, m;", ptx)) == fp8  # the fp8 decode's table lookup
    assert not fp8 or _fp8_decode_layout_ok(kernel)
    assert ("cp.async" in ptx) == (stages > 1)  # the PIPELINED loop's operands are staged by cp.async
    assert ("griddepcontrol.wait" in ptx) == bool(pre_a)  # after a first kernel: waits for it (PDL)
    if segments:  # B's scales too: no byte loads left in the loop (the fp8 kernel's fallback keeps some)
        assert fp8 or not re.search(r"ld\.global[.a-z0-9:]*\.[ub]8", ptx)


def test_mxfp4_fp8_configs_of_the_file_decode_one_scale_block_per_instance():
    """Every FP8 config in CONFIGS compiles (sm_90) to a decode whose asm instances each see one scale
    block. Some configs do not (8 warps, or 32-row tiles of 4 warps, pack two rows): on the H200 they gave
    wrong output (results/probes/h200_tuning_mxfp4_fp8_tables_*_edabced.json), so none may be chosen."""
    sub = load_example("triton_mxfp4")
    fp8 = {shape: cfg for shape, cfg in sub.CONFIGS.items() if cfg[4] == sub.FP8}
    assert fp8
    for (m, n, k), cfg in fp8.items():
        kernel = _mxfp4_compiled(sub, cfg, sub._segments(cfg[2], cfg[3], k, cfg[6]))
        assert _fp8_decode_layout_ok(kernel), (m, n, k)
    kernel = _mxfp4_compiled(sub, (64, 64, 256, 1, sub.FP8, 8, 3, 1), True)  # a config that packs two rows
    assert not _fp8_decode_layout_ok(kernel)


def _packs_four_aligned_k_bytes(layout: str) -> bool:
    """Whether a 2-D TTGIR layout (K the last dimension) gives each thread's registers, in groups of 4,
    4 consecutive K elements of one row starting at a multiple of 4 (what a pack = 4 instance sees)."""
    blocked = re.match(r"#ttg\.blocked<\{sizePerThread = \[1, (\d+)\].*order = \[1, 0\]", layout)
    if blocked:
        return int(blocked.group(1)) % 4 == 0
    dot_a = re.match(r"#ttg\.dot_op<\{opIdx = 0, parent = #mma\w*, kWidth = (\d+)\}>", layout)
    if dot_a:  # the wgmma's register operand: kWidth consecutive K elements a register group
        return int(dot_a.group(1)) % 4 == 0
    linear = re.match(r"#ttg\.linear<\{register = (\[.*?\]\]), lane = (\[.*?\]\]), warp = (\[.*?\]\])", layout)
    if not linear:
        return False
    register, lane, warp = (json.loads(g) for g in linear.groups())
    return register[:2] == [[0, 1], [0, 2]] and all(k % 4 == 0 for _, k in register[2:] + lane + warp)


def test_mxfp4_fp8_path_runs_and_falls_back_to_bf16_outside_its_window():
    """The fp8 path ran (the row bases are real bases, not the fallback flag) and matches the reference;
    a row whose blocks span more than 12 binades gets the flag, and its tile the exact bf16 path."""
    out = _interpreted("""
        mx = load_task("mxfp4_mm")
        sub = load("triton_mxfp4", mx)
        for cfg in [(64, 64, 64, 1, 3, 4, 3, 0), (64, 16, 128, 2, 3, 4, 1, 1), (64, 64, 256, 1, 3, 4, 3, 0)]:
            sub.CONFIGS[(20, 256, 1024)] = cfg   # the last one loads B's scales as segments
            data = mx.generate_input({"m": 20, "n": 256, "k": 1024, "seed": 3}, torch.device("cpu"))
            ok = mx.check(data, sub.custom_kernel(data))[0]
            flags = (sub._BUFFERS[(data[0].device, "fp8_base")][:276] == 1 << 20).sum().item()
            A = data[0].clone()
            A[3, :32] *= 2.0 ** -14
            data = (A,) + tuple(data[1:])
            ok2 = mx.check(data, sub.custom_kernel(data))[0]
            base = sub._BUFFERS[(data[0].device, "fp8_base")][:20]
            print(cfg, ok, flags, ok2, (base == 1 << 20).nonzero().flatten().tolist())
    """)
    lines = out.strip().splitlines()
    assert len(lines) == 3 and all(line.endswith("True 0 True [3]") for line in lines), out


def test_mxfp4_fp8_prep_finds_every_b_row_base():
    """The FP8 prep reads B's scales from the shuffled layout as flat segments: its row bases are the
    row's largest block exponent - 6, also where K/32 is not a multiple of 8 (padding columns)."""
    out = _interpreted("""
        from fp4_reference.mxfp4 import quantize_mxfp4
        mx = load_task("mxfp4_mm")
        sub = load("triton_mxfp4", mx)
        for m, n, k in [(20, 208, 768), (8, 96, 1344), (20, 256, 1024)]:
            sub.CONFIGS[(m, n, k)] = (64, 64, 64, 1, 3, 4, 3, 0)
            data = mx.generate_input({"m": m, "n": n, "k": k, "seed": 5}, torch.device("cpu"))
            sub.custom_kernel(data)
            got = sub._BUFFERS[(data[0].device, "fp8_base")][m:m + n]
            e = quantize_mxfp4(data[1])[1].view(torch.uint8).to(torch.int32)[:, :k // 32]
            print(k, torch.equal(got, (e.max(1).values - 127 - 6).to(got.dtype)))
    """)
    assert out.split() == ["768", "True", "1344", "True", "1024", "True"], out


def test_mxfp4_prepare_kernels_compile_for_hopper():
    sub = load_example("triton_mxfp4")
    sig = {
        "a_ptr": "*bf16",
        "bq_ptr": "*u8",
        "bs_ptr": "*u8",
        "ap_ptr": "*bf16",
        "bp_ptr": "*bf16",
        **{n: "i32" for n in ("M", "N", "K", "stride_am", "stride_bn", "bs_stride")},
        **{c: "constexpr" for c in ("BLOCK_R", "BLOCK_K", "INTERP", "PDL", "BLOCK_RA")},
    }
    kernel = _compile(
        sub._prepare_kernel, sig, {"BLOCK_R": 16, "BLOCK_K": 128, "INTERP": False, "PDL": True, "BLOCK_RA": 16}, 90, 4
    )
    assert "mul.rn.bf16x2" in kernel.asm["ptx"]
    assert "griddepcontrol.launch_dependents" in kernel.asm["ptx"]  # the GEMM may launch (PDL)
    kernel = _compile(
        sub._prepare_kernel,
        sig,
        {"BLOCK_R": 32, "BLOCK_K": 256, "INTERP": False, "PDL": False, "BLOCK_RA": 8},
        90,
        4,
        aligned=tuple(sig)[:11],
    )
    ptx = kernel.asm["ptx"]  # B's scales as 256-byte segments: no byte-wide gather is left
    assert "ld.global.v4.b32" in ptx and "ld.global.b8" not in ptx and "griddepcontrol" not in ptx
    sig = {
        "a_ptr": "*bf16",
        "bs_ptr": "*u8",
        "a8_ptr": "*fp8e4nv",
        "ab_ptr": "*bf16",
        "base_ptr": "*i32",
        **{n: "i32" for n in ("M", "N", "K", "stride_am", "bs_stride")},
        **{c: "constexpr" for c in ("ROWS", "KP", "CP", "PDL")},
    }
    kernel = _compile(sub._prep_fp8_kernel, sig, {"ROWS": 2, "KP": 2048, "CP": 64, "PDL": True}, 90, 4, 1)
    assert "cvt.rn.satfinite.e4m3x2.f32" in kernel.asm["ptx"]  # A written as e4m3
    assert "griddepcontrol.launch_dependents" in kernel.asm["ptx"]


@pytest.mark.parametrize("name, task", [("triton_mxfp4", "mxfp4_small"), ("triton_nvfp4", "nvfp4_small")])
def test_triton_examples_pass_through_the_harness_on_the_cpu(name, task):
    """The worker sets TRITON_INTERPRET before the submission imports Triton; the harness itself must
    not import Triton first (it once did, through the launch gate, and every Triton example failed)."""
    from harness.api import RunOptions, run_submission
    from harness.results import PASS

    r = run_submission(
        str(ROOT / "submissions" / f"{name}.py"),
        str(ROOT / "tests" / "fixtures" / "tasks" / task / "task.yml"),
        "test",
        RunOptions(device="cpu"),
    )
    assert r.verdict == PASS, (r.message, [c.message for c in r.cases])


def test_nvfp4_fp8_and_int8_paths_fold_the_task_scales_and_fall_back_on_others():
    """The task's scales (0..3) fold exactly into e4m3 (the FP8 path) and into int8 (the INT8 path): the
    output passes. A scale of 1.125 in B or of 0.5625 in A does not (each tried in several tiles): computing
    those elements as the path alone would (the control, in torch: rounded to e4m3, or 2 * value cut to
    an integer as the int8 conversion does) fails the check, while the kernel, which redoes such tiles
    on fp16, passes."""
    out = _interpreted("""
        nv = load_task("nvfp4_gemm")
        sub = load("triton_nvfp4", nv)
        from tests.helpers import NVFP4_BAD_SCALES, nvfp4_path_alone as path_alone
        for cfg in [(128, 128, 128, 3, 4, 3, 2), (128, 64, 64, 1, 4, 2, 2), (128, 128, 128, 3, 4, 3, 3),
                    (128, 64, 256, 1, 4, 2, 3)]:
            sub.CONFIGS[(128, 256, 512)] = cfg
            data = nv.generate_input({"m": 128, "n": 256, "k": 512, "l": 1, "seed": 3}, torch.device("cpu"))
            data[6].fill_(float("nan"))
            row = [nv.check(data, sub.custom_kernel(data))[0], nv.check(data, path_alone(data, cfg[6]))[0]]
            for operand, value, r, block in NVFP4_BAD_SCALES:
                d = nv.generate_input({"m": 128, "n": 256, "k": 512, "l": 1, "seed": 3}, torch.device("cpu"))
                d[operand].view(torch.uint8)[r, block, 0] = value
                d[6].fill_(float("nan"))
                row += [nv.check(d, sub.custom_kernel(d))[0], nv.check(d, path_alone(d, cfg[6]))[0]]
            print(cfg, *row)
    """)
    lines = out.strip().splitlines()
    assert len(lines) == 4 and all(
        line.endswith("True True" + " True False" * len(NVFP4_BAD_SCALES)) for line in lines
    ), out


def _run_ptx(asm: str, inputs, n_out: int):
    """Emulates the integer PTX of an inline-assembly string (mov, and, or, xor, not, shl, shr, add, sub,
    mul.lo, prmt) on numpy uint32 arrays: the inputs are $n_out.., the outputs $0..$n_out-1."""
    import numpy as np

    regs = {f"${i + n_out}": np.asarray(v, dtype=np.uint32) for i, v in enumerate(inputs)}

    def val(x):
        return regs[x] if x in regs else np.uint32(int(x, 0))

    for ins in asm.strip().strip("{}").split(";"):
        ins = ins.strip()
        if not ins or ins.startswith(".reg"):
            continue
        op, rest = ins.split(None, 1)
        d, *a = [x.strip() for x in rest.split(",")]
        x = [val(v) for v in a]
        if op == "prmt.b32":  # bytes of {x1, x0}; a selector nibble's bit 3 replicates the byte's sign
            src = (x[1].astype(np.uint64) << np.uint64(32)) | x[0]
            r = np.zeros(np.broadcast(*x).shape, np.uint32)
            for i in range(4):
                sel = (x[2] >> np.uint32(4 * i)) & np.uint32(0xF)
                byte = ((src >> (np.uint64(8) * (sel & np.uint32(7)).astype(np.uint64))) & np.uint64(0xFF)).astype(
                    np.uint32
                )
                byte = np.where(sel & 8, np.where(byte & 0x80, 0xFF, 0), byte).astype(np.uint32)
                r |= byte << np.uint32(8 * i)
        else:
            r = {
                "mov.b32": lambda: x[0] | np.zeros(1, np.uint32),
                "and.b32": lambda: x[0] & x[1],
                "or.b32": lambda: x[0] | x[1],
                "not.b32": lambda: ~x[0],
                "shl.b32": lambda: (x[0].astype(np.uint64) << np.uint64(x[1])).astype(np.uint32),
                "shr.b32": lambda: x[0] >> x[1],
                "add.u32": lambda: (x[0].astype(np.uint64) + x[1]).astype(np.uint32),
                "sub.u32": lambda: ((x[0].astype(np.int64) - x[1]) & 0xFFFFFFFF).astype(np.uint32),
                "mul.lo.u32": lambda: ((x[0].astype(np.uint64) * x[1]) & 0xFFFFFFFF).astype(np.uint32),
                "xor.b32": lambda: x[0] ^ x[1],
            }[op]()
        regs[d] = np.asarray(r, dtype=np.uint32)
    return [regs[f"${i}"] for i in range(n_out)]


def _packed(v):
    return v[:, 0] | v[:, 1] << 8 | v[:, 2] << 16 | v[:, 3] << 24


def _assert_decoded(lo, hi, words, scales):
    """The fp8 decode's outputs lo / hi (4 e4m3 bytes a word) are e2m1 of the low / high nibbles of the
    code words' bytes [n, 4] times their scales [n, 4], exactly."""
    import numpy as np
    import torch

    e2m1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)
    for j in range(4):
        for out, nibble in ((lo, words[:, j] & 15), (hi, words[:, j] >> 4)):
            got = torch.tensor(((out >> np.uint32(8 * j)) & 0xFF).astype(np.uint8)).view(torch.float8_e4m3fn)
            np.testing.assert_array_equal(got.float().numpy(), e2m1[nibble] * scales[:, j])


def test_mxfp4_fp8_decode_assembly_gives_the_exact_e4m3_values():
    """triton_mxfp4's fp8 decode (inline PTX, GPU only) emulated on every code byte with every block
    power of two d in -5..6 that the fp8 path takes, with the lookup tables that _fp8_tables makes for
    the block (run by the interpreter): the even and odd elements equal torch's e4m3 of e2m1 * 2**d."""
    import numpy as np

    sub = load_example("triton_mxfp4")
    lut_lo, lut_hi = (
        np.array(t, dtype=np.int64).astype(np.uint32)
        for t in json.loads(
            _interpreted("""
        import json, triton, triton.language as tl
        sub = load("triton_mxfp4", load_task("mxfp4_mm"))
        @triton.jit
        def tables(lo_ptr, hi_ptr):
            o = tl.arange(0, 16)
            # scale bytes 122 + o of rows with base 0: d = -5 .. 10 (the path takes d <= 6)
            lo, hi = sub._fp8_tables((122 + o)[:, None], tl.zeros((16,), tl.int32))
            tl.store(lo_ptr + o[:, None], lo)
            tl.store(hi_ptr + o[:, None], hi)
        lo, hi = torch.empty(16, dtype=torch.int32), torch.empty(16, dtype=torch.int32)
        tables[(1,)](lo, hi)
        print(json.dumps([lo.tolist(), hi.tolist()]))
    """)
        )
    )
    d = np.arange(-5, 7)
    rng = np.random.default_rng(0)
    codes = np.repeat(np.arange(256), len(d))  # every code byte with every d, in byte 0
    which = np.tile(np.arange(len(d)), 256)
    words = rng.integers(0, 256, (len(codes), 4)).astype(np.uint32)
    words[:, 0] = codes
    tables = [lut_lo[which]] * 4 + [lut_hi[which]] * 4  # $3..$6 and $7..$10: one block per instance
    lo, hi = _run_ptx(sub._DECODE_FP8_ASM.value, [_packed(words), *tables], 2)
    _assert_decoded(lo, hi, words, np.repeat((2.0 ** d[which])[:, None], 4, axis=1))


def test_nvfp4_fp8_decode_assembly_gives_the_exact_e4m3_values():
    """triton_nvfp4's fp8 decode (inline PTX, GPU only) emulated on every code byte with every scale its
    fp8 path takes (4 bytes per instance, each with its own scale, as the kernel passes them): per byte
    the kernel's own _fp8_code of every scale byte that it finds good; the even and odd elements equal
    torch's e4m3 of e2m1 * scale."""
    import numpy as np
    import torch

    sub = load_example("triton_nvfp4")
    q, bad = (
        np.array(v)
        for v in json.loads(
            _interpreted("""
        import json, triton, triton.language as tl
        sub = load("triton_nvfp4", load_task("nvfp4_gemm"))
        @triton.jit
        def fp8_codes(s_ptr, q_ptr, bad_ptr):
            o = tl.arange(0, 256)
            q, bad = sub._fp8_code(tl.load(s_ptr + o))
            tl.store(q_ptr + o, q)
            tl.store(bad_ptr + o, bad)
        s, q, bad = torch.arange(256, dtype=torch.uint8), torch.empty(256, dtype=torch.uint8), torch.empty(256, dtype=torch.int8)
        fp8_codes[(1,)](s, q, bad)
        print(json.dumps([q.tolist(), bad.tolist()]))
    """)
        )
    )
    good = bad == 0
    per_byte = q[good]
    scale = torch.tensor(np.arange(256)[good], dtype=torch.uint8).view(torch.float8_e4m3fn).float().numpy()
    assert set(scale) >= {0.0, 1.0, 2.0, 3.0}  # the task's scales
    rng = np.random.default_rng(0)
    codes = np.repeat(np.arange(256), len(scale))  # every code byte with every scale, in byte 0
    which = np.tile(np.arange(len(scale)), 256)
    words = rng.integers(0, 256, (len(codes), 4)).astype(np.uint32)
    picks = rng.integers(0, len(scale), (len(codes), 4))
    words[:, 0], picks[:, 0] = codes, which
    lo, hi = _run_ptx(sub._DECODE_FP8_ASM.value, [_packed(words), _packed(per_byte[picks].astype(np.uint32))], 2)
    _assert_decoded(lo, hi, words, scale[picks])


def test_int8_fold_assembly_gives_twice_the_values_in_k_order():
    """triton_nvfp4's INT8 fold (inline PTX, GPU only: the first kernel's, and the I8G loop's with the
    scale in all four bytes) emulated on every 16-bit half word of codes with every integer scale 0..10 it
    folds: the two output words hold 2 * e2m1 * s of the 8 codes, in K order, as int8 (two's complement;
    -0 gives 0)."""
    import numpy as np

    sub = load_example("triton_nvfp4")
    e2m1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)
    rng = np.random.default_rng(0)
    low = np.tile(np.arange(1 << 16, dtype=np.uint32), 11)  # every half word, with every scale
    words = low | (rng.integers(0, 1 << 16, len(low)).astype(np.uint32) << np.uint32(16))
    scale = np.repeat(np.arange(11, dtype=np.uint32), 1 << 16)
    for scale_reg in (scale, scale * np.uint32(0x01010101)):  # Triton's int32 scale; the Gluon loop's 4 bytes
        w0, w1 = _run_ptx(sub._FOLD_I8_ASM.value, [words, scale_reg], 2)
        for j in range(8):
            got = ((w0 if j < 4 else w1) >> np.uint32(8 * (j % 4))) & 0xFF
            want = 2 * e2m1[(words >> np.uint32(4 * j)) & 15] * scale
            np.testing.assert_array_equal(got.astype(np.uint8).view(np.int8).astype(np.float32), want)


def test_nvfp4_direct_launch_lays_out_the_kernel_parameters_from_its_ptx():
    """triton_nvfp4's plan launches by cuLaunchKernelEx with a parameter block it builds from the
    kernel's PTX entry: the non-constexpr arguments in order, at their PTX sizes, then Triton's two
    scratch pointers; a call's data pointers land in their slots. A kernel whose PTX entry does not
    have that many parameters gets no block (the plan then keeps Triton's launchers)."""
    import ctypes

    sub = load_example("triton_nvfp4")
    sig = {
        "a_ptr": "*u8",
        "sa_ptr": "*u8",
        "out_ptr": "*fp8e4nv",
        "bad_ptr": "*i32",
        **{n: "i32" for n in ("M", "K", "sam", "sal", "ssam", "ssal")},
        **{c: "constexpr" for c in ("BLOCK_R", "BLOCK_K", "FP8", "PDL")},
    }
    kernel = _compile(sub._decode_a_kernel, sig, {"BLOCK_R": 64, "BLOCK_K": 256, "FP8": True, "PDL": True}, 90, 4, 1)
    values = [0, 0, 0xAB00, 0xCD00, 128, 16384, 8192, 7, 1024, 9, 64, 256, True, True]
    cfg, _, params, slots, maps, (objs, _) = sub._direct_step(kernel, (2, 64, 1), values, [(0, 0), (1, 2)])
    assert maps == [] and kernel.metadata.global_scratch_size == 0
    assert [type(o) for o in objs] == [ctypes.c_uint64] * 4 + [ctypes.c_uint32] * 6 + [ctypes.c_uint64] * 2
    assert [o.value for o in objs] == [0, 0, 0xAB00, 0xCD00, 128, 16384, 8192, 7, 1024, 9, 0, 0]
    assert list(params) == [ctypes.addressof(o) for o in objs]
    for obj, i in slots:
        obj.value = (0x1000, 0, 0x3000)[i]
    read = [ctypes.c_uint64.from_address(params[n]).value for n in (0, 1)]
    assert read == [0x1000, 0x3000]
    assert (tuple(cfg.grid), tuple(cfg.block), cfg.shared) == ((2, 64, 1), (128, 1, 1), kernel.metadata.shared)
    assert sub._direct_step(kernel, (2, 64, 1), values[:-1], [(0, 0)]) is None  # one short


def test_nvfp4_direct_launch_passes_the_tma_kernel_its_tensor_maps():
    """I8G with TMA takes host-made descriptors (made in the kernel, each program wrote and fenced three
    before its first load): in the plan's parameter block each is a 128-byte tensor map, filled per call
    with the call's tensor's map, then its shape and strides; the kernel has no global scratch."""
    import ctypes

    import torch

    sub = load_example("triton_nvfp4")
    kernel, consts = _i8g_compiled(sub, 64, 4, True)
    assert kernel.metadata.global_scratch_size == 0 and "tensormap.replace" not in kernel.asm["ptx"]
    a8 = torch.zeros(128 * 16384, dtype=torch.int8)
    descs = [
        sub._Tma(a8, 128, 16384, 16384, (128, 256), 128, torch.int8),
        sub._Tma(sub._B, 7168, 8192, 8192, (64, 128), 0),
        sub._Tma(sub._SB, 7168, 1024, 1024, (64, 16), 0),
    ]
    values = descs + [0] * (len(sub._i8g_kernel.arg_names) - len(consts) - 3) + list(consts.values())
    _cfg, _, _params, _slots, maps, (objs, _) = sub._direct_step(kernel, (112, 1, 1), values, [])
    assert [n for n, _, _ in maps] == [0, 5, 10] and [t for _, t, _ in maps] == descs
    assert [meta["block_size"] for _, _, meta in maps] == [[128, 128], [64, 128], [64, 16]]  # A: two boxes a row
    assert all(objs[n] is None for n, _, _ in maps)
    for n, tma, _ in maps:  # after each map: rows and columns (u32), then the strides (u64)
        assert [type(o) for o in objs[n + 1 : n + 5]] == [ctypes.c_uint32] * 2 + [ctypes.c_uint64] * 2
        assert [o.value for o in objs[n + 1 : n + 5]] == [tma.rows, tma.cols, tma.stride, 1]
    assert objs[-2].value == objs[-1].value == 0  # Triton's scratch pointers, unused


def test_nvfp4_tensor_map_is_encoded_once_then_copied_and_kept_by_address():
    """The direct launch's tensor maps of a call's tensor: the first encoded, one for another address a
    copy of it with the address replaced (encoding every new address made the ranked run host-bound:
    results/probes/h200_runs_ranked_nvfp4_7b9bed5/), and an address seen before costs no libcuda call
    (the batched protocol's inputs come back at the same addresses sample after sample)."""
    import ctypes
    import types

    sub = load_example("triton_nvfp4")
    calls = []

    def encode(at, *a):
        ctypes.memset(at, 0x5A, 128)
        calls.append(("encode", a[2]))
        return 0

    fake = types.SimpleNamespace(
        cuTensorMapEncodeTiled=encode, cuTensorMapReplaceAddress=lambda at, ptr: calls.append(("replace", at, ptr)) or 0
    )
    sub._LIBCUDA[:] = [fake]
    tma = sub._Tma(sub._B, 7168, 8192, 8192, (64, 128), 0)
    meta = {"block_size": [64, 128], "elem_type": 0, "elem_size": 1, "swizzle": 0}
    first = tma.tensor_map((0, 0x1000, 0, 0, 0), meta)
    assert first % 64 == 0 and tma.tensor_map((0, 0x1000, 0, 0, 0), meta) == first
    second = tma.tensor_map((0, 0x2000, 0, 0, 0), meta)
    assert second != first and second % 64 == 0 and ctypes.string_at(second, 128) == b"\x5a" * 128
    assert tma.tensor_map((0, 0x1000, 0, 0, 0), meta) == first and tma.tensor_map((0, 0x2000, 0, 0, 0), meta) == second
    assert calls == [("encode", 0x1000), ("replace", second, 0x2000)]
