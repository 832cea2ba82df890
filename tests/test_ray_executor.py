"""The Ray executor on one local cluster with two logical GPUs (this machine has none): GPU
assignment, retries after a killed Ray worker, a killed driver and its rerun, a crashing submission
(never retried), and the secret kept out of what the submission can see.

A probe submission (a correct mxfp4 kernel) runs inside the worker's sandbox, which lets it write only
in its own run folder: it reports what it sees (its GPU mask, times, pids, the result of its own search
for the secret) as one ``PROBE {json}`` line on its stdout, which the harness keeps in the run's
``RunResult.stdout``. A probe told to stall writes ``<tag>-<nonce>.stalled`` (its pid and the pid of the
process above it, the Ray worker) in its run folder and waits there until the test kills that Ray worker
or writes ``<tag>.go`` beside the marker.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # read when ray is imported: loopback stays
ray = pytest.importorskip("ray")  # loopback (see the cluster fixture)

from harness.api import RunOptions, run_folder  # noqa: E402
from harness.engine.executors.ray_executor import RayExecutor  # noqa: E402
from harness.errors import UsageError  # noqa: E402
from harness.store.database import open_store  # noqa: E402
from harness.store.jobs import JobTable  # noqa: E402

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
TASK = str(ROOT / "tests" / "fixtures" / "tasks" / "mxfp4_small" / "task.yml")
SECRET = "secret-" + uuid.uuid4().hex  # made here: no file holds it unless the harness wrote it
NONCE = uuid.uuid4().hex[:12]  # this test session's stall markers (earlier sessions' may be left)

PROBE = '''# probe {tag}
import json, os, time
TAG = {tag!r}
MARKER = {tag!r} + "-" + {nonce!r} + ".stalled"
STALL = {stall!r}            # 'yes': the first call waits in its run folder until killed or let go
PIECES = {pieces!r}          # the secret in two pieces: this file never holds it whole
T_IMPORT = time.time()


def _search():
    """Looks for the secret wherever this process can see it; says what it looked at."""
    needle = "".join(PIECES).encode()
    if not needle:
        return {{}}
    own = "\\0".join("%s=%s" % kv for kv in os.environ.items()).encode()
    proc_self = open("/proc/self/environ", "rb").read()
    try:
        parent, parent_read = open("/proc/%d/environ" % os.getppid(), "rb").read(), True
    except OSError:
        parent, parent_read = b"", False
    files = nbytes = 0
    in_files = False
    tops = {{os.getcwd(), os.environ.get("HOME", ""), os.environ.get("TMPDIR", "")}} - {{""}}
    for top in sorted(tops):
        for root, _dirs, names in os.walk(top):
            for n in names:
                try:
                    with open(os.path.join(root, n), "rb") as f:
                        data = f.read(1 << 24)
                except OSError:
                    continue
                files, nbytes, in_files = files + 1, nbytes + len(data), in_files or needle in data
    return dict(selftest=needle in b"x" + needle + b"y", env_vars=len(os.environ), in_env=needle in own,
                self_bytes=len(proc_self), in_self=needle in proc_self, parent_read=parent_read,
                parent_bytes=len(parent), in_parent=needle in parent, tops=len(tops), files=files,
                file_bytes=nbytes, in_files=in_files)


def _stall():
    with open(MARKER + ".tmp", "w") as f:
        f.write("%d %d" % (os.getpid(), os.getppid()))
    os.replace(MARKER + ".tmp", MARKER)
    for _ in range(1200):        # 120 s at most: the harness must end it when the Ray worker dies
        if os.path.exists(TAG + ".go"):
            return
        time.sleep(0.1)


CALLS = [0]


def custom_kernel(data):
    from fp4_reference import mxfp4_mm_reference, unshuffle_scales_e8m0
    CALLS[0] += 1
    if CALLS[0] == 1:
        if STALL == "yes":
            _stall()
        time.sleep({sleep!r})   # keeps jobs overlapping, so that GPU sharing would show
    a, _b, b_q, _b_shuffle, b_scale_sh = data
    n, k = b_q.shape[0], a.shape[1]
    out = mxfp4_mm_reference(a, b_q, unshuffle_scales_e8m0(b_scale_sh, n, k // 32))
    if CALLS[0] == 1:
        line = dict(tag=TAG, pid=os.getpid(), ppid=os.getppid(), t0=T_IMPORT, t1=time.time(),
                    gpu=os.environ.get("CUDA_VISIBLE_DEVICES"), rocr=os.environ.get("ROCR_VISIBLE_DEVICES"),
                    **_search())
        print("PROBE " + json.dumps(line, separators=(",", ":")), flush=True)
    return out
'''


def write_probe(folder: Path, tag: str, stall: str = "no", sleep: float = 0.0, secret: str = "") -> Path:
    path = folder / f"{tag}.py"
    half = len(secret) // 2
    pieces = (secret[:half], secret[half:]) if secret else ()
    path.write_text(PROBE.format(tag=tag, nonce=NONCE, stall=stall, sleep=sleep, pieces=pieces))
    assert not secret or secret not in path.read_text()
    return path


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def probe_line(stdout: str) -> dict | None:
    """The probe's report in a run's captured stdout (None: the probe never reported)."""
    lines = [l for l in (stdout or "").splitlines() if l.startswith("PROBE ")]
    assert len(lines) <= 1, lines
    return json.loads(lines[0][len("PROBE ") :]) if lines else None


def probe_of(entry) -> dict:
    seen = probe_line(entry.result.stdout)
    assert seen, f"{entry.name}: no PROBE line in its stdout ({entry.result.verdict}: {entry.result.message})"
    return seen


class StallWatcher:
    """Watches for a stalled probe's markers (``<temp>/harness-run-*/<tag>-<nonce>.stalled``) and calls
    ``on_stall(n, folder, pid, ppid)`` for the n-th one (1, 2, ...). Leaves no run folder behind."""

    def __init__(self, tag: str, on_stall):
        self.pattern = os.path.join(tempfile.gettempdir(), "harness-run-*", f"{tag}-{NONCE}.stalled")
        self.on_stall, self.seen = on_stall, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self):
        while not self._stop.is_set():
            for marker in sorted(set(glob.glob(self.pattern)) - {str(m) for m, _, _ in self.seen}):
                try:
                    pid, ppid = map(int, Path(marker).read_text().split())
                except (OSError, ValueError):
                    continue
                self.seen.append((marker, pid, ppid))
                self.on_stall(len(self.seen), Path(marker).parent, pid, ppid)
            self._stop.wait(0.05)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(10)
        for marker, _pid, _ppid in self.seen:  # a killed attempt's runner never removed its folder
            shutil.rmtree(Path(marker).parent, ignore_errors=True)


def let_go(folder: Path, tag: str) -> None:
    (folder / f"{tag}.go").write_text("go")


CLUSTER_TEMP: list[Path] = []


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One local Ray cluster for the module: 2 CPUs, 2 logical GPUs."""
    temp = tmp_path_factory.mktemp("ray")
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(ROOT) + (os.pathsep + old if old else "")  # workers import this checkout
    # ray.init sets a SIGTERM handler of its own (sys.exit) that ray.shutdown leaves in place: the test
    # modules after this one (tests/test_store_spool.py's signal tests) get this process's as it was
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    ray.init(
        num_cpus=2,
        num_gpus=2,
        include_dashboard=False,
        _temp_dir=str(temp),
        log_to_driver=False,
        configure_logging=False,
        _node_ip_address="127.0.0.1",
    )  # loopback only (with the env above)
    CLUSTER_TEMP.append(temp)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()
    for s, handler in handlers.items():
        signal.signal(s, handler)
    if old is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = old


@pytest.fixture
def dirs(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    return subs, str(tmp_path / "store")


def _run(subs, store, mode="test", gpus_per_job=1, options=None, lines=None):
    executor = RayExecutor(gpus_per_job=gpus_per_job, retries=2)
    return run_folder(
        subs,
        TASK,
        mode,
        options or RunOptions(device="cpu", max_repeats=3),
        results_dir=store,
        executor=executor,
        progress=(lines.append if lines is not None else None),
    )


LOOPBACK = ("127.0.0.1", "::ffff:127.0.0.1", "::1")


def test_the_cluster_listens_on_loopback_only(cluster):
    import psutil

    assert cluster.startswith("127.0.0.1:"), cluster
    assert ray.util.get_node_ip_address() == "127.0.0.1"
    port = int(cluster.rsplit(":", 1)[1])
    gcs = [c for c in psutil.net_connections("tcp") if c.status == psutil.CONN_LISTEN and c.laddr.port == port]
    assert gcs and all(c.laddr.ip in LOOPBACK for c in gcs), gcs


LOCAL_START = """
from harness.engine.executors.ray_executor import RayExecutor
executor = RayExecutor(jobs=1, gpus_per_job=0)
import ray
print("GCS", ray.get_runtime_context().gcs_address, ray.util.get_node_ip_address())
executor.close()
"""


def test_the_harness_starts_its_local_cluster_on_loopback():
    env = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
    out = subprocess.run(
        [sys.executable, "-c", LOCAL_START], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180
    )
    assert out.returncode == 0, out.stderr
    (line,) = [l for l in out.stdout.splitlines() if l.startswith("GCS ")]
    _, address, node_ip = line.split()
    assert address.startswith("127.0.0.1:") and node_ip == "127.0.0.1", line


def test_each_job_gets_one_gpu_never_shared_and_a_crash_is_not_retried(cluster, dirs):
    subs, store = dirs
    for i in range(4):
        write_probe(subs, f"p{i}", sleep=1.5)
    (subs / "segfault.py").write_text((ROOT / "tests/fixtures/submissions/segfault.py").read_text())
    report = _run(subs, store)
    by_name = {e.name: e for e in report.entries}
    assert sorted(by_name) == ["p0", "p1", "p2", "p3", "segfault"]
    seen = [probe_of(by_name[f"p{i}"]) for i in range(4)]
    assert all(r["gpu"] in ("0", "1") for r in seen), [r["gpu"] for r in seen]  # exactly one id each
    for r in seen:  # the store records the GPU the submission saw
        assert by_name[r["tag"]].gpu == r["gpu"] and by_name[r["tag"]].result.verdict == "pass"
    overlapping = [(a, b) for i, a in enumerate(seen) for b in seen[i + 1 :] if a["t0"] < b["t1"] and b["t0"] < a["t1"]]
    assert overlapping, "no two jobs ran at once: the test would show nothing"
    assert all(a["gpu"] != b["gpu"] for a, b in overlapping)
    crash = by_name["segfault"]
    assert crash.result.verdict == "error" and crash.attempts == 1 and not crash.internal_error
    with open_store(store) as st:
        jobs = {j.display_name: j for j in JobTable(st).jobs()}
        assert jobs["segfault"].state == "done" and jobs["segfault"].retry_reasons == []
        assert all(j.attempts == 1 for j in jobs.values())
        assert {j.display_name: j.gpu for j in jobs.values() if j.display_name != "segfault"} == {
            r["tag"]: r["gpu"] for r in seen
        }


def test_killed_ray_worker_is_retried_and_stored_once(cluster, dirs):
    subs, store = dirs
    write_probe(subs, "victim", stall="yes")
    killed = []

    def on_stall(n, folder, pid, ppid):
        if n == 1:
            os.kill(ppid, signal.SIGKILL)  # the Ray worker process running the job
            killed.append(pid)
        else:
            let_go(folder, "victim")  # the retry, in a run folder of its own

    lines = []
    with StallWatcher("victim", on_stall) as watcher:
        report = _run(subs, store, mode="benchmark", lines=lines)
    assert killed, "the job never stalled: nothing was killed"
    assert len(watcher.seen) == 2 and watcher.seen[0][0] != watcher.seen[1][0], watcher.seen
    assert not _alive(killed[0]), "the submission outlived the Ray worker that ran it"
    (entry,) = report.entries
    assert entry.result.verdict == "pass" and entry.attempts == 2 and not entry.internal_error
    assert probe_of(entry)["pid"] == watcher.seen[1][1]  # the stored result is the retry's
    assert any(line.startswith("retrying victim.py: Ray: ") for line in lines), lines
    with open_store(store) as st:
        (job,) = JobTable(st).jobs()
        assert job.state == "done" and job.attempts == 2 and len(job.retry_reasons) == 1
        assert "Worker" in job.retry_reasons[0] or "died" in job.retry_reasons[0].lower()
        (run,) = st.runs()  # exactly one result for it
        assert run.complete and run.verdict == "pass" and run.id == job.run_id


def test_killed_driver_then_rerun_finishes_without_duplicates(cluster, dirs):
    subs, store = dirs
    for i in range(2):
        write_probe(subs, f"quick{i}")
    write_probe(subs, "slow", stall="yes")
    cmd = [
        sys.executable,
        "-m",
        "harness",
        "run-all",
        str(subs),
        "--task",
        TASK,
        "--mode",
        "test",
        "--device",
        "cpu",
        "--store",
        store,
        "--executor",
        "ray",
        "--address",
        cluster,
        "--jobs",
        "2",
        "--lease",
        "5",  # the killed driver's claims are taken over 5 s after it died
    ]

    def on_stall(n, folder, pid, ppid):
        if n > 1:
            let_go(folder, "slow")  # the rerun's attempt; the first dies with its driver

    with StallWatcher("slow", on_stall) as watcher:
        env = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}  # the harness's
        driver = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )  # own import of ray joins a loopback cluster
        try:
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline and driver.poll() is None:
                if watcher.seen and Path(store, "results.sqlite").exists():
                    with open_store(store) as st:
                        if JobTable(st).counts()["done"] >= 1:
                            break
                time.sleep(0.2)
            assert driver.poll() is None, driver.stderr.read()
            assert watcher.seen, "slow never stalled"
            os.kill(driver.pid, signal.SIGKILL)
        finally:
            driver.kill()
            driver.wait(30)
        with open_store(store) as st:
            before = JobTable(st).counts()
            assert before["done"] >= 1 and before["done"] < 3, before
        lines = []
        report = _run(subs, store, gpus_per_job=0, lines=lines)
    assert len(watcher.seen) == 2, watcher.seen
    assert any(line.startswith("skipping quick") and "already done" in line for line in lines), lines
    assert any(line.startswith("resuming slow.py") for line in lines), lines
    (slow,) = [e for e in report.entries if e.name == "slow"]
    assert probe_of(slow)["pid"] == watcher.seen[1][1]
    with open_store(store) as st:
        jobs = JobTable(st).jobs()
        assert sorted(j.display_name for j in jobs) == ["quick0", "quick1", "slow"]
        assert all(j.state == "done" and j.verdict == "pass" for j in jobs)
        runs = st.runs()
        assert len(runs) == 3 and all(r.complete for r in runs)  # no duplicates, nothing incomplete
        assert {r.id for r in runs} == {j.run_id for j in jobs}


def test_the_secret_never_reaches_the_submission(cluster, dirs):
    subs, store = dirs
    write_probe(subs, "spy", secret=SECRET)
    report = _run(
        subs,
        store,
        mode="leaderboard",
        # one block: the probe prints one line per import, and every further block imports it again
        options=RunOptions(device="cpu", max_repeats=3, secret=SECRET, scan_policy="off", blocks=1),
    )
    (entry,) = report.entries
    assert entry.result.mode == "leaderboard" and entry.result.verdict == "pass", entry.result.message
    seen = probe_of(entry)
    # it did search: its search finds the secret where it is, and it read its environment and files
    assert seen["selftest"] and seen["env_vars"] > 0 and seen["self_bytes"] > 0, seen
    assert seen["tops"] >= 1 and seen["files"] > 0 and seen["file_bytes"] > 0, seen
    assert seen["parent_bytes"] > 0 or not seen["parent_read"], seen
    for where in ("in_env", "in_self", "in_parent", "in_files"):
        assert seen[where] is False, (where, seen)
    assert SECRET not in entry.result.stdout + entry.result.stderr
    for path in CLUSTER_TEMP[0].rglob("*"):  # Ray's session files and logs
        if path.is_file() and not path.is_symlink():
            try:
                data = path.read_bytes()
            except OSError:
                continue
            assert SECRET.encode() not in data, path


def test_secret_is_taken_before_the_executor_starts(tmp_path, monkeypatch):
    subs = tmp_path / "subs"
    subs.mkdir()
    write_probe(subs, "p")
    monkeypatch.setenv("HARNESS_SECRET_SEED", SECRET)
    env_when_started = []

    def make_executor():  # what run-all --executor ray does: Ray starts only here
        env_when_started.append(os.environ.get("HARNESS_SECRET_SEED"))
        raise UsageError("stop here")

    with pytest.raises(UsageError, match="stop here"):
        run_folder(
            subs, TASK, "leaderboard", RunOptions(device="cpu"), results_dir=str(tmp_path / "s"), executor=make_executor
        )
    assert env_when_started == [None]
    assert SECRET.encode() not in Path("/proc/self/environ").read_bytes()


def test_a_gpu_type_the_cluster_lacks_is_a_usage_error(cluster):
    with pytest.raises(UsageError, match="no GPU of type 'B200'"):
        RayExecutor(gpus_per_job=1, gpu_type="B200")


def test_an_assigned_gpu_torch_cannot_use_is_retried_never_run_on_the_cpu(cluster, dirs):
    subs, store = dirs
    write_probe(subs, "nogpu")
    lines = []
    executor = RayExecutor(gpus_per_job=1, retries=1)  # a logical GPU; this torch sees no GPU
    report = run_folder(
        subs, TASK, "test", RunOptions(max_repeats=3), results_dir=store, executor=executor, progress=lines.append
    )
    assert report.entries == []  # no verdict: the machine failed, not the submission
    (failure,) = report.infra_failed
    assert failure.name == "nogpu" and "cuda" in failure.reason and report.internal_errors == 1
    assert any(line.startswith("retrying nogpu.py: the node") for line in lines), [l for l in lines if "nogpu" in l]
    assert any("nogpu.py: failed (infrastructure)" in line for line in lines), lines
    with open_store(store) as st:
        (job,) = JobTable(st).jobs()
        assert job.state == "failed" and job.attempts == 2 and len(job.retry_reasons) == 2
        assert "cuda" in job.failure and job.verdict is None and job.run_id is None
        assert st.runs() == []  # never stored as the submission's 'error'


def test_a_cluster_address_that_does_not_answer_is_a_usage_error(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    subs = tmp_path / "subs"
    subs.mkdir()
    write_probe(subs, "p")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "run-all",
            str(subs),
            "--task",
            TASK,
            "--mode",
            "test",
            "--store",
            str(tmp_path / "s"),
            "--executor",
            "ray",
            "--address",
            f"127.0.0.1:{port}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and f"no Ray cluster answers at 127.0.0.1:{port}" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_without_streaming_as_through_ray_client(cluster, dirs):
    """The plain-task path that Ray Client (ray://) uses, on the same cluster."""
    subs, store = dirs
    write_probe(subs, "client")
    executor = RayExecutor(gpus_per_job=1, streaming=False)
    report = run_folder(
        subs, TASK, "test", RunOptions(device="cpu", max_repeats=3), results_dir=store, executor=executor
    )
    (entry,) = report.entries
    seen = probe_of(entry)
    assert entry.result.verdict == "pass" and entry.gpu == seen["gpu"] in ("0", "1")
    assert entry.overhead_s is not None and 0 <= entry.overhead_s < 60
    with open_store(store) as st:
        (job,) = JobTable(st).jobs()
        assert job.state == "done" and job.gpu == seen["gpu"] and job.node and job.attempts == 1
