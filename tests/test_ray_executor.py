"""The Ray executor on one local cluster with two logical GPUs (this machine has none): GPU
assignment, retries after a killed Ray worker, a killed driver and its rerun, a crashing submission
(never retried), and the secret kept out of what the submission can see.

A probe submission (a correct mxfp4 kernel) writes what it sees (its GPU mask, its environment, the
pid of the Ray worker above it, times) into a report folder; the tests read those reports.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from harness.api import RunOptions, run_folder  # noqa: E402
from harness.engine.executors.ray_executor import RayExecutor  # noqa: E402
from harness.errors import UsageError  # noqa: E402
from harness.store.database import open_store  # noqa: E402
from harness.store.jobs import JobTable  # noqa: E402

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
TASK = str(ROOT / "tests" / "fixtures" / "tasks" / "mxfp4_small" / "task.yml")
SECRET = "secret-" + uuid.uuid4().hex      # made here: no file holds it unless the harness wrote it

PROBE = '''# probe {tag}
import json, os, time
REPORTS = {reports!r}
TAG = {tag!r}
STALL = {stall!r}            # 'once': the first attempt stalls until its Ray worker is killed
T_IMPORT = time.time()


def _report(**extra):
    try:
        parent_env = open("/proc/%d/environ" % os.getppid(), "rb").read().decode(errors="replace")
    except OSError as exc:
        parent_env = "unreadable: " + type(exc).__name__
    own_env = open("/proc/self/environ", "rb").read().decode(errors="replace")
    files = []
    for top in {{os.getcwd(), os.environ.get("HOME", "/"), os.environ.get("TMPDIR", "/")}}:
        for root, _dirs, names in os.walk(top):
            for n in names:
                try:
                    files.append(open(os.path.join(root, n), "rb").read(1 << 20).decode(errors="replace"))
                except OSError:
                    pass
    data = dict(tag=TAG, pid=os.getpid(), ppid=os.getppid(), t0=T_IMPORT, t1=time.time(),
                gpu=os.environ.get("CUDA_VISIBLE_DEVICES"), environ=dict(os.environ), own_env=own_env,
                parent_env=parent_env, files="\\n".join(files), **extra)
    path = os.path.join(REPORTS, "%s-%d.json" % (TAG, os.getpid()))
    with open(path + ".tmp", "w") as f:
        json.dump(data, f)
    os.replace(path + ".tmp", path)


def _stall():
    marker = os.path.join(REPORTS, TAG + ".stalled")
    if STALL != "once" or os.path.exists(marker):
        return
    with open(marker + ".tmp", "w") as f:
        f.write("%d %d" % (os.getppid(), os.getpid()))
    os.replace(marker + ".tmp", marker)
    time.sleep(60)               # the harness must end this process when the process above it dies


CALLS = [0]


def custom_kernel(data):
    from fp4_reference import mxfp4_mm_reference, unshuffle_scales_e8m0
    CALLS[0] += 1
    if CALLS[0] == 1:
        _stall()
        time.sleep({sleep!r})   # keeps jobs overlapping, so that GPU sharing would show
    a, _b, b_q, _b_shuffle, b_scale_sh = data
    n, k = b_q.shape[0], a.shape[1]
    out = mxfp4_mm_reference(a, b_q, unshuffle_scales_e8m0(b_scale_sh, n, k // 32))
    _report(calls=CALLS[0])
    return out
'''


def write_probe(folder: Path, reports: Path, tag: str, stall: str = "no", sleep: float = 0.0) -> Path:
    path = folder / f"{tag}.py"
    path.write_text(PROBE.format(reports=str(reports), tag=tag, stall=stall, sleep=sleep))
    return path


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def reports_of(reports: Path, tag: str) -> list[dict]:
    out = [json.loads(p.read_text()) for p in sorted(reports.glob(f"{tag}-*.json"))]
    return sorted(out, key=lambda r: r["t1"])


CLUSTER_TEMP: list[Path] = []


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One local Ray cluster for the module: 2 CPUs, 2 logical GPUs."""
    temp = tmp_path_factory.mktemp("ray")
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(ROOT) + (os.pathsep + old if old else "")   # workers import this checkout
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, _temp_dir=str(temp), log_to_driver=False,
             configure_logging=False, _node_ip_address="127.0.0.1")      # loopback only
    CLUSTER_TEMP.append(temp)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()
    if old is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = old


@pytest.fixture
def dirs(tmp_path):
    subs, reports = tmp_path / "subs", tmp_path / "reports"
    subs.mkdir()
    reports.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chmod(reports, 0o777)      # the submission may run as 'nobody'
    return subs, reports, str(tmp_path / "store")


def _run(subs, store, mode="test", gpus_per_job=1, options=None, lines=None):
    executor = RayExecutor(gpus_per_job=gpus_per_job, retries=2)
    return run_folder(subs, TASK, mode, options or RunOptions(device="cpu", max_repeats=3), results_dir=store,
                      executor=executor, progress=(lines.append if lines is not None else None))


def test_each_job_gets_one_gpu_never_shared_and_a_crash_is_not_retried(cluster, dirs):
    subs, reports, store = dirs
    for i in range(4):
        write_probe(subs, reports, f"p{i}", sleep=1.5)
    (subs / "segfault.py").write_text((ROOT / "tests/fixtures/submissions/segfault.py").read_text())
    report = _run(subs, store)
    by_name = {e.name: e for e in report.entries}
    assert sorted(by_name) == ["p0", "p1", "p2", "p3", "segfault"]
    seen = [reports_of(reports, f"p{i}")[-1] for i in range(4)]
    assert all(r["gpu"] in ("0", "1") for r in seen), [r["gpu"] for r in seen]     # exactly one id each
    for r in seen:                                   # the store records the GPU the submission saw
        assert by_name[r["tag"]].gpu == r["gpu"] and by_name[r["tag"]].result.verdict == "pass"
    overlapping = [(a, b) for i, a in enumerate(seen) for b in seen[i + 1:]
                   if a["t0"] < b["t1"] and b["t0"] < a["t1"]]
    assert overlapping, "no two jobs ran at once: the test would show nothing"
    assert all(a["gpu"] != b["gpu"] for a, b in overlapping)
    crash = by_name["segfault"]
    assert crash.result.verdict == "error" and crash.attempts == 1 and not crash.internal_error
    with open_store(store) as st:
        jobs = {j.display_name: j for j in JobTable(st).jobs()}
        assert jobs["segfault"].state == "done" and jobs["segfault"].retry_reasons == []
        assert all(j.attempts == 1 for j in jobs.values())


def test_killed_ray_worker_is_retried_and_stored_once(cluster, dirs):
    subs, reports, store = dirs
    write_probe(subs, reports, "victim", stall="once")
    marker = reports / "victim.stalled"
    killed = []

    def kill_when_stalled():
        for _ in range(1200):
            if marker.exists():
                ray_worker, submission = map(int, marker.read_text().split())
                os.kill(ray_worker, signal.SIGKILL)         # the Ray worker process running the job
                killed.append(submission)
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_when_stalled)
    killer.start()
    lines = []
    report = _run(subs, store, mode="benchmark", lines=lines)
    killer.join()
    assert killed, "the job never stalled: nothing was killed"
    assert not _alive(killed[0]), "the submission outlived the Ray worker that ran it"
    (entry,) = report.entries
    assert entry.result.verdict == "pass" and entry.attempts == 2 and not entry.internal_error
    assert any(line.startswith("retrying victim.py: Ray: ") for line in lines), lines
    with open_store(store) as st:
        (job,) = JobTable(st).jobs()
        assert job.state == "done" and job.attempts == 2 and len(job.retry_reasons) == 1
        assert "Worker" in job.retry_reasons[0] or "died" in job.retry_reasons[0].lower()
        (run,) = st.runs()                          # exactly one result for it
        assert run.complete and run.verdict == "pass" and run.id == job.run_id


def test_killed_driver_then_rerun_finishes_without_duplicates(cluster, dirs):
    subs, reports, store = dirs
    for i in range(2):
        write_probe(subs, reports, f"quick{i}")
    write_probe(subs, reports, "slow", stall="once")
    cmd = [sys.executable, "-m", "harness", "run-all", str(subs), "--task", TASK, "--mode", "test",
           "--device", "cpu", "--store", store, "--executor", "ray", "--address", cluster, "--jobs", "2"]
    driver = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and driver.poll() is None:
            if (reports / "slow.stalled").exists() and Path(store, "results.sqlite").exists():
                with open_store(store) as st:
                    if JobTable(st).counts()["done"] >= 1:
                        break
            time.sleep(0.2)
        assert driver.poll() is None, driver.stderr.read()
        os.kill(driver.pid, signal.SIGKILL)
    finally:
        driver.kill()
        driver.wait(30)
    with open_store(store) as st:
        before = JobTable(st).counts()
        assert before["done"] >= 1 and before["done"] < 3, before
    lines = []
    report = _run(subs, store, gpus_per_job=0, lines=lines)
    assert any(line.startswith("skipping quick") and "already done" in line for line in lines), lines
    assert any(line.startswith("resuming slow.py") for line in lines), lines
    assert "slow" in {e.name for e in report.entries}
    with open_store(store) as st:
        jobs = JobTable(st).jobs()
        assert sorted(j.display_name for j in jobs) == ["quick0", "quick1", "slow"]
        assert all(j.state == "done" and j.verdict == "pass" for j in jobs)
        runs = st.runs()
        assert len(runs) == 3 and all(r.complete for r in runs)       # no duplicates, nothing incomplete
        assert {r.id for r in runs} == {j.run_id for j in jobs}


def test_the_secret_never_reaches_the_submission(cluster, dirs):
    subs, reports, store = dirs
    write_probe(subs, reports, "spy")
    report = _run(subs, store, mode="leaderboard",
                  options=RunOptions(device="cpu", max_repeats=3, secret=SECRET, scan_policy="off"))
    (entry,) = report.entries
    seen = reports_of(reports, "spy")
    assert seen, f"the probe never ran: {entry.result.message}"
    for r in seen:
        assert r["environ"] and r["own_env"]            # it did read its environment
        for where in ("environ", "own_env", "parent_env", "files"):
            assert SECRET not in json.dumps(r[where]), where
    assert entry.result.mode == "leaderboard" and entry.result.verdict == "pass", entry.result.message
    for path in CLUSTER_TEMP[0].rglob("*"):            # Ray's session files and logs
        if path.is_file() and not path.is_symlink():
            try:
                data = path.read_bytes()
            except OSError:
                continue
            assert SECRET.encode() not in data, path


def test_secret_is_taken_before_the_executor_starts(tmp_path, monkeypatch):
    subs = tmp_path / "subs"
    subs.mkdir()
    write_probe(subs, tmp_path, "p")
    monkeypatch.setenv("HARNESS_SECRET_SEED", SECRET)
    env_when_started = []

    def make_executor():            # what run-all --executor ray does: Ray starts only here
        env_when_started.append(os.environ.get("HARNESS_SECRET_SEED"))
        raise UsageError("stop here")

    with pytest.raises(UsageError, match="stop here"):
        run_folder(subs, TASK, "leaderboard", RunOptions(device="cpu"), results_dir=str(tmp_path / "s"),
                   executor=make_executor)
    assert env_when_started == [None]
    assert SECRET.encode() not in Path("/proc/self/environ").read_bytes()


def test_a_gpu_type_the_cluster_lacks_is_a_usage_error(cluster):
    with pytest.raises(UsageError, match="no GPU of type 'B200'"):
        RayExecutor(gpus_per_job=1, gpu_type="B200")


def test_an_assigned_gpu_torch_cannot_use_is_retried_never_run_on_the_cpu(cluster, dirs):
    subs, reports, store = dirs
    write_probe(subs, reports, "nogpu")
    lines = []
    executor = RayExecutor(gpus_per_job=1, retries=1)      # a logical GPU; this torch sees no GPU
    report = run_folder(subs, TASK, "test", RunOptions(max_repeats=3), results_dir=store, executor=executor,
                        progress=lines.append)
    (entry,) = report.entries
    assert entry.internal_error and entry.attempts == 2 and entry.result.verdict == "error"
    assert any(line.startswith("retrying nogpu.py: the node") for line in lines), [l for l in lines if "nogpu" in l]
    assert not reports_of(reports, "nogpu")                # the submission never ran
    with open_store(store) as st:
        (job,) = JobTable(st).jobs()
        assert job.state == "failed" and len(job.retry_reasons) == 2 and "cuda" in job.retry_reasons[-1]


def test_a_cluster_address_that_does_not_answer_is_a_usage_error(tmp_path):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    subs = tmp_path / "subs"
    subs.mkdir()
    write_probe(subs, tmp_path, "p")
    out = subprocess.run([sys.executable, "-m", "harness", "run-all", str(subs), "--task", TASK, "--mode", "test",
                          "--store", str(tmp_path / "s"), "--executor", "ray", "--address", f"127.0.0.1:{port}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and f"no Ray cluster answers at 127.0.0.1:{port}" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_without_streaming_as_through_ray_client(cluster, dirs):
    """The plain-task path that Ray Client (ray://) uses, on the same cluster."""
    subs, reports, store = dirs
    write_probe(subs, reports, "client")
    executor = RayExecutor(gpus_per_job=1, streaming=False)
    report = run_folder(subs, TASK, "test", RunOptions(device="cpu", max_repeats=3), results_dir=store,
                        executor=executor)
    (entry,) = report.entries
    (seen,) = reports_of(reports, "client")[-1:]
    assert entry.result.verdict == "pass" and entry.gpu == seen["gpu"] in ("0", "1")
    assert entry.overhead_s is not None and 0 <= entry.overhead_s < 60
    with open_store(store) as st:
        (job,) = JobTable(st).jobs()
        assert job.state == "done" and job.gpu == seen["gpu"] and job.node and job.attempts == 1
