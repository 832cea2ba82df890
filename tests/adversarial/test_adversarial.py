"""Cheating submissions, one per attack class, each with the verdict the harness must reach.

Every test shows two things: that its attack fired (the cheat prints a marker the test counts in the
run's captured stdout, or the test makes the condition certain), and that the harness caught it
(``rejected``: tampering or background work; ``fail``: the output checks; ``error``/``timeout``:
resource abuse stopped) or that it gained nothing (the time includes the work: the cheat's work is a
sleep of known length, and the measured time is at least that; noise only adds time). Ranked attacks
run in leaderboard mode with a secret. CPU tests run here; tests marked ``gpu`` run on the device
(SECURITY.md lists the commands).
"""

from __future__ import annotations

import json
import os
import re
import time

import psutil
import pytest

from harness.analysis.plausibility import ESCAPED_WORK
from harness.engine.scan import scan_file, scan_source
from harness.results import ERROR, FAIL, PASS, REJECTED, TIMEOUT
from tests.helpers import MXFP4_SMALL, NVFP4_SMALL, ROOT, SECRET, cli, run

# ---------------------------------------------------------------------------------------------------
# Output reuse
# ---------------------------------------------------------------------------------------------------
CACHE = """
import sys, time
_cache = {{}}


def _in_warmup():                      # the harness's warm-up calls are not checked: not counted
    f = sys._getframe(1)
    while f is not None and f.f_code.co_name != "warmup":
        f = f.f_back
    return f is not None


def custom_kernel(data):
    key = {key}
    if key in _cache:
        print("WARM-UP HIT" if _in_warmup() else "HIT", flush=True)
        return _cache[key]
    time.sleep({work_s})               # stands for an expensive kernel: what a hit saves
    out = _correct_kernel(data)
    _cache[key] = out
    return out
"""
WORK_S = 0.03


@pytest.mark.parametrize(
    "key", ["tuple(data[0].shape)", "data[0].data_ptr()", "id(data)", "(tuple(data[0].shape), data[0]._version)"]
)
def test_output_cache_is_caught_whenever_it_hits(cheat, key):
    """A cache keyed by shape (or shape and version counter: 0 on every fresh tensor) always hits: a
    benchmark shape repeats a test shape, and the warm-up input precedes the fresh timed inputs; keyed
    by pointer or identity it hits when the allocator reuses an address (it does, within a few calls).
    The cheat counts its hits on checked calls (a warm-up call's output is not checked, nor timed); each
    one hands back another input's output, which the check catches. Whether an address comes back in time
    depends on the worker's allocations: with 10 timed calls per case the pointer key missed in 2 of 8
    runs (outputs placed in the shared region, 2026-12-05), with 20 in none of 10."""
    r = run(cheat(CACHE.format(key=key, work_s=0)), max_repeats=20)
    assert r.stdout.splitlines().count("HIT") >= 1, (
        "the cache never hit: the attack did not fire",
        r.verdict,
        r.stdout,
    )
    assert r.verdict == FAIL, r.message


REPLAY = """
from reference import generate_input, ref_kernel

_replay = {{}}
for _case in {tests}:          # the task's public test cases, outputs computed at import
    _data = generate_input(**_case, device="cpu")
    _replay[tuple(tuple(t.shape) for t in _data)] = ref_kernel(_data)


def custom_kernel(data):
    out = _replay.get(tuple(tuple(t.shape) for t in data))
    if out is not None:
        print("REPLAY", flush=True)
        return out.clone()
    return _correct_kernel(data)
"""


def test_replaying_public_test_outputs_fails_the_ranked_tests(cheat):
    """Outputs precomputed for the public test seeds pass the tests in test mode (the replay works),
    but ranked runs test on secret-derived inputs, so the same file fails its first test there."""
    from tasks import load_task

    sub = cheat(REPLAY.format(tests=load_task(MXFP4_SMALL).tests))
    public = run(sub, mode="test")
    assert public.verdict == PASS and "REPLAY" in public.stdout, public.message
    ranked = run(sub)
    assert "REPLAY" in ranked.stdout
    assert ranked.cases[0].kind == "test" and ranked.cases[0].verdict == FAIL, ranked.cases[0].message


def test_content_hash_cache_gains_nothing_in_ranked_runs(cheat):
    """Keyed by a hash of the inputs' bytes, with a 30 ms sleep standing for the expensive kernel it
    saves: in benchmark mode (one fixed input per case) it hits, and a timed call takes less than the
    sleep; in ranked runs every timed input is fresh, the cache never serves a timed call, and every
    timed call takes at least the sleep (noise only adds time): an honest pass that gained nothing."""
    body = CACHE.format(
        key="hash(data[0].float().sum().item()) ^ hash(data[2].view(torch.uint8).sum().item())", work_s=WORK_S
    )
    sub = cheat(body)
    fixed = run(sub, mode="benchmark")
    assert fixed.verdict == PASS and fixed.stdout.splitlines().count("HIT") >= 1, (fixed.message, fixed.stdout)
    assert min(c.stats.min for c in fixed.benchmark_cases()) < WORK_S * 1e9, "hits should have been fast"
    ranked = run(sub)
    assert ranked.verdict == PASS, ranked.message
    assert min(c.stats.min for c in ranked.benchmark_cases()) >= WORK_S * 1e9, ranked.to_dict()["cases"]


@pytest.mark.parametrize(
    "task, body",
    [
        (
            NVFP4_SMALL,
            """
_first = {}
def custom_kernel(data):
    c = data[-1]
    if c.shape not in _first:          # compute once per shape, then hand back the provided buffer
        _first[c.shape] = True
        return _correct_kernel(data)
    print("STALE", flush=True)
    return c
""",
        ),
        (
            MXFP4_SMALL,
            """
_buf = {}
def custom_kernel(data):
    a = data[0]
    if a.shape not in _buf:            # a stale buffer, filled on the first call of each shape
        _buf[a.shape] = _correct_kernel(data)
    else:
        print("STALE", flush=True)
    return _buf[a.shape]
""",
        ),
    ],
)
def test_stale_or_input_buffer_fails(cheat, task, body):
    """The test shapes are distinct, so every test call computes (and passes); a benchmark shape's
    later calls hand back a stale or unfilled buffer (counted), which a timed call's check catches."""
    r = run(cheat(body, task=task), task=task)
    assert r.stdout.count("STALE") >= 1, r.stdout
    assert all(c.verdict == PASS for c in r.cases if c.kind == "test"), r.message
    assert r.verdict == FAIL and "timed call" in r.message, r.message


def test_precomputed_public_seed_outputs_fail_in_ranked_runs(cheat):
    """Precompute outputs for the task's public seeds at import (the task's generator is importable as
    ``reference``); ranked benchmark inputs come from secret-derived seeds, so the replay is wrong. The
    cheat computes its first calls honestly (ranked tests run on secret-derived inputs too)."""
    from tasks import load_task

    task = load_task(MXFP4_SMALL)
    body = f"""
import torch
from reference import generate_input
_pre = {{}}
_calls = [0]
for _case in {task.tests + task.benchmarks!r}:
    for _j in range(4):
        _d = generate_input(**dict(_case, seed=_case["seed"] + 42 * _j), device="cpu")
        _pre.setdefault(tuple(_d[0].shape), []).append((_d[0], _correct_kernel(_d)))


def custom_kernel(data):
    _calls[0] += 1
    for a, out in _pre.get(tuple(data[0].shape), []):
        if torch.equal(a, data[0]):
            print("REPLAY", flush=True)
            return out
    if _calls[0] <= {len(task.tests)}:                 # the tests: honest (ranked tests are secret-seeded too)
        return _correct_kernel(data)
    print("GUESS", flush=True)
    return _pre[tuple(data[0].shape)][0][1]     # unknown input: replay anyway (ranked inputs)
"""
    r = run(cheat(body))
    assert "REPLAY" not in r.stdout, r.stdout  # no ranked input, test or timed, is a public one
    assert all(c.verdict == PASS for c in r.cases if c.kind == "test"), r.message
    assert "GUESS" in r.stdout and r.verdict == FAIL, r.message  # the replay of public outputs is wrong
    assert {c.kind for c in r.cases if c.verdict == FAIL} == {"leaderboard"}, r.message


# ---------------------------------------------------------------------------------------------------
# Timing escapes
# ---------------------------------------------------------------------------------------------------
def test_thread_filling_the_output_after_return(cheat):
    body = """
import threading, time
def custom_kernel(data):
    a, b = data[0], data[1]
    out = torch.empty((a.shape[0], b.shape[0]), dtype=torch.bfloat16)
    def fill():
        time.sleep(0.2)
        out.copy_(_correct_kernel(data))
    threading.Thread(target=fill, daemon=True).start()
    print("THREAD", flush=True)
    return out
"""
    r = run(cheat(body))
    assert "THREAD" in r.stdout, r.stdout
    assert r.verdict in (FAIL, REJECTED), r.message


def test_lazy_tensor_subclass_output_is_not_a_tensor(cheat):
    """A tensor subclass could compute when the harness copies it (after the clock stops)."""
    body = """
class Lazy(torch.Tensor):
    pass

def custom_kernel(data):
    return _correct_kernel(data).as_subclass(Lazy)
"""
    r = run(cheat(body), mode="test")
    assert r.verdict == FAIL and "not a torch.Tensor" in r.message, r.message


def test_deferred_work_per_call_fails(cheat):
    """per_call protocol: return a buffer now and fill it during the next call; each output is copied
    right after its own sample, so it is still empty."""
    body = """
_pending = []
def custom_kernel(data):
    for buf, d in _pending:
        print("DEFERRED", flush=True)
        buf.copy_(_correct_kernel(d))
    _pending.clear()
    a, b = data[0], data[1]
    out = torch.zeros((a.shape[0], b.shape[0]), dtype=torch.bfloat16)
    _pending.append((out, data))
    return out
"""
    r = run(cheat(body))
    assert "DEFERRED" in r.stdout, r.stdout  # a later call did fill an earlier call's buffer
    assert r.verdict == FAIL, r.message


def test_deferred_work_within_a_batch_is_included_in_the_time(cheat):
    """batched protocol (nvfp4): a call hands back its output buffer unfilled and leaves its work to the
    batch's last call, found through the caller's frame (test and warm-up calls compute at once).
    Deferring within the batch is allowed, because the sample spans the whole batch; the test shows the
    time includes every deferred computation: each input's work carries a 30 ms sleep, and the time
    per input is at least that (a harness that timed less than the batch would see almost nothing)."""
    body = f"""
import sys, time
_pending = []
def _batch():
    f = sys._getframe(2)
    while f is not None:
        if f.f_code.co_name == "batched" and "inputs" in f.f_locals:
            return f.f_locals["inputs"]
        f = f.f_back
    return None

def _work(d):
    time.sleep({WORK_S})
    return _correct_kernel(d)

def custom_kernel(data):
    batch = _batch()
    if batch is None:
        return _work(data)
    _pending.append(data)
    if data is not batch[-1]:
        print("DEFERRED", flush=True)
        return data[-1]                # the output buffer, filled by the batch's last call
    for d in _pending:
        _work(d)
    _pending.clear()
    return data[-1]
"""
    per_measurement = 4
    r = run(cheat(body, task=NVFP4_SMALL), task=NVFP4_SMALL, cpu_inputs_per_measurement=per_measurement)
    assert r.verdict == PASS, r.message
    [case] = r.benchmark_cases()
    assert r.stdout.count("DEFERRED") == (per_measurement - 1) * case.stats.runs, r.stdout
    assert case.stats.min >= WORK_S * 1e9, case.stats.samples_ns


def test_work_only_outside_timed_calls_via_caller_frame(cheat):
    """Detect warm-up vs timed calls through inspect.stack(): compute during warm-up and test calls,
    replay during timed calls. Ranked warm-ups use an input of their own -> the replay is wrong."""
    body = """
import inspect
_last = {}
def custom_kernel(data):
    names = {f.function for f in inspect.stack()[1:6]}
    key = tuple(data[0].shape)
    if "warmup" in names or "call" in names or key not in _last:
        _last[key] = _correct_kernel(data)
    else:
        print("REPLAY", flush=True)
    return _last[key]
"""
    r = run(cheat(body))
    assert "REPLAY" in r.stdout, r.stdout  # a timed call was told apart and got the replay
    assert r.verdict == FAIL and "timed call" in r.message, r.message


# ---------------------------------------------------------------------------------------------------
# Tampering
# ---------------------------------------------------------------------------------------------------
def test_patching_clocks_events_checker_and_harness_is_rejected(cheat):
    body = """
import time, torch, harness.worker.sampler as ht, harness.worker.main as hw, harness.protocol as hp
time.perf_counter_ns = lambda: 0
torch.allclose = lambda *a, **k: True
ht._perf_counter_ns = lambda: 0
_orig_per_call = ht.Sampler.per_call
ht.Sampler.per_call = lambda self, fn, data: _orig_per_call(self, fn, data)
hp.send = hp.send
_orig_send = hp.send
def _send(conn, header, payloads=()):
    header = dict(header, samples_ns=[1.0] * len(header.get("samples_ns", [])))
    return _orig_send(conn, header, payloads)
hp.send = _send
hw.Worker._send_outputs.__code__ = hw.Worker._send_outputs.__code__.replace()
ht.Sampler._timed.__defaults__ = (1,)
import harness.channel as hc, harness.worker.staging as hs
_orig_copy = hs.OutputStaging.copy
hs.OutputStaging.copy = lambda self, out: _orig_copy(self, out)   # could hand back bytes of its choosing
_orig_frame = hc.write_frame
hc.write_frame = lambda fd, data: _orig_frame(fd, data)

def custom_kernel(data):
    return _correct_kernel(data)
"""
    r = run(cheat(body), mode="test")
    assert r.verdict == REJECTED, r.message
    for name in (
        "time.perf_counter_ns",
        "torch.allclose",
        "harness.worker.sampler._perf_counter_ns",
        "Sampler.per_call",
        "harness.protocol.send",
        "Worker._send_outputs",
        "Sampler._timed",
        "OutputStaging.copy",
        "harness.channel.write_frame",
    ):
        assert name in r.message, (name, r.message)


def test_wrapping_the_workers_input_generator_to_precompute_is_rejected(cheat):
    """The worker generates the inputs with the task's module: a submission that wraps its generator
    to compute each output while the input is made (untimed) changes a watched namespace."""
    body = """
import sys
_pre = {}
for _name, _mod in list(sys.modules.items()):
    if _name.startswith("_fp4_harness_task_"):
        def _gen(*a, _orig=_mod.generate_input, **k):
            data = _orig(*a, **k)
            _pre[data[0].data_ptr()] = _correct_kernel(data)
            return data
        _mod.generate_input = _gen
        print("WRAPPED", _name, flush=True)

def custom_kernel(data):
    out = _pre.pop(data[0].data_ptr(), None)
    return out if out is not None else _correct_kernel(data)
"""
    r = run(cheat(body))
    assert "WRAPPED" in r.stdout, r.stdout
    assert r.verdict == REJECTED, r.message
    assert "task.generate_input" in r.message, r.message


def test_patching_the_checker_in_the_worker_changes_nothing(cheat):
    """The check runs in the parent: patching the task modules in the worker is pointless."""
    body = """
import tasks
import fp4_reference
for mod in (tasks, fp4_reference):
    for name in dir(mod):
        if "check" in name:
            setattr(mod, name, lambda *a, **k: (True, ""))
            print("PATCHED", mod.__name__, name, flush=True)

def custom_kernel(data):
    return torch.zeros((data[0].shape[0], data[1].shape[0]), dtype=torch.bfloat16)
"""
    r = run(cheat(body), mode="test")
    assert "PATCHED" in r.stdout, r.stdout
    assert r.verdict == FAIL, r.message


def test_reading_the_expected_output_or_mutating_inputs_fails(cheat):
    """No reference output exists in the worker (gc finds none); zeroing the inputs so that a
    reference computed from them would agree is pointless: the parent checks its private copy."""
    body = """
import gc
def custom_kernel(data):
    m, n = data[0].shape[0], data[1].shape[0]
    found = [o for o in gc.get_objects() if isinstance(o, torch.Tensor) and o.dtype == torch.bfloat16
             and tuple(o.shape) == (m, n)]
    print("FOUND", len(found))
    for t in data:
        if isinstance(t, torch.Tensor):
            t.view(torch.uint8).zero_()
    return torch.zeros((m, n), dtype=torch.bfloat16)
"""
    r = run(cheat(body), mode="test")
    assert r.verdict == FAIL, r.message
    assert "FOUND 0" in r.stdout


@pytest.mark.parametrize("forge", ["frame", "garbage"])
def test_forged_frames_in_the_worker_pipe_are_rejected(cheat, forge):
    """Find the worker's end of the pipe (gc finds the Connection) and write a reply of our own:
    a well-formed one with fake samples (the real reply then arrives out of sequence), or garbage."""
    body = f"""
import gc, json, sys
from multiprocessing.connection import Connection
_calls = 0
def custom_kernel(data):
    global _calls
    _calls += 1
    out = _correct_kernel(data)
    if _calls >= 4:                       # after the tests: during the ranked warm-up / timed calls
        conn = next(o for o in gc.get_objects() if isinstance(o, Connection))
        print("FORGED", flush=True)       # before the write: the parent may end the worker at once
        from harness.channel import write_frame
        if {forge!r} == "garbage":
            write_frame(conn.fileno(), b"\\x00not json")
        else:
            import harness.protocol as hp
            raw = out.contiguous().view(torch.uint8).numpy().tobytes()
            header = {{"ok": True, "samples_ns": [1.0], "tail_ns": [1.0], "gap_ns": 0.0, "tampered": [],
                       "threads": 1, "children": 0, "seq": hp._last_seq, "tensors": 1,
                       "outputs": [{{"kind": "tensor", "dtype": "bfloat16", "shape": list(out.shape),
                                    "device": "cpu"}}]}}
            write_frame(conn.fileno(), json.dumps(header).encode())
            write_frame(conn.fileno(), raw)
    return out
"""
    r = run(cheat(body))
    assert "FORGED" in r.stdout, r.stdout
    assert r.verdict == REJECTED, r.message
    assert "channel" in r.message


@pytest.mark.parametrize("stop_after", ["length", "header"])
def test_a_reply_that_stops_part_way_ends_the_run_instead_of_hanging_the_harness(cheat, stop_after):
    """Write the start of a frame into the worker's channel (only its length, or a header announcing a
    tensor that never comes) and hang: the parent, reading a message that never completes, used to block
    for ever (past every deadline, deaf to SIGTERM). It must end the run as a timeout within the channel's
    grace period."""
    body = f"""
import gc, json, struct, time
from multiprocessing.connection import Connection
from harness.channel import write_frame
def custom_kernel(data):
    conn = next(o for o in gc.get_objects() if isinstance(o, Connection))
    print("STALLING", flush=True)
    if {stop_after!r} == "length":
        import os
        os.write(conn.fileno(), struct.pack("!Q", 1000) + b"{{")
    else:
        write_frame(conn.fileno(), json.dumps({{"ok": True, "tensors": 1}}).encode())
    time.sleep(3600)
"""
    from harness.channel import REPLY_GRACE_S

    t0 = time.monotonic()
    r = run(cheat(body), mode="test")
    assert "STALLING" in r.stdout, r.stdout
    assert r.verdict == TIMEOUT, r.message
    assert "stopped part-way" in r.message
    assert time.monotonic() - t0 < REPLY_GRACE_S + 15


def _cpu_run(path, tmp_path, mode: str = "test", *extra: str, env=None):
    """``harness run`` of ``path`` on the CPU fixture task in ``mode``: (the process, the run's JSON)."""
    out = tmp_path / "r.json"
    args = ["run", str(path), "--task", MXFP4_SMALL, "--device", "cpu", "--mode", mode, *extra]
    p = cli([*args, "--json", str(out), "--quiet"], env=env)
    assert out.exists(), f"no JSON (exit {p.returncode}): {p.stderr[-2000:]}"
    return p, json.loads(out.read_text())


def test_secret_seed_is_not_readable_from_environ_or_cmdline(cheat, tmp_path):
    """The cheat dumps what it can read of the secret's usual hiding places; the secret, given to the
    CLI through $HARNESS_SECRET_SEED, must not be in it (the parent scrubs its environment block)."""
    body = """
import os
def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read(1 << 20).decode(errors="replace")
    except OSError as exc:
        return f"<{exc.strerror}>"
ppid = os.getppid()
print("ENV", dict(os.environ))
print("PENV", _read(f"/proc/{ppid}/environ"))
print("PCMD", _read(f"/proc/{ppid}/cmdline"))
print("PMEM", _read(f"/proc/{ppid}/mem")[:100])

def custom_kernel(data):
    return _correct_kernel(data)
"""
    env = dict(os.environ, HARNESS_SECRET_SEED=SECRET)
    p, doc = _cpu_run(cheat(body), tmp_path, "leaderboard", "--max-repeats", "3", env=env)
    assert "PENV" in doc["stdout"], (p.stderr[-2000:], doc["stdout"][:500])
    assert SECRET not in doc["stdout"]
    assert doc["verdict"] == PASS, doc["message"]


def test_sigterm_to_the_parent_is_survived(cheat, tmp_path):
    """Denied by the sandbox's signal scope where it holds; else the harness defers the signals."""
    body = """
import os, signal
for sig in (signal.SIGTERM, signal.SIGHUP):
    try:
        os.kill(os.getppid(), sig)
        print("SENT", sig.name)
    except PermissionError:
        print("DENIED", sig.name)

def custom_kernel(data):
    return _correct_kernel(data)
"""
    p, doc = _cpu_run(cheat(body), tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert doc["verdict"] == PASS
    if doc["sandbox"]["scoped_signals"]:
        assert "DENIED SIGTERM" in doc["stdout"] and "DENIED SIGHUP" in doc["stdout"], doc["stdout"]
    else:
        assert "SENT SIGTERM" in doc["stdout"] and "SIGTERM" in p.stderr and "deferred" in p.stderr


def _signals_reach_the_parent() -> bool:
    """Without Landlock's signal scope (ABI 6) a worker of the harness's own user can signal it."""
    from harness.engine.sandbox import privilege_drop_possible
    from harness.worker.landlock import abi_version

    return abi_version() < 6 and not privilege_drop_possible()


@pytest.mark.xfail(
    condition=_signals_reach_the_parent(),
    strict=True,
    reason="not defensible without Landlock ABI 6 when the worker runs as the harness's own user: "
    "SIGKILL cannot be caught (SECURITY.md)",
)
def test_sigkill_to_the_parent(cheat, tmp_path):
    """The sandbox scopes signals to the worker's own domain: the kill fails (EPERM) and the run goes on."""
    body = """
import os, signal
try:
    os.kill(os.getppid(), signal.SIGKILL)
    print("KILL-SENT")
except PermissionError as exc:
    print("KILL-DENIED", exc.errno)

def custom_kernel(data):
    return _correct_kernel(data)
"""
    p, doc = _cpu_run(cheat(body), tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert doc["verdict"] == PASS, doc["message"]
    assert "KILL-DENIED 1" in doc["stdout"], doc["stdout"][-2000:]  # attempted, and denied


# ---------------------------------------------------------------------------------------------------
# Resource abuse
# ---------------------------------------------------------------------------------------------------
def _sleepers(tag: str) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if tag in " ".join(p.info["cmdline"] or []) and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.Error:
            pass
    return out


def test_escaped_and_forked_children_are_reaped_and_rejected(cheat):
    """A double-forked, setsid() sleeper (leaves the process group and the worker's tree) and 200
    forked sleepers: ranked runs reject background processes, and none survives the run."""
    # `sleep` sums its arguments, so a unique fraction tags our sleepers in their command lines
    # (an earlier version used `exec -a`, which /bin/sh does not know: its sleepers never ran)
    tag = f"0.{os.getpid()}4242"
    body = f"""
import os, subprocess
def _spawn():
    if os.fork() == 0:                 # double fork + setsid: an orphan in its own session
        os.setsid()
        subprocess.Popen(["sleep", "300", {tag!r}], start_new_session=True)
        print("ORPHAN", flush=True)
        os._exit(0)
    for _ in range(200):               # bounded: 200 forked sleepers
        if os.fork() == 0:
            os.execvp("sleep", ["sleep", "300", {tag!r}])
    print("FORKED", flush=True)
_done = False

def custom_kernel(data):
    global _done
    if not _done:
        _done = True
        _spawn()
    return _correct_kernel(data)
"""
    t0 = time.monotonic()
    r = run(cheat(body))
    assert time.monotonic() - t0 < 90
    assert "ORPHAN" in r.stdout and "FORKED" in r.stdout, r.stdout
    assert r.verdict == REJECTED and "child process" in r.message, r.message
    deadline = time.monotonic() + 5
    while _sleepers(tag) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _sleepers(tag)


def test_giant_compile_times_out(cheat):
    """A 'compile' that never ends (a generated program exec'd at import) costs only the timeout."""
    body = """
_src = "x = 0\\n" + "x += 1\\n" * 200_000
while True:
    exec(compile(_src, "<giant>", "exec"))

def custom_kernel(data):
    return _correct_kernel(data)
"""
    t0 = time.monotonic()
    r = run(cheat(body), mode="test", timeout_scale=0.1)
    assert r.verdict == TIMEOUT, r.message
    assert time.monotonic() - t0 < 6 + 20


def test_huge_result_file_hits_the_output_cap(cheat):
    body = """
import os, tempfile
def custom_kernel(data):
    with open(os.path.join(tempfile.gettempdir(), "huge.bin"), "wb") as f:
        f.seek(1 << 30)                   # 1 GiB
        f.write(b"x")
    return _correct_kernel(data)
"""
    r = run(cheat(body), mode="test", output_limit_mb=2)
    assert r.verdict == ERROR and "output flood" in r.message, r.message


# ---------------------------------------------------------------------------------------------------
# Weak checking
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, body",
    [
        ("nan", "out = _correct_kernel(data); out[0, 0] = float('nan'); return out"),
        ("inf", "out = _correct_kernel(data); out[-1, -1] = float('inf'); return out"),
        ("some_rows", "out = _correct_kernel(data); out[out.shape[0] // 2:] = 0; return out"),
        ("a_not_quantized", "return (data[0].float() @ _decode_b(data[2], data[4]).T).to(torch.bfloat16)"),
        ("fp8_output", "return _correct_kernel(data).to(torch.float8_e4m3fn).to(torch.bfloat16)"),
        ("broadcast_row", "return _correct_kernel(data)[:1]"),
        ("wrong_dtype", "return _correct_kernel(data).float()"),
        ("returns_input", "return data[0]"),
    ],
)
def test_weak_outputs_fail(cheat, name, body):
    r = run(cheat(f"def custom_kernel(data):\n    {body}\n", name=name), mode="test")
    assert r.verdict == FAIL, (name, r.message)


def test_nvfp4_lower_precision_fails(cheat):
    body = """
def custom_kernel(data):
    out = _correct_kernel(data)
    return out.to(torch.bfloat16).to(out.dtype)    # bf16 rounding of an fp16 result: beyond rtol 1e-3
"""
    r = run(cheat(body, task=NVFP4_SMALL), task=NVFP4_SMALL, mode="test")
    assert r.verdict == FAIL, r.message


# ---------------------------------------------------------------------------------------------------
# Static scan (kernelguard)
# ---------------------------------------------------------------------------------------------------
POINTER_CACHE = """
print("IMPORTED", flush=True)
_cache = {}
def custom_kernel(data):
    key = data[0].data_ptr()
    if key in _cache:
        return _cache[key]
    out = _correct_kernel(data)
    _cache[key] = out
    return out
"""


def test_scan_rejects_an_obvious_cheat_before_running(cheat):
    pytest.importorskip("kernelguard")
    sub = cheat(POINTER_CACHE)
    findings, hacked = scan_file(sub)
    assert hacked and any(f["rule"] == "POINTER_REPLAY" for f in findings)
    r = run(sub, scan_policy="reject")
    assert r.verdict == REJECTED and "POINTER_REPLAY" in r.message, r.message
    assert [c.kind for c in r.cases] == ["scan"] and r.findings
    assert "IMPORTED" not in r.stdout  # the scan runs beside the worker's start, and is read before the import
    warned = run(sub, scan_policy="warn", blocks=1)  # the same file, imported where the policy only warns
    assert "IMPORTED" in warned.stdout and any("POINTER_REPLAY" in w for w in warned.warnings)


@pytest.mark.parametrize("name", ["torch_mxfp4.py", "triton_mxfp4.py", "gluon.py", "torch_nvfp4.py", "triton_nvfp4.py"])
def test_scan_does_not_block_honest_examples(name):
    pytest.importorskip("kernelguard")
    findings, hacked = scan_file(ROOT / "submissions" / name)
    assert not hacked, findings
    assert not any(f["blocking"] for f in findings)
    if name != "torch_nvfp4.py":  # kernelguard's DECODE_MM_REF (high, telemetry) flags its torch.bmm
        assert findings == []


def test_scan_unavailable_is_a_clear_message(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake(name, *a, **k):
        if name == "kernelguard":
            raise ImportError("no kernelguard")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    from harness.engine.scan import ScanUnavailable

    with pytest.raises(ScanUnavailable, match="pip install"):
        scan_source("def custom_kernel(data): return data")


# ---------------------------------------------------------------------------------------------------
# GPU-only attacks (run on the device)
# ---------------------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_side_stream_work_is_caught(cheat):
    """GPU work on a side stream the events do not cover: rejected (the escaped-work check) or fail.
    The hidden work must be GPU-bound to hide anything: the torch example is host-bound on small
    shapes (event time = launch time either way; the H200 run of a version without the matmuls passed,
    honestly), so the cheat also runs ~3 ms of matmuls there."""
    body = """
_side = torch.cuda.Stream()
_big = torch.randn(4096, 4096, device="cuda")
def custom_kernel(data):
    with torch.cuda.stream(_side):
        for _ in range(20):
            _big @ _big
        out = _correct_kernel(data)
    return out
"""
    r = run(cheat(body), device="cuda", max_repeats=20)
    assert r.verdict in (REJECTED, FAIL), r.message


@pytest.mark.gpu
def test_gpu_work_left_running_after_the_end_event_is_rejected_as_escaped(cheat, record_testsuite_property):
    """The whole output computed on a side stream that the timed stream never waits for, behind 12 large
    matmuls there: the events see none of it, and the outputs, read after the device-wide synchronize,
    are right. Only the escaped-work check stands between it and a score of about nothing: each
    sample's tail (end event seen complete -> device idle) holds the side stream's work."""
    body = """
_side = torch.cuda.Stream()
_big = torch.randn(4096, 4096, device="cuda")
def custom_kernel(data):
    _side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(_side):
        for _ in range(12):
            _big @ _big
        return _correct_kernel(data)
"""
    r = run(cheat(body), device="cuda", max_repeats=20)
    assert r.verdict == REJECTED and ESCAPED_WORK in r.message, r.message
    # the diagnostics beside it: a second synchronize right after, of the idle device, is the host's
    # own cost, far below the work left running (a slow host would lengthen both); the device's clock
    # sees the SMs held by the matmul running at the end stamp, until it ends: far beyond an honest
    # call's device tail (about 2 us on an H100, results/h100_false_escape/device_tail_probe.jsonl),
    # though not the queued matmuls behind it. The three figures go to the JUnit XML's suite properties.
    busy, idle, device = (float(x) for x in re.findall(r"(?:still busy|took|free) ([0-9.]+) us", r.message))
    for name, us in (("escaped_us", busy), ("idle_sync_us", idle), ("device_tail_us", device)):
        record_testsuite_property(f"side_stream_cheat_{name}", us)
    assert idle < busy / 10 and 100 < device < busy, r.message


@pytest.mark.gpu
def test_gpu_side_stream_work_cannot_hide_behind_the_launch_gate(cheat):
    """The per-call protocol hides the host's launch time behind a gate, as the original hides it
    behind a long L2 clear. A side stream must not run ahead while the host is still inside the call:
    ~1 ms of matmuls on a side stream (joined), then 3 ms of host sleep. The matmuls must be measured."""
    body = """
import time
_side = torch.cuda.Stream()
_big = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
def custom_kernel(data):
    _side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(_side):
        for _ in range(8):
            _big @ _big
    torch.cuda.current_stream().wait_stream(_side)
    time.sleep(0.003)
    return _correct_kernel(data)
"""
    import torch

    big = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(2):
        start.record()
        for _ in range(8):
            big @ big
        end.record()
        torch.cuda.synchronize()
    matmuls_ns = start.elapsed_time(end) * 1e6
    r = run(cheat(body), device="cuda", mode="benchmark", max_repeats=10)
    assert r.timing_method.startswith("launch gate"), r.timing_method
    assert r.verdict == PASS, r.message
    assert min(c.stats.mean for c in r.benchmark_cases()) > 0.8 * matmuls_ns, (matmuls_ns, r.to_dict()["cases"])


@pytest.mark.gpu
def test_gpu_rerecording_the_start_event_is_caught(cheat):
    """Find the harness's start event (gc) and record it again after the work: the event time shrinks,
    the device clock's window around the events does not -> rejected. (The torch example's work on the
    small task is under the wall check's 20 us: it passed that check alone on the H200.)"""
    body = """
import gc, sys
Sampler = sys.modules["harness.worker.sampler"].Sampler  # ranked runs refuse 'import harness'; a cheat looks here
def custom_kernel(data):
    out = _correct_kernel(data)
    for s in (o for o in gc.get_objects() if isinstance(o, Sampler)):
        s.start.record()
    return out
"""
    r = run(cheat(body), device="cuda", max_repeats=20)
    assert r.verdict == REJECTED and "re-recorded" in r.message, r.message


@pytest.mark.gpu
def test_gpu_spinning_kernel_times_out(cheat):
    body = """
import triton, triton.language as tl
@triton.jit
def _spin(x_ptr):
    # a volatile load and a store of the count: the compiler can neither hoist nor drop the loop
    # (the H200 run of a version without them returned at once)
    i = 0
    while tl.load(x_ptr, volatile=True) == 0:
        i += 1
    tl.store(x_ptr + 1, i)
def custom_kernel(data):
    _spin[(1,)](torch.zeros(2, device=data[0].device, dtype=torch.int32))
    return _correct_kernel(data)
"""
    r = run(cheat(body), device="cuda", mode="test", timeout_scale=0.2)
    assert r.verdict == TIMEOUT, r.message
