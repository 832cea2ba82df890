"""Failure diagnosis: one line naming the likely cause of a failed import, compile or run, and what to do.

The known signatures live in ONE table, :data:`SIGNATURES`, each with a fixture text in
``tests/test_diagnosis.py``. A signature matches the failure's text (the verdict message, the
tracebacks and the submission's stderr) and, where it says so, only on some devices: code written for
one GPU family says nothing useful about a failure on the same family. The first match wins, so the
specific signatures come before the general ones. Torch-free: it reads a RunResult only.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.results import RunResult


@dataclass(frozen=True)
class Context:
    device_kind: str  # "cuda" | "rocm" | "cpu"
    device_name: str
    capability: str | None  # e.g. "9.0"
    target_gpu: str  # the task's target, e.g. "NVIDIA B200"

    @property
    def on_nvidia(self) -> bool:
        return self.device_kind == "cuda"

    @property
    def on_amd(self) -> bool:
        return self.device_kind == "rocm"

    @property
    def on_blackwell(self) -> bool:
        try:
            return self.on_nvidia and float(self.capability or 0) >= 10.0
        except ValueError:
            return False


@dataclass(frozen=True)
class Signature:
    name: str
    pattern: re.Pattern
    applies: Callable[[Context], bool]
    explain: Callable[[re.Match, Context], str]


def _always(_ctx: Context) -> bool:
    return True


def _here(ctx: Context) -> str:
    return f"{ctx.device_name}" + (f" (compute capability {ctx.capability})" if ctx.capability else "")


def _target(ctx: Context) -> str:
    return f"the task's target GPU, {ctx.target_gpu}"


VENDOR_LIBRARIES = {
    "aiter": "AMD's aiter (installed on the MI355X competition machines)",
    "quark": "AMD Quark (installed on the MI355X competition machines)",
    "hip": "AMD's HIP Python bindings (ROCm machines only)",
    "cutlass": "NVIDIA CUTLASS's Python DSL (installed on the B200 competition machines)",
    "cuda": "NVIDIA's cuda-python bindings (installed on the B200 competition machines)",
    "flashinfer": "FlashInfer (installed on the B200 competition machines)",
    "deep_gemm": "DeepGEMM (installed on the B200 competition machines)",
}


def _vendor(m: re.Match, ctx: Context) -> str:
    lib = m.group(1).split(".")[0]
    return (
        f"the submission imports {m.group(1)!r}: {VENDOR_LIBRARIES[lib]}, which is not installed here; "
        f"install it (pip install {lib}, on a machine it supports) or run on {_target(ctx)}, or write "
        f"the kernel without it"
    )


def _first_compiler_error(m: re.Match, _ctx: Context) -> str:
    return (
        f"the extension build failed; the compiler's first error: {m.group(1).strip()[:300]} "
        f"(fix that line; the full build log is in the submission's stderr)"
    )


SIGNATURES: tuple[Signature, ...] = (
    Signature(
        "amd_inline_asm_on_nvidia",
        re.compile(r"couldn't allocate (?:output|input) register for constraint '[vs]'"),
        lambda c: not c.on_amd,
        lambda m, c: (
            f"AMD GPU inline assembly (register constraint 'v'/'s' is a VGPR/SGPR) cannot "
            f"compile for {_here(c)}; this code is written for AMD GPUs: run it on an AMD GPU "
            f"such as {_target(c)}, or replace the asm with portable code"
        ),
    ),
    Signature(
        "hip_flag_on_nvidia",
        re.compile(r"nvcc fatal\s*:\s*Unknown option '?(-*(?:offload-arch|amdgpu|hip)[^' ]*)"),
        lambda c: not c.on_amd,
        lambda m, c: (
            f"a HIP/ROCm compiler flag ({m.group(1)}) reached "
            f"NVIDIA's nvcc: this extension is written for AMD GPUs (ROCm); run it on an AMD "
            f"GPU such as {_target(c)}, or remove the HIP flags and port the code to CUDA"
        ),
    ),
    Signature(
        "cuda_code_on_amd",
        re.compile(r"(ptxas|\bPTX\b|mma\.sync|cp\.async|nvcc fatal|cuda_fp4\.h|tcgen05)", re.I),
        lambda c: c.on_amd,
        lambda m, c: (
            f"NVIDIA-only code ({m.group(1)}) on the AMD GPU {_here(c)}: this submission is "
            f"written for NVIDIA GPUs; run it on one such as {_target(c)} or port it to HIP"
        ),
    ),
    Signature(
        "no_kernel_image",
        re.compile(r"no kernel image is available for execution on the device"),
        _always,
        lambda m, c: (
            f"the compiled kernel targets another GPU architecture than {_here(c)} (for example "
            f"an sm_100a image built for B200): rebuild it for this GPU (e.g. set "
            f"TORCH_CUDA_ARCH_LIST to this device's capability, or drop the 'a' arch-specific "
            f"target) or run on {_target(c)}"
        ),
    ),
    Signature(
        "fp4_scaled_mm_off_blackwell",
        re.compile(r"CUBLAS_STATUS_NOT_SUPPORTED"),
        lambda c: not c.on_blackwell,
        lambda m, c: (
            f"cuBLAS refused the matmul on {_here(c)}: FP4 torch._scaled_mm (block-scaled "
            f"e2m1) needs a Blackwell GPU (sm_100 or later); run on {_target(c)}, or dequantize "
            f"to bf16 and use torch.matmul for a check here"
        ),
    ),
    Signature(
        "dot_scaled_e4m3_on_hopper",
        re.compile(r"PassManager::run failed"),
        lambda c: c.on_nvidia and not c.on_blackwell,
        lambda m, c: (
            f"Triton could not lower the kernel for {_here(c)}; the usual cause is "
            f"tl.dot_scaled with e4m3 (nvfp4) scales, which compiles only for Blackwell: run "
            f"on {_target(c)}, or dequantize inside the kernel and use tl.dot for this GPU"
        ),
    ),
    Signature(
        "blackwell_only_feature",
        re.compile(
            r"\b(tcgen05\w*|TMEM|tensor_memory\w*|nvidia\.blackwell|SM100\w*|sm_100a?|UMMA\w*|"
            r"Blackwell)\b",
            re.I,
        ),
        lambda c: not c.on_blackwell and not c.on_amd,
        lambda m, c: (
            f"the kernel uses a Blackwell-only feature ({m.group(1)}: B200, sm_100) that "
            f"{_here(c)} lacks; run on {_target(c)}, or use a Hopper/Ampere code path here"
        ),
    ),
    Signature(
        "vendor_library_missing",
        re.compile(r"No module named '((?:" + "|".join(VENDOR_LIBRARIES) + r")(?:\.[\w.]+)?)'"),
        _always,
        _vendor,
    ),
    Signature(
        "module_missing",
        re.compile(r"No module named '([\w.]+)'"),
        _always,
        lambda m, c: (
            f"the Python module {m.group(1)!r} is not installed here; install it (pip install "
            f"{m.group(1).split('.')[0]}) or remove the import (a submission may import torch, "
            f"triton, numpy and the task's own modules: see docs/tasks/)"
        ),
    ),
    Signature(
        "cuda_header_missing",
        re.compile(
            r"fatal error:\s*((?:cuda|cublas|cusparse|curand|nv|cute/|cutlass/|thrust/|cub/)"
            r"[\w/.]*\.h\w*): No such file or directory"
        ),
        _always,
        lambda m, c: (
            f"the CUDA header {m.group(1)} was not found: the build needs the CUDA toolkit "
            f"(nvcc and headers) matching torch's CUDA version; install it or set CUDA_HOME to "
            f"it"
            + (
                " (cute/ and cutlass/ come with CUTLASS: add its include folder)"
                if m.group(1).startswith(("cute/", "cutlass/"))
                else ""
            )
        ),
    ),
    Signature(
        "no_gpu",
        re.compile(
            r"Found no NVIDIA driver|Torch not compiled with CUDA enabled|"
            r"No CUDA GPUs are available|CUDA driver initialization failed"
        ),
        lambda c: c.device_kind == "cpu",
        lambda m, c: (
            "the submission needs a GPU and this run is on the CPU: use tensors on data's device "
            "(A.device) instead of 'cuda', or run on a GPU machine"
        ),
    ),
    Signature(
        "extension_build_failed",
        re.compile(
            r"^(?!.*(?:nvcc|c\+\+|g\+\+|hipcc|clang\+?\+?)\s+-)(.*?\b(?:error|fatal error)\s*:.*)$", re.M | re.I
        ),
        lambda c: True,
        _first_compiler_error,
    ),
)

_BUILD_FAILED = re.compile(
    r"Error building extension|error: command .* failed|ninja: build stopped|"
    r"CalledProcessError: Command '\['ninja'",
    re.I,
)


def diagnose_text(text: str, ctx: Context) -> str | None:
    """The first signature that matches ``text`` on this device, as one line; None when none does."""
    for sig in SIGNATURES:
        m = _fires(sig, text) if sig.applies(ctx) else None
        if m:
            return f"likely cause: {sig.explain(m, ctx)}"
    return None


def _fires(sig: Signature, text: str) -> re.Match | None:
    if sig.name == "extension_build_failed" and not _BUILD_FAILED.search(text):
        return None  # a compiler error line counts only inside a failed extension build
    return sig.pattern.search(text)


def failure_text(result: RunResult) -> str:
    """Everything a failed RunResult says about its failure: message, case messages, tracebacks, stderr."""
    parts = [result.message or ""]
    for c in result.cases:
        parts += [c.message or "", str(c.extra.get("traceback") or "")]
    parts.append(result.stderr or "")
    return "\n".join(parts)


def diagnose_result(result: RunResult, target_gpu: str) -> str | None:
    """The diagnosis line of a run that did not pass with an error (import, compile, crash); else None."""
    if result.verdict not in ("error", "timeout"):
        return None
    d = result.device
    return diagnose_text(failure_text(result), Context(d.kind, d.name, d.capability, target_gpu))
