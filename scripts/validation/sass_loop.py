"""Counts the SASS instructions of triton_mxfp4's main loop (the loop around its first wgmma) for one
benchmark shape's config, compiled for sm_90 on this machine (no GPU needed: Triton's own ptxas and
nvdisasm), and writes them per opcode to a JSON file:

    python scripts/validation/sass_loop.py --m 64 --out results/probes/cpu_sass_mxfp4_m64_<commit>.json
        [--config 64,64,256,1,3,4,4,1] [--submission path/to/triton_mxfp4.py]

The count is per loop iteration (one BLOCK_K chunk) and per thread; what it costs on the GPU is for the
GPU to show.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import importlib.util
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tasks import load_task  # noqa: E402

POINTERS = {
    "a_ptr": "*bf16",
    "a2_ptr": "*bf16",
    "a8_ptr": "*fp8e4nv",
    "base_ptr": "*i32",
    "bq_ptr": "*u8",
    "bs_ptr": "*u8",
    "c_ptr": "*bf16",
    "ws_ptr": "*fp32",
    "cnt_ptr": "*i32",
}


def load(path: Path):
    task = load_task("mxfp4_mm")
    sys.path.insert(0, str(task.compat_dir))
    spec = importlib.util.spec_from_file_location("triton_mxfp4", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return task, module


def compile_gemm(sub, cfg: tuple, segments: bool):
    """triton_mxfp4's GEMM (module sub) for sm_90 as custom_kernel would launch it with config cfg
    (segments: whether it loads B's scales as segments, sub._segments for the shape)."""
    bn, bm, bk, split, pre_a, warps, stages, swap = cfg
    consts = {
        "BLOCK_N": bn,
        "BLOCK_M": bm,
        "BLOCK_K": bk,
        "SPLIT_K": split,
        "PRE_A": pre_a in (1, sub.FP8),
        "INTERP": False,
        "PIPELINED": stages > 1,
        "SWAP_AB": bool(swap),
        "FP8": pre_a == sub.FP8,
        "SEGMENTS": segments,
        "PDL": bool(pre_a),
    }
    params = sub._mxfp4_mm_kernel.arg_names
    sig = {p: "constexpr" if p in consts else POINTERS.get(p, "i32") for p in params}
    aligned = [p for p in params if p.endswith("_ptr")] + ["N", "K", "stride_am", "stride_bn", "K_SPLIT"]
    attrs = {(i,): [["tt.divisibility", 16]] for i, p in enumerate(params) if p in aligned}
    src = triton.compiler.ASTSource(sub._mxfp4_mm_kernel, sig, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages})


def loop_opcodes(sass: str) -> collections.Counter:
    """Opcodes between the label that opens the loop around the first wgmma and its backward branch."""
    lines = sass.splitlines()
    first = next(i for i, line in enumerate(lines) if re.search(r"\b[HQI]GMMA\.", line))
    start = max(i for i in range(first) if re.match(r"\.L_x_\d+:", lines[i]))
    label = lines[start].rstrip(":")
    end = next(i for i in range(first, len(lines)) if re.search(rf"BRA\s+`\({re.escape(label)}\)", lines[i]))
    ops = collections.Counter()
    for line in lines[start : end + 1]:
        op = re.match(r"\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
        if op:
            ops[op.group(1)] += 1
    return ops


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--m", type=int, required=True, help="the mxfp4_mm benchmark shape of this m")
    ap.add_argument("--config", help="a config tuple (default: the file's for the shape)")
    ap.add_argument("--submission", type=Path, default=ROOT / "submissions" / "triton_mxfp4.py")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    task, sub = load(args.submission)
    case = next((c for c in task.benchmarks if c["m"] == args.m), None)
    if case is None:
        print(f"sass_loop: no mxfp4_mm benchmark shape has m={args.m}", file=sys.stderr)
        return 2
    shape = (case["m"], case["n"], case["k"])
    cfg = tuple(int(x) for x in args.config.split(",")) if args.config else tuple(sub.CONFIGS[shape])
    if cfg[4] == sub.PREPARE:
        print(f"sass_loop: config {cfg} is PREPARE (cuBLAS), which has no Triton GEMM loop", file=sys.stderr)
        return 2
    kernel = compile_gemm(sub, cfg, sub._segments(cfg[2], cfg[3], shape[2], cfg[6]))
    nvdisasm = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"])
        f.flush()
        sass = subprocess.run([str(nvdisasm), "-c", f.name], capture_output=True, text=True, check=True).stdout
    ops = loop_opcodes(sass)
    doc = {
        "script": "scripts/validation/sass_loop.py",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "triton": triton.__version__,
        "target": "sm_90",
        "submission": str(args.submission),
        "shape": case,
        "config": list(cfg),
        "loop_instructions": sum(ops.values()),
        "opcodes": dict(ops.most_common()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{shape} {cfg}: {doc['loop_instructions']} SASS instructions a loop iteration (Triton {triton.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
