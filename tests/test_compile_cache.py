"""The compile cache (harness.engine.compile_cache): a file's Triton cache and extension builds are kept
between its runs, and one submission can neither read nor write another's entry. The attacking
submission reports each attempt's outcome on its stdout, which the run captures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.api import RunOptions, run_submission
from harness.engine.compile_cache import Toolchain, cache_key, isolation_possible
from harness.results import PASS, DeviceInfo

ROOT = Path(__file__).resolve().parent.parent
MXFP4_SMALL = str(ROOT / "tests" / "fixtures" / "tasks" / "mxfp4_small" / "task.yml")
TORCH_MXFP4 = ROOT / "submissions" / "torch_mxfp4.py"
needs_isolation = pytest.mark.skipif(not isolation_possible(), reason="needs Landlock (no shared cache without it)")

LEAVES_A_KERNEL = """
import json, os
_own = os.environ["TRITON_CACHE_DIR"]
_seen = os.path.exists(os.path.join(_own, "kernel.bin"))
with open(os.path.join(_own, "kernel.bin"), "w") as f:
    f.write("compiled by the victim")
print(json.dumps({"own": _own, "found_own_kernel": _seen}))
"""

# what each attack below starts with: its own cache entry, and each attempt's outcome as [errno name, detail]
ATTEMPTS = """
import json, os
_own = os.environ["TRITON_CACHE_DIR"]
def _try(fn):
    try:
        return ["allowed", fn()]
    except OSError as exc:
        return [type(exc).__name__, str(exc)]
def _write_own():
    with open(os.path.join(_own, "mine.bin"), "w") as f:
        f.write("mine")
"""

ATTACKS = (
    ATTEMPTS
    + """
_victim = __VICTIM__
def _plant():
    with open(os.path.join(_victim, "planted.bin"), "w") as f:
        f.write("planted by the attacker")
print(json.dumps({
    "ran": True,
    "read_victim": _try(lambda: open(os.path.join(_victim, "kernel.bin")).read()),
    "list_victim": _try(lambda: os.listdir(_victim)),
    "list_root": _try(lambda: os.listdir(os.path.dirname(os.path.dirname(_own)))),
    "write_victim": _try(_plant),
    "write_own": _try(_write_own),
}))
"""
)


def _submission(tmp_path: Path, name: str, prelude: str) -> Path:
    path = tmp_path / name
    path.write_text(prelude + "\n" + TORCH_MXFP4.read_text())
    return path


def _run(path: Path, cache: Path):
    return run_submission(
        path, MXFP4_SMALL, "test", RunOptions(device="cpu", max_repeats=3, triton_cache_dir=str(cache))
    )


def _report(result) -> dict:
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    assert lines, f"the submission printed no report: stdout={result.stdout!r} message={result.message}"
    return json.loads(lines[-1])


def test_the_key_follows_the_source_and_the_toolchain():
    info = DeviceInfo(name="NVIDIA H200", kind="cuda", triton="3.6.0", capability="9.0")
    chain = Toolchain.here(info, "mxfp4_mm")
    assert cache_key(b"a", chain) == cache_key(b"a", chain)
    assert cache_key(b"a", chain) != cache_key(b"a ", chain)
    other = Toolchain.here(DeviceInfo(name="NVIDIA H100", kind="cuda", triton="3.6.0", capability="9.0"), "mxfp4_mm")
    assert cache_key(b"a", chain) != cache_key(b"a", other)


@needs_isolation
def test_a_file_finds_its_own_compiled_code_on_its_next_run(tmp_path):
    sub = _submission(tmp_path, "victim.py", LEAVES_A_KERNEL)
    first, second = _run(sub, tmp_path / "cache"), _run(sub, tmp_path / "cache")
    assert first.verdict == second.verdict == PASS, (first.message, second.message)
    seen1, seen2 = _report(first), _report(second)
    assert seen1["own"] == seen2["own"] and seen1["own"].startswith(str(tmp_path / "cache"))
    assert not seen1["found_own_kernel"] and seen2["found_own_kernel"]


@needs_isolation
def test_a_submission_can_neither_read_nor_write_another_ones_entry(tmp_path):
    cache = tmp_path / "cache"
    victim = _run(_submission(tmp_path, "victim.py", LEAVES_A_KERNEL), cache)
    victim_dir = _report(victim)["own"]
    assert (Path(victim_dir) / "kernel.bin").exists()
    attacker = _run(_submission(tmp_path, "attacker.py", ATTACKS.replace("__VICTIM__", repr(victim_dir))), cache)
    seen = _report(attacker)
    assert seen["ran"] and seen["write_own"][0] == "allowed", seen  # the attack ran, in a working sandbox
    for attempt in ("read_victim", "list_victim", "list_root", "write_victim"):
        assert seen[attempt][0] == "PermissionError", (attempt, seen[attempt])
    assert not (Path(victim_dir) / "planted.bin").exists()
    assert attacker.verdict == PASS, attacker.message


def test_a_root_every_worker_can_read_is_refused(tmp_path, monkeypatch):
    from harness.engine.compile_cache import entry_for

    chain = Toolchain.here(DeviceInfo(name="cpu", kind="cpu"), "mxfp4_mm")
    monkeypatch.setattr("sys.path", [*__import__("sys").path, str(tmp_path)])  # the path is readable
    assert entry_for(str(tmp_path / "cache"), b"x", chain, for_nobody=False) is None
    monkeypatch.undo()
    if isolation_possible():
        assert entry_for(str(tmp_path / "cache"), b"x", chain, for_nobody=False) is not None


PLANTS_IN_THE_HARNESS_KERNELS = (
    ATTEMPTS
    + """
_kernels = __KERNELS__
def _plant():
    os.makedirs(_kernels, exist_ok=True)
    with open(os.path.join(_kernels, "planted.bin"), "w") as f:
        f.write("a launch gate that opens early")
print(json.dumps({
    "own": _own,
    "list_kernels": _try(lambda: os.listdir(_kernels)),
    "write_kernels": _try(_plant),
    "write_own": _try(_write_own),
}))
"""
)


@needs_isolation
def test_a_submission_cannot_replace_the_harness_own_kernels_in_their_cache(tmp_path):
    """The launch gate's and the device clock's kernels are compiled into an entry of their own while the
    worker starts; the worker seals it read-only before importing the submission. Their path is no secret
    (their source and the toolchain are public): a submission that writes there would time its next
    blocks, and every later run on the machine, with a gate of its own."""
    import torch

    from harness.engine.compile_cache import harness_kernels_source
    from harness.engine.device import device_info

    chain = Toolchain.here(device_info(torch.device("cpu")), "")
    kernels = tmp_path / "cache" / cache_key(harness_kernels_source(), chain) / "triton"
    sub = _submission(tmp_path, "attacker.py", PLANTS_IN_THE_HARNESS_KERNELS.replace("__KERNELS__", repr(str(kernels))))
    result = _run(sub, tmp_path / "cache")
    seen = _report(result)
    assert kernels.is_dir(), "the run made no entry for the harness's kernels"
    assert result.sandbox["harness_kernels_cache"] == "sealed", result.sandbox
    assert seen["write_own"][0] == "allowed", seen  # the attack ran, and its own entry stays writable
    assert seen["list_kernels"][0] == "allowed", seen  # reading the harness's kernels gives nothing away
    assert seen["write_kernels"][0] == "PermissionError", seen
    assert not (kernels / "planted.bin").exists()
    assert result.verdict == PASS, result.message


@needs_isolation
@pytest.mark.gpu
def test_on_a_gpu_the_harness_kernels_compile_into_their_own_entry_and_not_the_submissions(tmp_path, monkeypatch):
    import torch

    from harness.engine.compile_cache import harness_kernels_source
    from harness.engine.device import device_info

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    # the default root, under a fresh cache home (run as root, the worker is 'nobody', who cannot enter
    # pytest's folders: the run then takes the shared root, as a real one does; an explicit
    # --triton-cache-dir there would not be used at all)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    sub = _submission(tmp_path, "victim.py", LEAVES_A_KERNEL)
    result = run_submission(sub, MXFP4_SMALL, "test", RunOptions(device="cuda", max_repeats=3))
    assert result.verdict == PASS, result.message
    assert result.sandbox["harness_kernels_cache"] == "sealed", (result.sandbox, result.warnings)
    own = Path(_report(result)["own"])
    chain = Toolchain.here(device_info(torch.device("cuda")), "")
    kernels = own.parent.parent / cache_key(harness_kernels_source(), chain) / "triton"
    names = lambda folder: {p.name for p in folder.rglob("*") if p.is_file()}  # noqa: E731
    if result.timing_method and result.timing_method.startswith("launch gate"):
        assert any(n.startswith("gate_kernel") for n in names(kernels)), sorted(names(kernels))
    assert not any(n.startswith(("gate_kernel", "stamp_kernel")) for n in names(own)), sorted(names(own))
