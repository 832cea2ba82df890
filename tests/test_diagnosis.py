"""The failure-diagnosis table (harness.engine.diagnosis): one fixture per signature, each checked to
give that signature's line on the device it is meant for, and none where it does not apply."""

from __future__ import annotations

import pytest

from harness.engine import diagnosis
from harness.engine.diagnosis import SIGNATURES, Context, diagnose_result, diagnose_text
from harness.results import CaseResult, DeviceInfo, RunResult, SubmissionInfo

H200 = Context("cuda", "NVIDIA H200", "9.0", "NVIDIA B200")
B200 = Context("cuda", "NVIDIA B200", "10.0", "NVIDIA B200")
H200_AMD_TASK = Context("cuda", "NVIDIA H200", "9.0", "AMD Instinct MI355X")
MI355X = Context("rocm", "AMD Instinct MI355X", "9.5", "NVIDIA B200")
CPU = Context("cpu", "CPU (x86_64)", None, "NVIDIA B200")

NVCC_LINE = (
    "/usr/local/cuda/bin/nvcc -DTORCH_EXTENSION_NAME=fp4 -I/usr/include/python3.11 "
    + "-I/some/include " * 80
    + "-c main.cu -o main.o"
)
# signature name -> (failure text as the libraries print it, the device it fails on, words the line must hold)
FIXTURES = {
    "amd_inline_asm_on_nvidia": (
        "RuntimeError: the worker died ... exited with code 1\n"
        "error: couldn't allocate output register for constraint 'v'",
        H200_AMD_TASK,
        "AMD GPU inline assembly",
    ),
    "hip_flag_on_nvidia": (
        f"Error building extension 'mxfp4'\n{NVCC_LINE} --offload-arch=gfx950\n"
        "nvcc fatal   : Unknown option '--offload-arch=gfx950'",
        H200_AMD_TASK,
        "--offload-arch=gfx950",
    ),
    "cuda_code_on_amd": ("error: invalid instruction: mma.sync.aligned.m16n8k64", MI355X, "NVIDIA-only code"),
    "no_kernel_image": (
        "torch.AcceleratorError: CUDA error: no kernel image is available for execution on the device",
        H200,
        "sm_100a",
    ),
    "fp4_scaled_mm_off_blackwell": (
        "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling cublasLtMatmul",
        H200,
        "torch._scaled_mm",
    ),
    "dot_scaled_e4m3_on_hopper": ("RuntimeError: PassManager::run failed", H200, "tl.dot_scaled with e4m3"),
    "blackwell_only_feature": (
        "triton.compiler.errors.CompilationError: tcgen05_mma is not supported on this target",
        H200,
        "Blackwell-only feature (tcgen05_mma",
    ),
    "vendor_library_missing": ("ModuleNotFoundError: No module named 'aiter'", H200_AMD_TASK, "AMD's aiter"),
    "module_missing": ("ModuleNotFoundError: No module named 'einops'", CPU, "pip install einops"),
    "cuda_header_missing": ("main.cu:3:10: fatal error: cuda_fp4.h: No such file or directory", H200, "CUDA toolkit"),
    "no_gpu": ("AssertionError: Torch not compiled with CUDA enabled", CPU, "needs a GPU"),
    "extension_build_failed": (
        "Error building extension 'gemm'\n[1/2] " + NVCC_LINE + "\n"
        'main.cu(42): error: identifier "__nv_fp4_e2m1" is undefined\n'
        'main.cu(50): error: expected a ";"\nninja: build stopped: subcommand failed.',
        H200,
        'main.cu(42): error: identifier "__nv_fp4_e2m1" is undefined',
    ),
}


def test_every_signature_has_a_fixture():
    assert sorted(FIXTURES) == sorted(s.name for s in SIGNATURES)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_signature_fires_on_its_fixture(name):
    text, ctx, words = FIXTURES[name]
    line = diagnose_text(text, ctx)
    matched = next(s.name for s in SIGNATURES if s.applies(ctx) and diagnosis._fires(s, text))
    assert matched == name
    assert line.startswith("likely cause: ") and words in line and "\n" not in line


def test_build_failure_names_the_compiler_error_not_the_command_line():
    text, ctx, _ = FIXTURES["extension_build_failed"]
    line = diagnose_text(text, ctx)
    assert "nvcc" not in line and "-I/some/include" not in line and len(line) < 500


@pytest.mark.parametrize(
    "name, ctx",
    [
        ("fp4_scaled_mm_off_blackwell", B200),
        ("dot_scaled_e4m3_on_hopper", B200),
        ("blackwell_only_feature", B200),
        ("amd_inline_asm_on_nvidia", MI355X),
        ("cuda_code_on_amd", H200),
        ("no_gpu", H200),
    ],
)
def test_signature_silent_where_it_does_not_apply(name, ctx):
    text = FIXTURES[name][0]
    sig = next(s for s in SIGNATURES if s.name == name)
    assert not sig.applies(ctx)
    line = diagnose_text(text, ctx)
    assert line is None or FIXTURES[name][2] not in line


def test_no_signature_no_line():
    assert diagnose_text("AttributeError: 'Tensor' object has no attribute 'nope'", H200) is None


def _result(verdict, message, stderr="", kind="cuda", capability="9.0"):
    return RunResult(
        task="nvfp4_gemm",
        submission=SubmissionInfo("s.py", "0" * 64, "s"),
        mode="test",
        device=DeviceInfo(name="NVIDIA H200", kind=kind, capability=capability),
        verdict=verdict,
        message=message,
        started_at="2026-01-01T00:00:00",
        stderr=stderr,
        cases=[CaseResult("import", {}, verdict, message)],
    )


def test_diagnosis_reads_stderr_of_a_died_worker():
    res = _result(
        "error",
        "the worker died: it exited with code 1 (os._exit or a fatal error) before it answered",
        stderr="x.hip:10: error: couldn't allocate output register for constraint 'v'",
    )
    assert "AMD GPU inline assembly" in diagnose_result(res, "AMD Instinct MI355X")


def test_no_diagnosis_for_a_pass_or_fail():
    assert diagnose_result(_result("fail", "No module named 'aiter'"), "x") is None
