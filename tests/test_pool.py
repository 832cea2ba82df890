"""The warm-worker pool (harness.engine.pool, harness.worker.zygote): what one submission leaves behind
never reaches the next, a pooled worker holds nothing of the server, and a dead server means a spawned
worker with a warning, never a wrong verdict. Each submission here reports what it saw on its stdout,
which the run captures."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from harness.api import RunOptions, run_submission
from harness.engine.pool import shared_pool
from harness.results import PASS

ROOT = Path(__file__).resolve().parent.parent
MXFP4_SMALL = str(ROOT / "tests" / "fixtures" / "tasks" / "mxfp4_small" / "task.yml")
TORCH_MXFP4 = ROOT / "submissions" / "torch_mxfp4.py"

LEAVES_TRACES = """
import json, os, sys, types, torch
torch._left_by_a = "A"
os.environ["HARNESS_LEFT_BY_A"] = "A"
with open("left_by_a.txt", "w") as f:
    f.write("A")
sys.modules["left_by_a"] = types.ModuleType("left_by_a")
import harness.worker.sampler as _sampler
_sampler.LEFT_BY_A = "A"
_real_matmul = torch.matmul
def _patched(*a, **k):
    return _real_matmul(*a, **k)
_patched.left_by_a = True
torch.matmul = _patched
print(json.dumps({"a_ran": True, "pid": os.getpid(), "patched": getattr(torch.matmul, "left_by_a", False)}))
torch.matmul = _real_matmul  # the integrity check would reject A; B must not see the patch either way
torch.matmul_left_by_a = _patched
"""

LOOKS_FOR_TRACES = """
import json, os, sys, torch
import harness.worker.sampler as _sampler
print(json.dumps({
    "pid": os.getpid(),
    "torch_attr": hasattr(torch, "_left_by_a") or hasattr(torch, "matmul_left_by_a"),
    "environ": os.environ.get("HARNESS_LEFT_BY_A"),
    "file": os.path.exists("left_by_a.txt"),
    "module": "left_by_a" in sys.modules,
    "global": hasattr(_sampler, "LEFT_BY_A"),
    "matmul_patched": getattr(torch.matmul, "left_by_a", False),
}))
"""

INSPECTS_ITS_HANDLES = """
import json, os, signal
def _links():
    out = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            out[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return out
def _try(fn):
    try:
        fn()
        return "allowed"
    except OSError as exc:
        return type(exc).__name__
SERVER = int(os.environ.get("HARNESS_TEST_SERVER_PID", "0")) or __SERVER__
print(json.dumps({
    "links": _links(),
    "ppid": os.getppid(),
    "signal_server": _try(lambda: os.kill(SERVER, 0)),
    "server_fds": _try(lambda: [os.readlink(f"/proc/{SERVER}/fd/{fd}") for fd in os.listdir(f"/proc/{SERVER}/fd")]),
    "server_mem": _try(lambda: open(f"/proc/{SERVER}/mem", "rb").close()),
    "server_environ": _try(lambda: open(f"/proc/{SERVER}/environ", "rb").read()),
}))
"""


def _submission(tmp_path: Path, name: str, prelude: str) -> Path:
    path = tmp_path / name
    path.write_text(prelude + "\n" + TORCH_MXFP4.read_text())
    return path


def _run(path: Path):
    return run_submission(path, MXFP4_SMALL, "test", RunOptions(device="cpu", max_repeats=3))


def _report(result) -> dict:
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    assert lines, f"the submission printed no report: stdout={result.stdout!r} message={result.message}"
    return json.loads(lines[-1])


@pytest.fixture
def pool():
    import torch

    p = shared_pool(interpret=not torch.cuda.is_available())  # the pool the runs below use
    if p is None:
        pytest.skip("the pool is turned off ($HARNESS_NO_WORKER_POOL)")
    p.warm()
    return p


def test_nothing_one_submission_leaves_reaches_the_next(tmp_path, pool):
    a = _run(_submission(tmp_path, "a.py", LEAVES_TRACES))
    b = _run(_submission(tmp_path, "b.py", LOOKS_FOR_TRACES))
    seen_a, seen_b = _report(a), _report(b)
    assert seen_a["a_ran"] and seen_a["patched"], "A's code did not run: the test would prove nothing"
    assert a.sandbox["started_by"] == b.sandbox["started_by"] == "pool", (a.warnings, b.warnings)
    assert seen_a["pid"] != seen_b["pid"]
    assert b.verdict == PASS, b.message
    leaked = {k: v for k, v in seen_b.items() if k != "pid" and v}
    assert leaked == {}, f"B saw what A left: {leaked}"


def _socket_and_pipe_inodes(links) -> set[str]:
    return {link for link in links if link.startswith(("socket:", "pipe:"))}


def test_a_pooled_worker_holds_no_handle_to_the_server(tmp_path, pool):
    pid = pool.server_pid
    r = _run(_submission(tmp_path, "inspect.py", INSPECTS_ITS_HANDLES.replace("__SERVER__", str(pid))))
    assert r.sandbox["started_by"] == "pool", r.warnings
    assert pool.server_pid == pid, "the server was replaced during the run"
    seen = _report(r)
    server_links = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
    server_ipc = _socket_and_pipe_inodes(server_links)
    assert any(link.startswith("socket:") for link in server_links), "the server's control socket was not found"
    shared = _socket_and_pipe_inodes(seen["links"].values()) & server_ipc
    assert shared == set(), f"the worker holds the server's own socket or pipe: {shared}"
    sockets = [link for link in seen["links"].values() if link.startswith("socket:")]
    assert len(sockets) == 1, f"the worker should hold only its channel to the harness: {seen['links']}"
    assert seen["ppid"] == os.getpid(), "the pooled worker is not the harness's child"
    reached = [k for k in ("signal_server", "server_fds", "server_mem", "server_environ") if seen[k] == "allowed"]
    assert reached == [], f"the worker reached the server: {seen}"


def test_a_dead_server_means_a_spawned_worker_and_a_warning(tmp_path, pool, monkeypatch):
    sub = _submission(tmp_path, "plain.py", "")
    first = _run(sub)
    assert first.verdict == PASS and first.sandbox["started_by"] == "pool", first.warnings
    killed = pool.server_pid
    os.kill(killed, signal.SIGKILL)
    end = time.monotonic() + 10
    while pool._proc is not None and pool._proc.poll() is None and time.monotonic() < end:
        time.sleep(0.05)
    # `run` warms the pool first, which would replace the dead server: the fork must find it dead
    monkeypatch.setattr("harness.engine.run.warm_shared_pool", lambda device=None: None)
    second = _run(sub)
    assert second.verdict == PASS, second.message
    assert second.sandbox["started_by"] == "spawn"
    assert any("pool was not used" in w and "died" in w for w in second.warnings), second.warnings
    monkeypatch.undo()
    third = _run(sub)  # the next run's warm() replaced the dead server
    assert third.verdict == PASS and third.sandbox["started_by"] == "pool", third.warnings
    assert pool.server_pid not in (None, killed)


LEAVES_CUDA_STATE = """
import json, torch
_kept = torch.ones(1 << 22, device="cuda")  # 16 MiB held by A's module
torch.backends.cuda.matmul.allow_tf32 = True
torch.cuda.set_per_process_memory_fraction(0.5)
print(json.dumps({"a_ran": True, "allocated": torch.cuda.memory_allocated(), "tf32": torch.backends.cuda.matmul.allow_tf32}))
"""

LOOKS_FOR_CUDA_STATE = """
import json, torch
print(json.dumps({
    "allocated": torch.cuda.memory_allocated(),
    "tf32": torch.backends.cuda.matmul.allow_tf32,
    "reserved": torch.cuda.memory_reserved(),
}))
"""


@pytest.mark.gpu
def test_cuda_state_one_submission_leaves_is_not_the_next_ones(tmp_path, pool):
    opts = RunOptions(device="cuda", max_repeats=3)
    looks = _submission(tmp_path, "b.py", LOOKS_FOR_CUDA_STATE)
    before = run_submission(looks, MXFP4_SMALL, "test", opts)  # B alone: what the harness itself allocates
    a = run_submission(_submission(tmp_path, "a.py", LEAVES_CUDA_STATE), MXFP4_SMALL, "test", opts)
    after = run_submission(looks, MXFP4_SMALL, "test", opts)
    seen_a, seen_before, seen_after = _report(a), _report(before), _report(after)
    assert seen_a["a_ran"] and seen_a["allocated"] >= 1 << 24 and seen_a["tf32"], seen_a
    assert {r.sandbox["started_by"] for r in (before, a, after)} == {"pool"}, (a.warnings, after.warnings)
    assert after.verdict == PASS, after.message
    assert not seen_after["tf32"], seen_after
    assert seen_after["allocated"] == seen_before["allocated"], (seen_before, seen_after)


SHOWS_ITS_ENVIRONMENT = """
import json, os
from multiprocessing import resource_tracker
_initial = open("/proc/self/environ", "rb").read()
print(json.dumps({"set_after_start": os.environ.get("HARNESS_TEST_SET_LATER"),
                  "store": os.environ.get("HARNESS_STORE"), "store_in_initial": b"HARNESS_STORE=" in _initial,
                  "tracker_fd": resource_tracker._resource_tracker._fd}))
"""


def test_a_pooled_worker_gets_the_harness_environment_of_now(tmp_path, pool, monkeypatch):
    """A Ray worker process changes CUDA_VISIBLE_DEVICES from task to task: the worker must see the
    value at its start, not the one the server was started with."""
    monkeypatch.setenv("HARNESS_STORE", "postgresql://harness:password@db/harness")
    pool.close()  # a server started with the store's URL in this process's environment
    pool.warm()
    monkeypatch.setenv("HARNESS_TEST_SET_LATER", "now")
    r = _run(_submission(tmp_path, "env.py", SHOWS_ITS_ENVIRONMENT))
    seen = _report(r)
    assert r.sandbox["started_by"] == "pool", r.warnings
    assert seen["set_after_start"] == "now", seen
    assert seen["tracker_fd"] is not None, "the worker would start a resource tracker of its own"
    assert seen["store"] is None and not seen["store_in_initial"], "the worker can read the store's URL"


def _memory_holds(pid: int, needles: list[bytes]) -> dict[bytes, bool]:
    """Whether each needle is anywhere in the writable memory of process ``pid`` (root reads it)."""
    found = dict.fromkeys(needles, False)
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            if not fields[1].startswith("rw"):
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            try:
                mem.seek(start)
                chunk = mem.read(end - start)
            except (OSError, OverflowError, ValueError):
                continue
            for needle in needles:
                found[needle] = found[needle] or needle in chunk
    return found


def test_the_server_keeps_nothing_of_a_request_it_served(tmp_path, pool):
    """Every worker is a copy of the server's memory: after a fork the server holds nothing of that
    job's configuration (the submission's name, its run folder)."""
    token = f"marker{os.getpid()}x{time.time_ns()}"
    r = _run(_submission(tmp_path, f"{token}.py", ""))
    assert r.verdict == PASS and r.sandbox["started_by"] == "pool", r.warnings
    try:
        found = _memory_holds(pool.server_pid, [token.encode(), b"harness.worker.zygote"])
    except PermissionError:
        pytest.skip("reading the server's memory needs root")
    assert found[b"harness.worker.zygote"], "the scan read nothing: it would prove nothing"
    assert not found[token.encode()], "the server still holds the last job's submission name"


def _plain_worker_config(tmp_path: Path):
    """A CPU worker for a file that returns its input, in its own run folder under ``tmp_path``."""
    from harness.worker.config import WorkerConfig

    run = tmp_path / "run"
    run.mkdir()
    (run / "submission.py").write_text("def custom_kernel(data):\n    return data\n")
    return WorkerConfig(
        submission_path=str(run / "submission.py"),
        compat_dir=str(tmp_path),
        device="cpu",
        l2_bytes=None,
        hide_bytes=0,
        stdout_path=str(run / "stdout.txt"),
        stderr_path=str(run / "stderr.txt"),
        run_dir=str(run),
    )


def test_a_server_started_by_the_first_fork_is_not_taken_for_the_submissions_child(tmp_path):
    """A caller that never warmed the pool (the first fork starts the server): the server is the
    harness's own child, not a process the submission left running, and survives the run."""
    from harness.engine.pool import WorkerPool
    from harness.engine.supervisor import Supervisor

    fresh = WorkerPool()
    try:
        sup = Supervisor(_plain_worker_config(tmp_path), memory_limit_bytes=8 << 30)
        sup.start(time.monotonic() + 120, fresh)
        assert sup.started_by == "pool", sup.pool_warning
        assert [p.pid for p in sup.strays()] == [], "the server was counted as the submission's child"
        sup.stop()
        assert fresh._proc is not None and fresh._proc.poll() is None, "stopping the worker killed the server"
    finally:
        fresh.close()


def test_a_fresh_servers_first_fork_reports_its_wait_and_tritons_key_is_ready_with_the_imports(tmp_path):
    """The first worker of a process waits for the server's imports (the run's phase
    worker_start.pool_ready); the next one does not. The server computes Triton's key in a thread beside
    its imports and has it before it reports ready, with no other thread left to fork beside."""
    from harness.engine.pool import WorkerPool
    from harness.engine.supervisor import Supervisor

    fresh = WorkerPool()
    try:
        waits = []
        for i in range(2):
            (tmp_path / str(i)).mkdir()
            sup = Supervisor(_plain_worker_config(tmp_path / str(i)), memory_limit_bytes=8 << 30)
            sup.start(time.monotonic() + 120, fresh)
            assert sup.started_by == "pool", sup.pool_warning
            waits.append(sup.pool_ready_wait_s)
            sup.stop()
        assert waits[0] > 0 and waits[1] == 0, waits
        assert fresh.info is not None and fresh.info.loaded.get("triton_key") == "computed", fresh.info
    finally:
        fresh.close()


def test_a_pooled_worker_that_dies_before_it_starts_is_replaced_by_a_spawned_one(tmp_path, pool, monkeypatch):
    """A pooled worker told to wait for a parent it never gets exits before its first message (before
    any submission code): the pool's failure, so a spawned worker runs the file and the verdict stands."""
    from harness.worker.zygote import ForkRequest

    def lost(config, harness_pid, environ, **more):
        return ForkRequest(config, 1, environ, **more)  # pid 1 never becomes its parent

    monkeypatch.setattr("harness.engine.pool.ForkRequest", lost)
    monkeypatch.setattr("harness.engine.run.warm_shared_pool", lambda device=None: None)
    r = _run(_submission(tmp_path, "plain.py", ""))
    assert r.verdict == PASS, r.message
    assert r.sandbox["started_by"] == "spawn"
    assert any("died before it started" in w for w in r.warnings), r.warnings


def test_the_server_ends_with_the_process_that_started_it(tmp_path):
    """Its control socket closes when the harness dies (here: a child process killed with SIGKILL)."""
    import subprocess
    import sys

    script = (
        "import sys, time; from harness.engine.pool import WorkerPool\n"
        "p = WorkerPool(); p.warm(); print(p.server_pid, flush=True); time.sleep(120)\n"
    )
    harness = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        server = int(harness.stdout.readline())
        os.kill(server, 0)  # running
    finally:
        harness.kill()
        harness.wait()
    end = time.monotonic() + 120  # it finishes its imports first, then reads the hang-up
    while time.monotonic() < end:
        try:
            with open(f"/proc/{server}/stat") as f:
                if f.read().split(")")[-1].split()[0] == "Z":
                    break
        except FileNotFoundError:
            break
        time.sleep(0.2)
    else:
        os.kill(server, signal.SIGKILL)
        raise AssertionError("the server outlived the harness that started it")


class _Interrupt(BaseException):
    """What run-all's signal handler raises (harness.engine.stop_signals.Stopped): a BaseException."""


def test_a_signal_while_a_worker_is_forked_leaves_no_worker_and_the_next_fork_reads_its_own_reply(
    tmp_path, pool, monkeypatch
):
    """The signal's exception arrives while the pool waits for the server's reply: the server forks the
    worker anyway. That worker is killed (it would run on in a run folder being removed), the reply is
    read, and the next run's fork gets its own worker from the same server."""
    import tempfile

    import psutil

    from harness.engine.pool import FORK_TIMEOUT_S, WorkerPool

    sub = _submission(tmp_path, "plain.py", "")
    assert _run(sub).sandbox["started_by"] == "pool"  # the server is ready: the next fork is the one cut
    server = pool.server_pid
    before = {p.pid for p in psutil.Process().children()}
    real, cut = WorkerPool._receive, []

    def interrupted(self, timeout):
        if timeout == FORK_TIMEOUT_S and not cut:  # the first fork's reply: the request is in flight
            cut.append(True)
            raise _Interrupt()
        return real(self, timeout)

    monkeypatch.setattr(WorkerPool, "_receive", interrupted)
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    with pytest.raises(_Interrupt):
        _run(sub)
    assert cut, "the fork was never interrupted: the fault never fired"
    time.sleep(1.0)  # a worker left running would have been forked and re-parented to us by now
    left = [(p.pid, p.status()) for p in psutil.Process().children() if p.pid not in before]
    assert left == [], left  # none running, and none that ran and died unwatched (a zombie never reaped)
    assert [p.name for p in temp.iterdir()] == []  # the run folder is gone, and nothing made it again
    monkeypatch.undo()
    second = _run(sub)
    assert second.verdict == PASS and second.sandbox["started_by"] == "pool", second.warnings
    assert pool.server_pid == server


def test_a_worker_whose_run_folder_is_gone_exits_quietly(tmp_path):
    """A worker forked while a signal stopped the harness may start after the run's folder was removed
    (seen in CI: a run-all stopped by SIGINT, then a worker's FileNotFoundError traceback on its
    terminal). It finds nowhere to write its output and nobody waiting: it exits, printing nothing."""
    import subprocess
    import sys

    gone = tmp_path / "harness-run-gone"
    code = (
        "from harness.worker.config import WorkerConfig; from harness.worker.entry import start; "
        f"start(None, WorkerConfig('{gone}/s.py', '{tmp_path}', 'cpu', None, 0, '{gone}/stdout.txt', "
        f"'{gone}/stderr.txt', run_dir='{gone}'))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stderr == "", done.stderr
    assert not gone.exists()  # and it made no folder of its own


def test_a_server_whose_imports_leave_cuda_unusable_in_a_fork_is_refused_at_once(tmp_path, monkeypatch):
    """On a GPU, a preloaded module that asks ``torch.cuda.is_available()`` leaves torch refusing CUDA in
    every forked child (so the server's modules must not ask: the test below). The server's
    probe child finds that before any worker is forked, and the pool says why it is not used. Here a
    preloaded module puts torch in that state by hand (a CPU has no CUDA to poison)."""
    from harness.engine.pool import PRELOAD, WorkerPool
    from harness.engine.supervisor import Supervisor

    (tmp_path / "poisons_forks.py").write_text("import torch\ntorch.cuda._is_in_bad_fork = lambda: True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    poisoned = WorkerPool(preload=(*PRELOAD, "poisons_forks"))
    try:
        sup = Supervisor(_plain_worker_config(tmp_path), memory_limit_bytes=8 << 30)
        sup.start(time.monotonic() + 120, poisoned)
        assert sup.started_by == "spawn"
        assert "initialized CUDA" in (poisoned.broken or ""), poisoned.broken
        assert "initialized CUDA" in (sup.pool_warning or ""), sup.pool_warning
        sup.stop()
    finally:
        poisoned.close()


def test_warming_the_pool_imports_no_torch_so_the_servers_imports_overlap_the_callers():
    """The CLI warms the pool before it imports the engine: the server's torch import then runs beside
    the harness's own (0.8 s of a 2.8 s CPU run). A warm-up that imported torch first would serialize them."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from harness.engine.pool import shared_pool, warm_shared_pool\n"
        "warm_shared_pool('cpu')\n"
        "pool = shared_pool(True)\n"
        "print('torch' in sys.modules, pool is None or pool.server_pid is not None)\n"
        "pool is not None and pool.close()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "True"], done.stdout


@pytest.mark.parametrize("module", ["harness.cli.main", "harness.cli.run", "harness.cli.run_all", "harness.api"])
def test_the_commands_that_warm_the_pool_import_no_torch_before_it(module):
    """run and run-all warm the pool once their arguments are read, before they import the engine: a
    module they import at the top that imports torch serializes the two imports again (a compile-round
    import in harness.engine.folder did: a CPU run-all of 3 files took 3.7 s against 2.9 s)."""
    import subprocess
    import sys

    code = f"import sys, {module}; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False"], f"importing {module} imported torch"


def test_the_worker_modules_the_server_preloads_ask_nothing_of_cuda(tmp_path):
    """The server imports these once for every worker (harness.engine.pool.WORKER_PRELOAD), the worker's
    own modules among them (harness.worker.captured captures CUDA's objects without asking whether CUDA
    is there). None may ask torch about CUDA at import (on a GPU the server would then refuse to serve,
    and every worker would be spawned): in a fresh interpreter whose torch.cuda queries are recorded,
    importing them records none."""
    import json
    import subprocess
    import sys

    from harness.engine.pool import WORKER_PRELOAD

    assert {"harness.worker.captured", "harness.worker.main", "harness.worker.entry"} <= set(WORKER_PRELOAD)
    code = (
        "import importlib, json, sys, torch\n"
        "calls = []\n"
        "for name in ('is_available', 'device_count', 'init', '_lazy_init', 'current_device',\n"
        "             'get_device_capability', 'get_device_properties', 'get_device_name'):\n"
        "    setattr(torch.cuda, name, lambda *a, _n=name, **k: calls.append(_n))\n"
        "for name in json.loads(sys.argv[1]):\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(calls))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(list(WORKER_PRELOAD))], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == []
    # the guard itself sees such a query: a module that does ask is caught
    (tmp_path / "asks_cuda.py").write_text("import torch\ntorch.cuda.is_available()\n")
    asks = subprocess.run(
        [sys.executable, "-c", code, json.dumps(["asks_cuda"])],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert json.loads(asks.stdout) == ["is_available"]


def _next_worker_after_retiring(tmp_path: Path, pool, name: str, spare: bool):
    """A worker asked to retire, the next one started meanwhile, then the first one stopped (sparing the
    next one or not): (the first, the next) supervisors."""
    from harness.engine.supervisor import Supervisor

    deadline = time.monotonic() + 120
    folder = tmp_path / name
    folder.mkdir()
    last = Supervisor(_plain_worker_config(folder), memory_limit_bytes=8 << 30)
    last.start(deadline, pool)
    last.retire()
    (folder / "next").mkdir()
    following = Supervisor(_plain_worker_config(folder / "next"), memory_limit_bytes=8 << 30)
    following.start(deadline, pool)
    assert last.started_by == following.started_by == "pool", (last.pool_warning, following.pool_warning)
    last.stop(spare=(following.pid,) if spare else ())
    return last, following


def test_a_retired_worker_is_reaped_and_the_one_started_meanwhile_lives_on(tmp_path, pool):
    """WorkerSession.renew: the next block's worker starts while the last one exits. Stopping the last
    one kills every child of ours that appeared since it started, the next worker among them, unless
    it is spared; spared, the next worker lives on and answers."""
    from harness.messages import Loaded, decode_reply
    from harness.requests import Load

    last, following = _next_worker_after_retiring(tmp_path, pool, "spared", spare=True)
    try:
        assert last.proc is not None and not last.proc.is_alive()
        assert following.proc is not None and following.proc.is_alive()
        header, payloads = following.request(Load(), time.monotonic() + 60, "importing the submission")
        assert decode_reply(header, payloads, Loaded).ok
    finally:
        following.stop()

    last, following = _next_worker_after_retiring(tmp_path, pool, "unspared", spare=False)
    try:
        assert following.proc is not None
        following.proc.join(5.0)
        assert not following.proc.is_alive(), "unspared, the next worker should have been taken for a stray"
    finally:
        following.stop()


LEAVES_AN_ORPHAN = """
import json, os, time
_seen = open("orphans.txt").read().split() if os.path.exists("orphans.txt") else []
_alive = []
for _pid in _seen:
    try:
        os.kill(int(_pid), 0)
        _alive.append(int(_pid))
    except PermissionError:            # alive, in another worker's Landlock domain (signals are scoped)
        _alive.append(int(_pid))
    except ProcessLookupError:
        pass
print(json.dumps({"at_import": os.getpid(), "orphans_seen": len(_seen), "orphans_alive": _alive}), flush=True)
if os.fork() == 0:                     # double fork + setsid: an orphan the harness inherits
    os.setsid()
    if os.fork() == 0:
        with open("orphans.txt", "a") as f:
            f.write(f"{os.getpid()} ")
        time.sleep(300)
    os._exit(0)
time.sleep(0.5)                        # the orphan has written its pid
"""


@pytest.mark.parametrize("start_ahead", ["off", "on"])
def test_what_a_blocks_worker_left_running_is_gone_before_the_next_worker_imports(tmp_path, pool, start_ahead):
    """A worker of block b leaves an orphan; the worker of block b + 1, started while the last one
    exits (or ahead, while it worked), finds it dead when the submission is imported again: the last
    worker's stop ends before any submission code runs in the next."""
    opts = RunOptions(device="cpu", max_repeats=3, blocks=3, start_ahead=start_ahead)
    r = run_submission(_submission(tmp_path, "orphans.py", LEAVES_AN_ORPHAN), MXFP4_SMALL, "benchmark", opts)
    assert r.verdict == PASS, r.message
    reports = [json.loads(line) for line in r.stdout.splitlines() if line.startswith('{"at_import"')]
    assert len(reports) == 3 and len({x["at_import"] for x in reports}) == 3, r.stdout  # three fresh workers
    assert [x["orphans_seen"] for x in reports] == [0, 1, 2], "the orphans were not left: the test proves nothing"
    assert all(x["orphans_alive"] == [] for x in reports[1:]), reports
    assert r.sandbox is not None and r.sandbox["started_by"] == "pool", r.warnings


def test_a_renewal_cut_short_while_the_last_worker_stops_leaves_it_to_the_sessions_stop(tmp_path, pool, monkeypatch):
    """Ctrl-C while renew() stops the worker it replaces (one that does not exit when asked): the session's
    own stop still ends it, and the next worker, started and held for the renewal, with it."""
    from harness.engine.supervisor import Supervisor

    session = _session(tmp_path, "off")
    deadline = time.monotonic() + 120
    session.start(deadline)
    assert session.sup is not None and session.sup.started_by == "pool", session.sup.pool_warning
    last = session.sup
    os.kill(last.pid, signal.SIGSTOP)  # it cannot act on the request to exit: only a kill ends it
    real_stop = Supervisor.stop
    cut = []

    def interrupted(self, spare=()):
        if self is last and not cut:
            cut.append(True)
            raise KeyboardInterrupt
        real_stop(self, spare)

    monkeypatch.setattr(Supervisor, "stop", interrupted)
    with pytest.raises(KeyboardInterrupt):
        session.renew(deadline)
    following = session._next
    assert cut and following is not None
    _wait_until_forked(following)
    session.stop()
    assert last.proc is not None and following.sup.proc is not None, "the next worker was never forked"
    last.proc.join(5.0)
    following.sup.proc.join(5.0)
    assert not last.proc.is_alive() and not following.sup.proc.is_alive()


def _wait_until_forked(held, timeout_s: float = 5.0) -> None:
    """Until the held start's worker is forked (its supervisor has its process), at most ``timeout_s``."""
    end = time.monotonic() + timeout_s
    while held.sup.proc is None and time.monotonic() < end:
        time.sleep(0.05)


def _session(tmp_path: Path, start_ahead: str = "on"):
    import torch

    from harness.engine.context import RunContext
    from harness.engine.device import device_info
    from harness.engine.modes import Mode
    from harness.engine.session import WorkerSession
    from tasks.registry import load_task

    device = torch.device("cpu")
    opts = RunOptions(device="cpu", start_ahead=start_ahead)
    ctx = RunContext(load_task(MXFP4_SMALL), Mode("benchmark"), opts, device, device_info(device), lambda _m: None)
    return WorkerSession(ctx, _plain_worker_config(tmp_path), 8 << 30)


def test_a_worker_started_ahead_waits_after_its_context_until_the_renewal(tmp_path, pool):
    """WorkerSession.start_next_ahead: the next worker is forked and makes its CUDA context while the
    current one works, then waits; its sampler and calibration (its first work on the GPU) come only
    once renew() lets it go on, and what it did ahead is not counted in the run's worker_start."""
    session = _session(tmp_path)
    deadline = time.monotonic() + 120
    session.start(deadline)
    try:
        first = session.sup
        session.start_next_ahead()
        ahead = session._next
        assert ahead is not None
        time.sleep(2.0)
        assert ahead._first is None and ahead._failure is None, ("it went on before it was told to", ahead._failure)
        assert ahead.sup.proc is not None and ahead.sup.proc.is_alive()
        strays = first.strays() if first is not None else None
        assert strays == [], f"the current worker took the next one for its stray: {strays}"
        started_before = session.ctx.phases.seconds["worker_start"]
        session.renew(deadline)
        assert session.sup is ahead.sup and session._next is None
        assert first.proc is not None and not first.proc.is_alive()
        phases = session.ctx.phases.seconds
        assert "worker_ahead.isolate" in phases and "worker_start.held" not in phases, phases
        renewal = phases["worker_start"] - started_before
        assert renewal < 2.0, f"the 2 s held were counted as the renewal's start ({renewal:.2f} s)"
        reply = session.load(deadline)
        assert reply.ok
    finally:
        session.stop()


def test_a_worker_started_ahead_for_a_block_that_never_comes_is_stopped_with_the_session(tmp_path, pool):
    session = _session(tmp_path)
    try:
        session.start(time.monotonic() + 120)
        current = session.sup
        session.start_next_ahead()
        ahead = session._next
        assert ahead is not None and current is not None
        _wait_until_forked(ahead)
        assert ahead.sup.proc is not None, "the worker ahead was never forked"
        time.sleep(0.5)  # held
    finally:
        session.stop()
    assert ahead.sup.started_by == "pool" and not pool.broken, (ahead.sup.pool_warning, pool.broken)
    for sup in (current, ahead.sup):
        assert sup.proc is not None
        sup.proc.join(5.0)
        assert not sup.proc.is_alive()
    assert not ahead._thread.is_alive()


@pytest.mark.parametrize("start_ahead", ["on", "off"])
def test_blocks_whose_workers_start_ahead_rank_like_those_that_do_not(tmp_path, pool, start_ahead):
    """A ranked run in three blocks with each block's worker started ahead: three fresh workers, none
    taken for a process the submission left running (which a ranked run rejects), and the parts of
    their start done ahead named as such."""
    opts = RunOptions(device="cpu", max_repeats=3, blocks=3, start_ahead=start_ahead, secret="s3cret")
    path = _submission(tmp_path, "pids.py", "import os\nprint('{\"at_import\": %d}' % os.getpid(), flush=True)\n")
    r = run_submission(path, MXFP4_SMALL, "leaderboard", opts)
    assert r.verdict == PASS, r.message
    pids = {json.loads(line)["at_import"] for line in r.stdout.splitlines() if line.startswith('{"at_import"')}
    assert len(pids) == 3, r.stdout
    ahead = {k for k in r.phases_s if k.startswith("worker_ahead.")}
    assert bool(ahead) == (start_ahead == "on"), r.phases_s


@pytest.mark.parametrize("start_ahead", ["off", "on"])
def test_the_next_worker_launches_nothing_before_the_last_one_and_what_it_left_are_gone(
    tmp_path, pool, monkeypatch, start_ahead
):
    """renew(): the next worker goes on to its first GPU work (the launch gate's check, the calibration)
    only once the last worker and the process it left running are reaped, so that nothing of the last
    block's submission runs beside the calibration that its escaped-work check is measured against."""
    from harness.engine.supervisor import Supervisor

    session = _session(tmp_path, start_ahead)
    deadline = time.monotonic() + 120
    try:
        session.start(deadline)
        last = session.sup
        assert last is not None and last.proc is not None
        (tmp_path / "run" / "submission.py").write_text(
            "import os, time\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    time.sleep(300)\n"
            "def custom_kernel(data):\n    return data\n"
        )
        assert session.load(deadline).ok
        left = [p for p in last.strays()]
        assert left, "the submission left no process: the test proves nothing"
        seen = []
        real_proceed = Supervisor.proceed

        def proceed(self):
            seen.append((last.proc.is_alive(), [p.is_running() and p.status() != "zombie" for p in left]))
            real_proceed(self)

        monkeypatch.setattr(Supervisor, "proceed", proceed)
        if start_ahead == "on":
            session.start_next_ahead()
        session.renew(deadline)
        assert seen == [(False, [False] * len(left))], seen
    finally:
        session.stop()
