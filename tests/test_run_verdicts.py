"""Each fixture submission gets its expected verdict, and a bad one never takes the harness down."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from harness.api import RunOptions, run_submission
from harness.cli.main import main
from harness.results import ERROR, FAIL, NOT_RUN, PASS, TIMEOUT, RunResult

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
MXFP4_SMALL = str(FIX / "tasks" / "mxfp4_small" / "task.yml")
NVFP4_SMALL = str(FIX / "tasks" / "nvfp4_small" / "task.yml")
TORCH_MXFP4 = ROOT / "submissions" / "torch_mxfp4.py"
TORCH_NVFP4 = ROOT / "submissions" / "torch_nvfp4.py"


def _run(sub, task=MXFP4_SMALL, mode="test", **opts):
    options = RunOptions(device="cpu", max_repeats=3, **opts)
    return run_submission(sub, task, mode, options)


def test_correct_submission_passes_tests_and_benchmarks():
    r = _run(TORCH_MXFP4, mode="test+benchmark")
    assert r.verdict == PASS, r.message
    assert [c.kind for c in r.cases] == ["test"] * 3 + ["benchmark"] * 2
    bench = r.benchmark_cases()
    assert all(c.stats is not None and c.stats.runs >= 3 for c in bench)
    assert all(len(c.stats.samples_ns) == c.stats.runs for c in bench)
    assert r.score_us is not None and r.score_us > 0
    assert bench[0].baseline_us == 1.0
    assert r.device.kind == "cpu"


def test_correct_nvfp4_with_strided_batched_inputs():
    r = _run(TORCH_NVFP4, task=NVFP4_SMALL, mode="test+benchmark")
    assert r.verdict == PASS, r.message
    assert r.benchmark_cases()[0].stats.runs >= 3


@pytest.mark.parametrize(
    "name, verdict, words",
    [
        ("wrong_zeros.py", FAIL, "mismatch"),
        ("competition_style.py", FAIL, "mismatch"),  # `from task import ...` / `from utils import ...` work
        ("raises.py", ERROR, "deliberate failure"),
        ("segfault.py", ERROR, "segmentation fault"),
        ("syntax_error.py", ERROR, "syntax error"),
        ("import_error.py", ERROR, "'aiter'"),
        ("os_exit.py", ERROR, "exited with code 3"),
        ("kill_self.py", ERROR, "SIGKILL"),
        ("no_entry_point.py", ERROR, "custom_kernel"),
        ("returns_none.py", FAIL, "not a torch.Tensor"),
        ("returns_complex.py", FAIL, "dtype complex64"),
        ("sys_exit.py", ERROR, "sys.exit"),
    ],
)
def test_bad_submission_gets_its_verdict(name, verdict, words):
    r = _run(FIX / "submissions" / name)
    assert r.verdict == verdict, r.message
    assert words.lower() in r.message.lower(), r.message


def test_flooding_output_is_stopped_and_capped():
    r = _run(FIX / "submissions" / "flood.py", output_limit_mb=2)
    assert r.verdict == ERROR
    assert "output flood" in r.message
    assert len(r.stdout) < 20_000 and "bytes left out" in r.stdout


def test_memory_hog_is_killed():
    r = _run(FIX / "submissions" / "memory_hog.py", memory_limit_gb=1.5)
    assert r.verdict == ERROR
    assert "host memory" in r.message


def test_hang_costs_only_its_timeout():
    t0 = time.monotonic()
    r = _run(FIX / "submissions" / "hang.py", timeout_scale=0.1)  # 60 s test timeout -> 6 s
    assert r.verdict == TIMEOUT
    assert time.monotonic() - t0 < 6 + 20
    assert [c.verdict for c in r.cases] == [TIMEOUT, NOT_RUN, NOT_RUN]


def _correct_then(tmp_path, failure: str) -> Path:
    """The torch example, wrapped so that every call after the first does ``failure``."""
    src = TORCH_MXFP4.read_text().replace("def custom_kernel(", "def _correct_kernel(")
    path = tmp_path / "correct_then_bad.py"
    path.write_text(
        src
        + f"""

_calls = 0


def custom_kernel(data):
    global _calls
    _calls += 1
    if _calls > 1:
        {failure}
    return _correct_kernel(data)
"""
    )
    return path


def test_segfault_keeps_cases_measured_before_it(tmp_path):
    sub = _correct_then(tmp_path, "import ctypes; ctypes.string_at(0)")
    r = _run(sub)
    assert [c.verdict for c in r.cases] == [PASS, ERROR, NOT_RUN]
    assert r.verdict == ERROR and "segmentation fault" in r.message


def test_hang_keeps_cases_measured_before_it(tmp_path):
    sub = _correct_then(tmp_path, "while True: pass")
    t0 = time.monotonic()
    r = _run(sub, timeout_scale=0.15)  # 9 s
    assert [c.verdict for c in r.cases] == [PASS, TIMEOUT, NOT_RUN]
    assert time.monotonic() - t0 < 9 + 20


def test_cli_json_schema_and_exit_codes(tmp_path, capsys):
    out = tmp_path / "r.json"
    code = main(
        [
            "run",
            str(TORCH_MXFP4),
            "--task",
            MXFP4_SMALL,
            "--device",
            "cpu",
            "--mode",
            "test",
            "--json",
            str(out),
            "--quiet",
        ]
    )
    assert code == 0
    doc = json.loads(out.read_text())
    for key in ("schema_version", "task", "submission", "mode", "device", "verdict", "score_us", "cases"):
        assert key in doc
    assert set(doc["device"]) >= {"name", "kind", "driver", "torch", "triton"}
    assert RunResult.from_dict(doc).verdict == PASS
    for fixture, code in (("wrong_zeros.py", 1), ("raises.py", 3)):  # a failed check, an error
        argv = ["run", str(FIX / "submissions" / fixture), "--task", MXFP4_SMALL, "--device", "cpu", "--mode", "test"]
        assert main([*argv, "--quiet"]) == code, fixture


def test_usage_errors_name_the_fix(capsys):
    assert main(["run", "does/not/exist.py", "--task", "mxfp4_mm"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["run", str(TORCH_MXFP4), "--task", "no_such_task"]) == 2
    assert "choose one of" in capsys.readouterr().err
    assert main(["run", str(TORCH_MXFP4)]) == 2  # --task missing
    assert main(["run", str(TORCH_MXFP4), "--task", "mxfp4_mm", "--device", "cuda:7"]) == 2


def test_leaderboard_mode_scores_with_secret_inputs():
    r = _run(TORCH_MXFP4, mode="leaderboard", secret="s3cret")
    assert r.verdict == PASS, r.message
    assert [c.kind for c in r.cases] == ["test"] * 3 + ["leaderboard"] * 2
    assert r.score_us is not None


def test_profile_mode_returns_a_table():
    r = _run(TORCH_MXFP4, mode="profile")
    assert r.verdict == PASS, r.message
    assert all("Self CPU" in c.extra["profile_table"] for c in r.cases)


def test_a_timed_call_that_returns_no_tensor_fails_among_checks_read_back_together(tmp_path):
    """Ranked chunks are checked together (Task.check_all: a batched sample's outputs, 2 on the CPU);
    an output that is not a tensor, beside one that passes, still fails the case, named with its
    timed call."""
    from tests.helpers import NVFP4_SMALL, cheat_with_correct_kernel

    sub = cheat_with_correct_kernel(
        tmp_path,
        """
        _calls = [0]

        def custom_kernel(data):
            _calls[0] += 1
            out = _correct_kernel(data)
            return out.tolist() if _calls[0] == 12 else out
        """,
        task=NVFP4_SMALL,
    )
    r = run_submission(
        str(sub), NVFP4_SMALL, "leaderboard", RunOptions(device="cpu", secret="s", max_repeats=6, blocks=1)
    )
    assert r.verdict == FAIL, r.message
    assert "timed call" in r.message and "custom_kernel returned a list, not a torch.Tensor" in r.message, r.message


def test_input_fingerprints_tell_inputs_apart():
    """The worker generates its own inputs; the parent compares fingerprints with its copies. Read back
    together, each input's fingerprint is the one it has alone."""
    import torch

    from harness.protocol import input_fingerprints
    from tasks import load_task

    task = load_task(MXFP4_SMALL)
    case = task.tests[0]
    one, again, other = (task.generate_input(dict(case, seed=case["seed"] + d), "cpu") for d in (0, 0, 1))
    [same] = input_fingerprints([one])
    assert len(same) == sum(isinstance(t, torch.Tensor) for t in one)
    assert input_fingerprints([again]) == [same]
    assert input_fingerprints([other]) != [same]
    assert input_fingerprints([one, (), other, again]) == [same, [], *input_fingerprints([other]), same]
    assert input_fingerprints([]) == []
    # read as 8-byte words and then the last bytes: a change anywhere shows, in a word or in the tail
    odd = torch.arange(8 * 1000 + 3, dtype=torch.int32).to(torch.uint8)
    [[base]] = input_fingerprints([(odd,)])
    assert base == int(odd[:8000].view(torch.int64).sum()) + int(odd[8000:].sum())
    for i in (0, 1, 4001, 8000, 8002):
        changed = odd.clone()
        changed[i] += 1
        assert input_fingerprints([(changed,)]) != [[base]], i


NONDETERMINISTIC_TASK = """
import torch
from tasks.registry import load_task_module

_base = load_task_module({base!r})
ref_kernel, check_implementation, case_problems = _base.ref_kernel, _base.check_implementation, _base.case_problems
case_bytes, case_flops, CASE_KEYS = _base.case_bytes, _base.case_flops, _base.CASE_KEYS


def generate_input(m, n, k, seed, device=None):
    a, *rest = _base.generate_input(m, n, k, seed, device)
    return (a + torch.randn(a.shape, dtype=a.dtype, device=a.device), *rest)   # the global RNG: not its seed
"""


def test_a_task_whose_inputs_do_not_follow_the_seed_is_an_error_that_says_so(tmp_path):
    (tmp_path / "task.yml").write_text(Path(MXFP4_SMALL).read_text().replace("implementation: mxfp4_mm\n", ""))
    (tmp_path / "task.py").write_text(NONDETERMINISTIC_TASK.format(base=str(ROOT / "tasks" / "mxfp4_mm" / "task.py")))
    r = _run(TORCH_MXFP4, task=str(tmp_path / "task.yml"), drop_privileges=False)
    assert r.verdict == ERROR
    assert "must depend only on its seed" in r.message


def test_a_timing_reply_must_carry_what_was_asked():
    """Fewer outputs than asked would leave timed calls unchecked; odd samples cannot come from an
    honest worker: both are rejected (see tests/test_engine_units.py for every reply type)."""
    from harness.messages import Timed
    from harness.protocol import ProtocolError

    obj = {"kind": "object", "type": "int"}
    good = {
        "samples_ns": [1.0, 2.0],
        "tail_ns": [3.0, 4.0],
        "window_ns": [None, 2.5],
        "gate_held": [False, True],
        "unhidden_host_ns": [None, 0.0],
        "idle_sync_ns": [None, 2.0],
        "device_tail_ns": [None, 1.5],
        "outputs": [obj, obj],
        "gate_misses": 0,
        "tampered": [],
        "threads": 1,
    }
    assert Timed.decode(good, [], 2, 2).samples_ns == [1.0, 2.0]
    for bad in (
        dict(good, outputs=[obj]),
        dict(good, samples_ns=[1.0]),
        dict(good, tail_ns="x"),
        dict(good, samples_ns=[1.0, float("nan")]),
        dict(good, samples_ns=[-1.0, 2.0]),
        dict(good, window_ns=[None]),
        dict(good, window_ns=["x", 1.0]),
        dict(good, gate_held=[1, 0]),
        dict(good, unhidden_host_ns=None),
        dict(good, unhidden_host_ns=[float("inf"), 1.0]),
    ):
        with pytest.raises(ProtocolError):
            Timed.decode(bad, [], 2, 2)


def test_submission_caches_and_temp_files_stay_in_its_run_directory(tmp_path):
    """HOME, TMPDIR and torch.compile's cache point into the run's private directory (writable after
    the drop to 'nobody', never shared with another submission); Triton's cache and torch's extension
    builds into the submission's own compile-cache entry (tests/test_compile_cache.py)."""
    src = TORCH_MXFP4.read_text().replace("def custom_kernel(", "def _correct_kernel(")
    sub = tmp_path / "env_probe.py"
    sub.write_text(
        src
        + """

import os
import tempfile


def custom_kernel(data):
    home = os.environ["HOME"]
    for var in ("TMPDIR", "TORCHINDUCTOR_CACHE_DIR"):
        if not os.environ[var].startswith(home):
            raise RuntimeError(f"{var}={os.environ[var]} is outside HOME={home}")
    for var in ("TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR"):
        with open(os.path.join(os.environ[var], "probe"), "w") as f:  # its own entry: writable
            f.write("x")
    if os.path.realpath(tempfile.gettempdir()) != os.path.realpath(home):
        raise RuntimeError(f"tempfile.gettempdir() is {tempfile.gettempdir()}, not {home}")
    return _correct_kernel(data)
"""
    )
    r = _run(sub)
    assert r.verdict == PASS, r.message
