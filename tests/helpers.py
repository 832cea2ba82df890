"""What several test modules share: paths of the small task copies and the examples, a cheating-file
builder (a correct kernel plus an attack body), a run shortcut, a CLI runner, synthetic results
(``make_result``) for the store and leaderboard tests, an example loader (``load_example``), and the
controls of triton_nvfp4's fallback tests (``NVFP4_BAD_SCALES``, ``nvfp4_path_alone``)."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

from harness.api import RunOptions, run_submission
from harness.results import PASS, CaseResult, DeviceInfo, RunResult, Stats, SubmissionInfo

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures"
MXFP4_SMALL = str(FIX / "tasks" / "mxfp4_small" / "task.yml")
NVFP4_SMALL = str(FIX / "tasks" / "nvfp4_small" / "task.yml")
CORRECT = {MXFP4_SMALL: ROOT / "submissions" / "torch_mxfp4.py", NVFP4_SMALL: ROOT / "submissions" / "torch_nvfp4.py"}
SECRET = "adversarial-secret-7f3a9c"


# a submission body (after cheat_with_correct_kernel's correct kernel) that logs its import and every call
# (with the first operand's sum) to its compile-cache entry, the one folder that outlives a run and the
# worker may write
LOGS_EVERY_CALL = """
import json as _json
import os as _os
import time as _time


def _log(event, **fields):
    # the compile-cache entry is the one folder that outlives the run and the worker may write
    with open(_os.path.join(_os.environ["TRITON_CACHE_DIR"], "events.jsonl"), "a") as f:
        f.write(_json.dumps({"pid": _os.getpid(), "event": event, "t": _time.time(), **fields}) + "\\n")


_log("import")


def custom_kernel(data):
    _log("call", a=float(data[0].float().sum()), m=data[0].shape[0])
    return _correct_kernel(data)
"""


def cheat_with_correct_kernel(tmp_path: Path, body: str, task: str = MXFP4_SMALL, name: str = "cheat") -> Path:
    """A submission file: the task's torch example with its entry point renamed ``_correct_kernel``,
    followed by ``body`` (which defines the cheating ``custom_kernel``)."""
    src = CORRECT[task].read_text().replace("def custom_kernel(", "def _correct_kernel(")
    path = tmp_path / f"{name}.py"
    path.write_text(src + "\n\n" + textwrap.dedent(body))
    return path


def run(sub, task=MXFP4_SMALL, mode="leaderboard", device="cpu", **opts):
    """``run_submission`` with small budgets; leaderboard runs get the tests' fixed secret."""
    opts.setdefault("max_repeats", 3)
    if mode == "leaderboard":
        opts.setdefault("secret", SECRET)
    return run_submission(sub, task, mode, RunOptions(device=device, **opts))


def cli(args, env=None, timeout=180, cwd=ROOT) -> subprocess.CompletedProcess:
    """``python -m harness ARGS`` in a fresh process (what an operator types), from the repository root
    (or ``cwd``: the repository then comes from $PYTHONPATH)."""
    env = dict(os.environ if env is None else env)
    if Path(cwd) != ROOT and str(ROOT) not in env.get("PYTHONPATH", "").split(os.pathsep):
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "harness", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


SHAPES = [{"m": 4, "n": 2880, "k": 512, "seed": 1}, {"m": 32, "n": 4096, "k": 512, "seed": 2}]


def make_result(
    name="fast",
    means_us=(10.0, 20.0),
    *,
    rel_noise=0.01,
    n=20,
    verdict=PASS,
    task="mxfp4_mm",
    device="NVIDIA H200",
    kind="cuda",
    mode="leaderboard",
    sha=None,
    started_at="2026-11-01T10:00:00+00:00",
    complete=True,
    message="",
    shapes=SHAPES,
) -> RunResult:
    """A synthetic run: per-shape samples spread evenly around the given means (in us)."""
    cases = [CaseResult(kind="test", spec=dict(shapes[0]), verdict=verdict, message=message)]
    for spec, mean in zip(shapes, means_us):
        # deterministic samples with mean exactly `mean` and relative std about rel_noise
        offsets = [(i - (n - 1) / 2) / ((n - 1) / 2) for i in range(n)]
        samples = [mean * 1e3 * (1 + rel_noise * 1.7 * o) for o in offsets]
        stats = Stats.from_samples(samples) if verdict == PASS else None
        cases.append(CaseResult(kind="benchmark", spec=dict(spec), verdict=verdict, stats=stats))
    sha = sha or hashlib.sha256(name.encode()).hexdigest()
    return RunResult(
        task=task,
        submission=SubmissionInfo(path=f"/subs/{name}.py", sha256=sha, name=name),
        mode=mode,
        device=DeviceInfo(name=device, kind=kind, torch="2.13.0"),
        verdict=verdict,
        message=message,
        score_us=None,
        cases=cases,
        started_at=started_at,
        finished_at=started_at,
        wall_s=1.5,
        harness_version="0.1.0",
        complete=complete,
    )


@contextlib.contextmanager
def listening_sockets(prefix: str):
    """A listening TCP socket on 127.0.0.1 and a listening abstract unix socket in this process, for
    sandbox tests to reach for: yields (tcp port, abstract socket name)."""
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    name = f"{prefix}-{os.getpid()}"
    unix = socket.socket(socket.AF_UNIX)
    unix.bind("\0" + name)
    unix.listen()
    try:
        yield tcp.getsockname()[1], name
    finally:
        tcp.close()
        unix.close()


def load_example(name: str, task=None):
    """submissions/<name>.py as a fresh module in this process; with a task, its compat folder first on
    sys.path, as the harness runs a submission."""
    if task is not None:
        sys.path.insert(0, str(task.compat_dir))
    spec = importlib.util.spec_from_file_location(f"{name}_example", ROOT / "submissions" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# triton_nvfp4's fallback tests (CPU interpreter and GPU): (operand, e4m3 scale byte, row, block) of one
# scale its FP8 and INT8 paths cannot fold, B's 1.125 (0x39) or A's 0.5625 (0x31), in the first
# 64-row x 256-K tile and in later ones, B's also in the second 64 rows of a 128-row tile (the I8G fold
# takes a tile 64 rows at a time); the first kernel writes a flag per tile; the FP8 loop checks B's
# scales itself
NVFP4_BAD_SCALES = ((3, 0x39, 5, 3), (3, 0x39, 130, 20), (3, 0x39, 200, 20), (2, 0x31, 5, 3), (2, 0x31, 69, 20))


def nvfp4_path_alone(data, a_dec: int):
    """What triton_nvfp4's FP8 (a_dec 2) or INT8 (3) path alone would compute, with no fallback: both
    operands rounded to e4m3, or 2 * value cut to an integer as the int8 conversion does."""
    import torch

    from fp4_reference.nvfp4 import dequantize_nvfp4

    a, b, sfa, sfb = (x.permute(2, 0, 1) for x in data[:4])
    da, db = dequantize_nvfp4(a, sfa).double(), dequantize_nvfp4(b, sfb).double()
    if a_dec == 2:
        da, db = da.to(torch.float8_e4m3fn).double(), db.to(torch.float8_e4m3fn).double()
    else:
        da, db = torch.trunc(da * 2) / 2, torch.trunc(db * 2) / 2
    return (da @ db.transpose(1, 2)).half().permute(1, 2, 0)
