"""Task registry: loading, validation errors that name file/key/fix, derived numbers, compat shims."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import tasks
from tasks import Task, TaskSpecError, list_tasks, load_task
from tasks.registry import TASKS_DIR


def test_list_tasks():
    assert list_tasks() == ["mxfp4_mm", "nvfp4_gemm"]


def test_mxfp4_fields():
    t = load_task("mxfp4_mm")
    assert isinstance(t, Task) and t.name == "mxfp4_mm" and t.path == TASKS_DIR / "mxfp4_mm"
    assert len(t.tests) == 4 and len(t.benchmarks) == 6
    assert t.tests[0] == {"m": 8, "n": 2112, "k": 7168, "seed": 124}
    assert (t.test_timeout, t.benchmark_timeout, t.ranked_timeout) == (420, 420, 600)
    assert t.ranking_by == "geom" and t.rtol == t.atol == 0.01
    assert t.timing_protocol == "per_call" and t.inputs_per_measurement == 1
    assert t.original_clear_bytes == 16000 * 1024 * 1024 * 4  # GPU MODE's torch.randn((16000, 1024, 1024))
    assert t.baseline_label == "AMD aiter on MI355X"
    assert t.baseline_us == [8.198, 20.873, 9.462, 9.173, 12.738, 12.219]
    assert t.published_sol_us is None
    assert t.compat_dir == TASKS_DIR / "mxfp4_mm" / "compat"
    assert (t.rtol, t.atol) == (t.module.RTOL, t.module.ATOL)


def test_nvfp4_fields():
    t = load_task("nvfp4_gemm")
    assert len(t.tests) == 10 and len(t.benchmarks) == 3
    assert all(c["seed"] == 1111 and c["l"] == 1 for c in t.tests + t.benchmarks)
    assert t.benchmarks[0] == {"m": 128, "n": 7168, "k": 16384, "l": 1, "seed": 1111}
    assert (t.test_timeout, t.benchmark_timeout, t.ranked_timeout) == (180, 180, 180)
    assert t.rtol == t.atol == 0.001 == t.module.RTOL
    assert t.timing_protocol == "batched" and t.inputs_per_measurement == 50
    assert t.original_clear_bytes == 32 * 1024 * 1024 * 8  # torch.empty((32, 1024, 1024), int64).fill_
    assert t.published_sol_label == "B200 at 1.5 GHz" and t.published_sol_us == [8.994, 2.354, 1.333]
    assert t.baseline_us is None and t.baseline_for(t.benchmarks[0]) is None


def test_baseline_bytes_flops():
    t = load_task("mxfp4_mm")
    case = {"m": 16, "n": 2112, "k": 7168, "seed": 15}
    assert t.baseline_for(case) == 20.873
    assert t.baseline_for({"m": 1, "n": 16, "k": 64, "seed": 0}) is None
    assert t.case_bytes(case) == 16 * 7168 * 2 + 2112 * 7168 // 2 + 2112 * 7168 // 32 + 16 * 2112 * 2
    assert t.case_flops(case) == 2 * 16 * 2112 * 7168
    nv = load_task("nvfp4_gemm")
    c = {"m": 128, "n": 256, "k": 512, "l": 2, "seed": 1}
    assert nv.case_bytes(c) == 2 * (128 * 256 + 256 * 256 + 128 * 32 + 256 * 32 + 128 * 256 * 2)
    assert nv.case_flops(c) == 2 * 128 * 256 * 512 * 2


def test_load_by_folder_and_file_path():
    a = load_task(TASKS_DIR / "mxfp4_mm")
    b = load_task(str(TASKS_DIR / "mxfp4_mm" / "task.yml"))
    assert a.name == b.name == "mxfp4_mm" and a.module is b.module


def test_unknown_task_names_choices():
    with pytest.raises(TaskSpecError, match="mxfp4_mm, nvfp4_gemm"):
        load_task("no_such_task")


# ---------------------------------------------------------------- small copies and bad specs


def _small_spec(tmp_path: Path, name="mx_small", **changes) -> Path:
    raw = yaml.safe_load((TASKS_DIR / "mxfp4_mm" / "task.yml").read_text())
    raw.update(
        implementation="mxfp4_mm",
        tests=[{"m": 4, "n": 32, "k": 128, "seed": 1}],
        benchmarks=[{"m": 2, "n": 16, "k": 64, "seed": 2}, {"m": 8, "n": 48, "k": 256, "seed": 3}],
        baseline={"label": "made up", "unit": "us", "times": [1.0, 2.0]},
    )
    for key, value in changes.items():
        if value is None:
            raw.pop(key, None)
        else:
            raw[key] = value
    folder = tmp_path / name
    folder.mkdir()
    (folder / "task.yml").write_text(yaml.safe_dump(raw))
    return folder / "task.yml"


def test_small_copy_loads_and_runs(tmp_path):
    t = load_task(_small_spec(tmp_path))
    assert t.name == "mx_small" and t.module is load_task("mxfp4_mm").module
    assert t.compat_dir == TASKS_DIR / "mxfp4_mm" / "compat"
    data = t.generate_input(t.tests[0], "cpu")
    assert t.check(data, t.reference(data)) == (True, "")
    assert t.baseline_for(t.benchmarks[1]) == 2.0


def test_nvfp4_small_copy(tmp_path):
    raw = yaml.safe_load((TASKS_DIR / "nvfp4_gemm" / "task.yml").read_text())
    raw.update(
        implementation="nvfp4_gemm",
        tests=[{"m": 128, "n": 128, "k": 256, "l": 2, "seed": 1}],
        benchmarks=[{"m": 128, "n": 256, "k": 256, "l": 1, "seed": 1}],
        published_sol_us={"label": "x", "times": [1.0]},
    )
    (tmp_path / "task.yml").write_text(yaml.safe_dump(raw))
    t = load_task(tmp_path)
    data = t.generate_input(t.tests[0], "cpu")
    assert t.check(data, t.reference(data))[0]


@pytest.mark.parametrize(
    "changes,key,words",
    [
        ({"colour": "red"}, "colour", "unknown key"),
        ({"rtol": None}, "rtol", "missing required field"),
        ({"tests": [{"m": 4, "n": 32, "k": 96, "seed": 1}]}, "tests[0].k", "multiple of 64"),
        ({"tests": [{"m": 4, "n": 24, "k": 128, "seed": 1}]}, "tests[0].n", "multiple of 16"),
        (
            {"benchmarks": [{"m": 4, "n": 32, "k": 128, "seed": 1}, {"m": 4, "n": 32, "k": 128}]},
            "benchmarks[1].seed",
            "missing case key",
        ),
        ({"tests": [{"m": 4, "n": 32, "k": 128, "seed": 1, "l": 1}]}, "tests[0].l", "unknown case key"),
        ({"tests": [{"m": "4", "n": 32, "k": 128, "seed": 1}]}, "tests[0].m", "expected an integer"),
        ({"tests": []}, "tests", "non-empty list"),
        ({"ranking_by": "fastest"}, "ranking_by", "unknown ranking"),
        ({"timing": {"protocol": "warp"}}, "timing.protocol", "unknown timing protocol"),
        ({"timing": {"protocol": "batched"}}, "timing.inputs_per_measurement", "positive integer"),
        (
            {"timing": {"protocol": "per_call", "inputs_per_measurement": 50}},
            "timing.inputs_per_measurement",
            "per_call",
        ),
        (
            {"timing": {"protocol": "per_call", "original_clear_bytes": -1}},
            "timing.original_clear_bytes",
            "non-negative integer",
        ),
        ({"timing": {"protocol": "per_call", "clear": 1}}, "timing.clear", "unknown key"),
        ({"baseline": {"label": "x", "unit": "us", "times": [1.0]}}, "baseline.times", "2 benchmarks"),
        ({"baseline": {"label": "x", "unit": "ms", "times": [1.0, 2.0]}}, "baseline.unit", "'us'"),
        ({"rtol": "1e-2"}, "rtol", "expected a number"),
        ({"test_timeout": -5}, "test_timeout", "must be > 0"),
        ({"target_gpu": 3}, "target_gpu", "non-empty string"),
        ({"implementation": "nope"}, "implementation", "not a task"),
        ({"implementation": None}, "implementation", "no task.py next to"),
    ],
)
def test_bad_spec_names_file_key_and_fix(tmp_path, changes, key, words):
    path = _small_spec(tmp_path, **changes)
    with pytest.raises(TaskSpecError) as err:
        load_task(path)
    msg = str(err.value)
    assert str(path) in msg and f": {key}:" in msg and words in msg
    assert "; " in msg.split(f": {key}:", 1)[1]  # a fix follows the problem


def test_nvfp4_bad_shapes(tmp_path):
    raw = yaml.safe_load((TASKS_DIR / "nvfp4_gemm" / "task.yml").read_text())
    raw["implementation"] = "nvfp4_gemm"
    for bad, key in (
        ({"m": 100, "n": 128, "k": 256, "l": 1, "seed": 1}, "tests[0].m"),
        ({"m": 128, "n": 130, "k": 256, "l": 1, "seed": 1}, "tests[0].n"),
        ({"m": 128, "n": 128, "k": 128, "l": 1, "seed": 1}, "tests[0].k"),
    ):
        raw["tests"] = [bad]
        f = tmp_path / "task.yml"
        f.write_text(yaml.safe_dump(raw))
        with pytest.raises(TaskSpecError) as err:
            load_task(f)
        assert f"task.yml: {key}:" in str(err.value)


def test_task_spec_error_is_value_error():
    assert issubclass(TaskSpecError, ValueError) and tasks.TaskSpecError is TaskSpecError


# ---------------------------------------------------------------- GPU MODE compat shims


@pytest.mark.parametrize("name", ["mxfp4_mm", "nvfp4_gemm"])
def test_compat_imports_in_fresh_process(name):
    compat = TASKS_DIR / name / "compat"
    code = (
        f"import sys; sys.path.insert(0, {str(compat)!r})\n"
        "from task import input_t, output_t, TestSpec\n"
        "from utils import make_match_reference, verbose_allclose, verbose_allequal, set_seed, get_device, "
        "DeterministicContext, clear_l2_cache, match_reference\n"
        "import torch\n"
        "assert input_t.__bound__ is not None and 'seed' in TestSpec.__annotations__\n"
        "check = make_match_reference(lambda d: d[0] * 2, rtol=1e-3, atol=1e-3)\n"
        "x = torch.ones(3)\n"
        "assert check((x,), x * 2) == (True, '')\n"
        "ok, msg = check((x,), x)\n"
        "assert not ok and 'mismatched elements: 3 of 3' in msg, msg\n"
        "assert verbose_allequal(x, x) == [] and verbose_allclose(x, x + 1)[0].startswith('Number')\n"
        "with DeterministicContext(): set_seed(1)\n"
        "clear_l2_cache(); print(get_device(), 'l' in TestSpec.__annotations__)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert res.returncode == 0, res.stderr
    assert res.stdout.split()[1] == str(name == "nvfp4_gemm")
