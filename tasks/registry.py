"""Load and validate task specs: ``tasks/<name>/task.yml`` + ``task.py`` -> :class:`Task`.

A task.yml outside ``tasks/`` (e.g. a small-shape copy in a test) names its implementation with
``implementation: <task name>``, or sits next to its own task.py.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

import yaml

__all__ = ["RANKINGS", "TASKS_DIR", "TIMING_PROTOCOLS", "Task", "TaskSpecError", "list_tasks", "load_task"]

TASKS_DIR = Path(__file__).resolve().parent
RANKINGS = ("geom", "mean", "last")  # kernelbot's rank criteria; both tasks use geom
TIMING_PROTOCOLS = ("per_call", "batched")

_REQUIRED = (
    "description",
    "tests",
    "benchmarks",
    "ranking_by",
    "test_timeout",
    "benchmark_timeout",
    "ranked_timeout",
    "target_gpu",
    "rtol",
    "atol",
    "timing",
)
_OPTIONAL = ("baseline", "published_sol_us", "implementation")
_MODULE_FUNCS = ("generate_input", "ref_kernel", "check_implementation", "case_problems", "case_bytes", "case_flops")


class TaskSpecError(ValueError):
    """An invalid task spec; the message names the file, the key (and case index) and the fix."""


@dataclass(frozen=True)
class Task:
    name: str
    path: Path  # the folder holding task.yml
    description: str
    tests: list
    benchmarks: list
    ranking_by: str
    test_timeout: float
    benchmark_timeout: float
    ranked_timeout: float
    target_gpu: str
    rtol: float
    atol: float
    timing_protocol: str  # "per_call" | "batched"
    inputs_per_measurement: int  # 1 for per_call
    original_clear_bytes: int  # what the original loop writes to clear the L2 before a sample (0: unknown)
    baseline_label: str | None
    baseline_us: list | None  # one per benchmark, in order
    published_sol_label: str | None
    published_sol_us: list | None  # one per benchmark, in order
    module: ModuleType  # the loaded task.py
    compat_dir: Path  # put first on a submission's sys.path (``task``, ``utils``)

    def generate_input(self, case: dict, device=None) -> tuple:
        return self.module.generate_input(**case, device=device)

    def reference(self, data):
        return self.module.ref_kernel(data)

    def check(self, data, output) -> tuple[bool, str]:
        return self.module.check_implementation(data, output, rtol=self.rtol, atol=self.atol)

    def check_all(self, pairs: Sequence[tuple[Any, Any]]) -> list[tuple[bool, str]]:
        """:meth:`check` of each (data, output) pair. Where task.py has ``check_flag`` (its verdict as a
        device flag, not read back), every pair's flag is computed first and all are read back together:
        the device runs the references one after another while the host queues them, instead of
        waiting once per output. Only a failed output is checked again, for its report."""
        check_flag = getattr(self.module, "check_flag", None)
        if check_flag is None or len(pairs) < 2:
            return [self.check(data, output) for data, output in pairs]
        import torch  # not at the top: loading a task's spec needs no torch

        flags = [check_flag(data, output, rtol=self.rtol, atol=self.atol) for data, output in pairs]
        computed = [f for f in flags if f is not None]
        passed = iter(torch.stack(computed).tolist() if computed else [])
        return [
            (True, "") if flag is not None and next(passed) else self.check(data, output)
            for (data, output), flag in zip(pairs, flags)
        ]

    def baseline_for(self, case: dict) -> float | None:
        """The published baseline (us) of a benchmark case, or None (no baseline / not a benchmark)."""
        if self.baseline_us is None:
            return None
        for bench, t in zip(self.benchmarks, self.baseline_us):
            if bench == case:
                return t
        return None

    def case_bytes(self, case: dict) -> int:
        return int(self.module.case_bytes(case))

    def case_flops(self, case: dict) -> int:
        return int(self.module.case_flops(case))


# ---------------------------------------------------------------- loading task.py

_MODULES: dict[Path, ModuleType] = {}


def load_task_module(py) -> ModuleType:
    """A task.py, loaded once per process (the worker loads its task's to generate inputs)."""
    py = Path(py).resolve()
    mod = _MODULES.get(py)
    if mod is None:
        digest = hashlib.sha1(str(py).encode()).hexdigest()[:10]
        name = f"_fp4_harness_task_{py.parent.name}_{digest}"
        spec = importlib.util.spec_from_file_location(name, py)
        if spec is None or spec.loader is None:
            raise ImportError(f"{py} cannot be loaded as a Python module")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            del sys.modules[name]
            raise
        _MODULES[py] = mod
    return mod


def _source_only_module(py: Path) -> ModuleType:
    """A stand-in for task.py read from its source, not run: its literal CASE_KEYS, no-op case checks,
    and its contract functions replaced by ones that say the task was loaded without its code."""
    import ast

    tree = ast.parse(py.read_text(encoding="utf-8"), filename=str(py))
    mod = ModuleType(f"_fp4_harness_task_source_{py.parent.name}")
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "CASE_KEYS" for t in node.targets):
            setattr(mod, "CASE_KEYS", tuple(ast.literal_eval(node.value)))  # noqa: B010 (a module built here)
        elif isinstance(node, ast.FunctionDef) and node.name in _MODULE_FUNCS:
            setattr(mod, node.name, _not_loaded(py, node.name))
    if callable(getattr(mod, "case_problems", None)):
        setattr(mod, "case_problems", lambda case: [])  # noqa: B010 (a module built here)
    return mod


def _not_loaded(py: Path, name: str):
    def refuse(*_args, **_kwargs):
        raise RuntimeError(f"{py} was read without running it (load_task(..., import_code=False)); {name} needs it")

    return refuse


# ---------------------------------------------------------------- validation helpers


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v) -> bool:
    return (_is_int(v) or isinstance(v, float)) and math.isfinite(v)


class _Spec:
    """Raises TaskSpecError with the file name in front of every message."""

    def __init__(self, file: Path):
        self.file = file

    def fail(self, key: str, problem: str, fix: str) -> NoReturn:
        raise TaskSpecError(f"{self.file}: {key}: {problem}; {fix}")

    def number(self, raw: dict, key: str, positive: bool = True, nonneg: bool = False) -> float:
        v = raw[key]
        if not _is_num(v):
            self.fail(
                key,
                f"expected a number, got {v!r} ({type(v).__name__})",
                f"write e.g. '{key}: 0.01' (plain decimal; YAML reads 1e-2 as a string)",
            )
        if positive and v <= 0:
            self.fail(key, f"must be > 0, got {v!r}", "use a positive number")
        if nonneg and v < 0:
            self.fail(key, f"must be >= 0, got {v!r}", "use a non-negative number")
        return v

    def string(self, raw: dict, key: str) -> str:
        v = raw[key]
        if not isinstance(v, str) or not v.strip():
            self.fail(key, f"expected a non-empty string, got {v!r}", f"write e.g. '{key}: some text'")
        return v

    def times(self, block: dict, key: str, n_bench: int) -> list:
        t = block.get("times")
        if not isinstance(t, list) or not all(_is_num(x) and x > 0 for x in t):
            self.fail(
                f"{key}.times",
                f"expected a list of positive numbers, got {t!r}",
                "give one time in microseconds per benchmark case",
            )
        if len(t) != n_bench:
            self.fail(
                f"{key}.times",
                f"has {len(t)} entries but there are {n_bench} benchmarks",
                "give exactly one time per benchmark case, in benchmark order",
            )
        return [float(x) for x in t]

    def cases(self, raw: dict, key: str, module: ModuleType) -> list:
        cases = raw[key]
        keys = tuple(module.CASE_KEYS)
        if not isinstance(cases, list) or not cases:
            self.fail(
                key,
                f"expected a non-empty list of cases, got {cases!r}",
                "write e.g. '- {" + ", ".join(f"{k}: 1" for k in keys) + "}'",
            )
        out = []
        for i, case in enumerate(cases):
            where = f"{key}[{i}]"
            if not isinstance(case, dict):
                self.fail(where, f"expected a mapping, got {case!r}", f"give the keys {', '.join(keys)}")
            unknown = sorted(set(case) - set(keys))
            if unknown:
                self.fail(
                    f"{where}.{unknown[0]}",
                    f"unknown case key (allowed: {', '.join(keys)})",
                    "remove it or fix its spelling",
                )
            missing = [k for k in keys if k not in case]
            if missing:
                self.fail(f"{where}.{missing[0]}", "missing case key", f"add '{missing[0]}: <int>'")
            for k in keys:
                if not _is_int(case[k]):
                    self.fail(f"{where}.{k}", f"expected an integer, got {case[k]!r}", "use a whole number")
            problems = module.case_problems(case)
            if problems:
                bad_key = next((k for k in keys if problems[0].startswith(f"{k}=")), keys[0])
                self.fail(f"{where}.{bad_key}", problems[0], "fix this case's shape")
            out.append(dict(case))
        return out


# ---------------------------------------------------------------- public API

# Small-shape copies for quick CPU checks, by name: 'mxfp4_mm:small', or the copy's own name
# ('mxfp4_small', under which its runs are stored).
SMALL_COPIES_DIR = TASKS_DIR.parent / "tests" / "fixtures" / "tasks"
SMALL_COPIES = {"mxfp4_mm": "mxfp4_small", "nvfp4_gemm": "nvfp4_small"}
SMALL_SUFFIX = ":small"


def small_copy_name(task: str) -> str | None:
    """'mxfp4_mm:small' for a task that has a small copy, else None."""
    return task + SMALL_SUFFIX if task in SMALL_COPIES else None


def _small_copy(name: str) -> Path | None:
    if name.endswith(SMALL_SUFFIX):
        base = name[: -len(SMALL_SUFFIX)]
        if base not in SMALL_COPIES:
            raise TaskSpecError(
                f"no small copy of task {base!r}; small copies: " + ", ".join(t + SMALL_SUFFIX for t in SMALL_COPIES)
            )
        folder = SMALL_COPIES[base]
    elif name in SMALL_COPIES.values():
        folder = name
    else:
        return None
    path = SMALL_COPIES_DIR / folder / "task.yml"
    return path.resolve() if path.is_file() else None


def _resolve(name_or_path) -> Path:
    p = Path(name_or_path)
    if isinstance(name_or_path, str) and "/" not in name_or_path:
        small = _small_copy(name_or_path)
        if small is not None:
            return small
    if (
        isinstance(name_or_path, str)
        and "/" not in name_or_path
        and not name_or_path.endswith(".yml")
        and (TASKS_DIR / name_or_path / "task.yml").is_file()
    ):
        return TASKS_DIR / name_or_path / "task.yml"
    if p.is_dir():
        p = p / "task.yml"
    if p.is_file():
        return p.resolve()
    raise TaskSpecError(
        f"no task {str(name_or_path)!r}{_did_you_mean(str(name_or_path))}: neither a folder under {TASKS_DIR} nor a task.yml "
        f"or task folder; choose one of: {', '.join(list_tasks()) or '(none)'} (or a small copy for quick CPU "
        f"checks: {', '.join(t + SMALL_SUFFIX for t in SMALL_COPIES)})"
    )


def _did_you_mean(name: str) -> str:
    """' (did you mean 'mxfp4_mm'?)' for a close misspelling of a task or small-copy name, else ''."""
    import difflib

    names = list_tasks() + [t + SMALL_SUFFIX for t in SMALL_COPIES]
    close = difflib.get_close_matches(name, names, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def list_tasks() -> list[str]:
    """Names of the task folders under ``tasks/`` (those with a task.yml)."""
    return sorted(p.parent.name for p in TASKS_DIR.glob("*/task.yml") if not p.parent.name.startswith("_"))


def load_task(name_or_path, *, import_code: bool = True) -> Task:
    """Load a task by name (``"mxfp4_mm"``) or by path to a task.yml or a folder holding one.

    ``import_code=False`` reads the spec without importing its task.py (which loads torch), for a listing:
    the case keys and the contract's function names come from task.py's source, the cases' own shape
    checks (``case_problems``) are not run, and ``Task.module`` refuses to generate, check or count."""
    file = _resolve(name_or_path)
    v = _Spec(file)
    try:
        raw = yaml.safe_load(file.read_text())
    except yaml.YAMLError as exc:
        raise TaskSpecError(f"{file}: not valid YAML ({exc}); fix the syntax") from exc
    if not isinstance(raw, dict):
        v.fail(
            "(top level)",
            f"expected a mapping of keys, got {type(raw).__name__}",
            f"write 'key: value' lines with the keys {', '.join(_REQUIRED)}",
        )
    for key in raw:
        if key not in _REQUIRED and key not in _OPTIONAL:
            v.fail(str(key), "unknown key", f"remove it or use one of: {', '.join(_REQUIRED + _OPTIONAL)}")
    for key in _REQUIRED:
        if key not in raw:
            v.fail(key, "missing required field", f"add '{key}:' (see tasks/mxfp4_mm/task.yml for an example)")

    # which task.py implements it
    impl = raw.get("implementation")
    if impl is not None:
        if not isinstance(impl, str) or not (TASKS_DIR / impl / "task.py").is_file():
            v.fail(
                "implementation", f"{impl!r} is not a task under {TASKS_DIR}", f"use one of: {', '.join(list_tasks())}"
            )
        impl_dir = TASKS_DIR / impl
    elif (file.parent / "task.py").is_file():
        impl_dir = file.parent
    else:
        v.fail(
            "implementation",
            "missing, and there is no task.py next to this task.yml",
            f"add 'implementation: <task>' with one of: {', '.join(list_tasks())}",
        )
    module = load_task_module(impl_dir / "task.py") if import_code else _source_only_module(impl_dir / "task.py")
    missing_funcs = [f for f in _MODULE_FUNCS if not callable(getattr(module, f, None))]
    if missing_funcs or not hasattr(module, "CASE_KEYS"):
        v.fail(
            "implementation",
            f"{impl_dir / 'task.py'} lacks {', '.join(missing_funcs) or 'CASE_KEYS'}",
            "define the task contract functions there",
        )

    description = v.string(raw, "description")
    target_gpu = v.string(raw, "target_gpu")
    tests = v.cases(raw, "tests", module)
    benchmarks = v.cases(raw, "benchmarks", module)
    ranking = raw["ranking_by"]
    if ranking not in RANKINGS:
        v.fail("ranking_by", f"unknown ranking {ranking!r}", f"use one of: {', '.join(RANKINGS)}")
    timeouts = {k: v.number(raw, k) for k in ("test_timeout", "benchmark_timeout", "ranked_timeout")}
    rtol = float(v.number(raw, "rtol", positive=False, nonneg=True))
    atol = float(v.number(raw, "atol", positive=False, nonneg=True))

    timing = raw["timing"]
    if not isinstance(timing, dict):
        v.fail("timing", f"expected a mapping, got {timing!r}", "write 'timing: {protocol: per_call}'")
    for key in timing:
        if key not in ("protocol", "inputs_per_measurement", "original_clear_bytes"):
            v.fail(
                f"timing.{key}",
                "unknown key",
                "use only 'protocol', 'inputs_per_measurement' and 'original_clear_bytes'",
            )
    protocol = timing.get("protocol")
    if protocol not in TIMING_PROTOCOLS:
        v.fail("timing.protocol", f"unknown timing protocol {protocol!r}", f"use one of: {', '.join(TIMING_PROTOCOLS)}")
    per = timing.get("inputs_per_measurement", 1 if protocol == "per_call" else None)
    if not isinstance(per, int) or isinstance(per, bool) or per < 1:
        v.fail(
            "timing.inputs_per_measurement",
            f"expected a positive integer, got {per!r}",
            "batched timing needs e.g. 'inputs_per_measurement: 50'",
        )
    clear = timing.get("original_clear_bytes", 0)
    if not _is_int(clear) or clear < 0:
        v.fail(
            "timing.original_clear_bytes",
            f"expected a non-negative integer, got {clear!r}",
            "give the bytes the original timing loop writes to clear the L2, e.g. 268435456, or leave it out",
        )
    if protocol == "per_call" and per != 1:
        v.fail(
            "timing.inputs_per_measurement",
            f"is {per} but per_call timing measures one input",
            "remove it or use protocol: batched",
        )

    def labelled(key: str, allowed: tuple, unit: bool):
        block = raw.get(key)
        if block is None:
            return None, None
        if not isinstance(block, dict):
            v.fail(key, f"expected a mapping, got {block!r}", f"give {', '.join(allowed)}")
        for k in block:
            if k not in allowed:
                v.fail(f"{key}.{k}", "unknown key", f"use only: {', '.join(allowed)}")
        label = block.get("label")
        if not isinstance(label, str) or not label:
            v.fail(f"{key}.label", f"expected a non-empty string, got {label!r}", "say what was measured where")
        if unit and block.get("unit") != "us":
            v.fail(f"{key}.unit", f"expected 'us', got {block.get('unit')!r}", "give times in microseconds: 'unit: us'")
        return label, v.times(block, key, len(benchmarks))

    baseline_label, baseline_us = labelled("baseline", ("label", "unit", "times"), unit=True)
    sol_label, sol_us = labelled("published_sol_us", ("label", "times"), unit=False)

    name = file.parent.name if file.name == "task.yml" else file.stem
    return Task(
        name=name,
        path=file.parent,
        description=description,
        tests=tests,
        benchmarks=benchmarks,
        ranking_by=ranking,
        test_timeout=timeouts["test_timeout"],
        benchmark_timeout=timeouts["benchmark_timeout"],
        ranked_timeout=timeouts["ranked_timeout"],
        target_gpu=target_gpu,
        rtol=rtol,
        atol=atol,
        timing_protocol=protocol,
        inputs_per_measurement=per,
        original_clear_bytes=clear,
        baseline_label=baseline_label,
        baseline_us=baseline_us,
        published_sol_label=sol_label,
        published_sol_us=sol_us,
        module=module,
        compat_dir=impl_dir / "compat",
    )
