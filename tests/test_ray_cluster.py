"""run-all joining a real Ray cluster by address: a head node started with ``ray start --head`` on
loopback with Ray's token authentication on (RAY_AUTH_MODE=token), as an operator would start one.
Without the token the harness says so (exit 2, its own message); with it (``$HARNESS_RAY_TOKEN`` or
``--ray-token-file``) every job runs there. Then the faults the cluster can suffer: its raylet killed at
a random point of a 10-file run; the run ends with exit 75 and no false verdict, and a rerun on a
fresh cluster completes it with the undisturbed verdicts; the same with its GCS killed (the run ends
with our message in seconds, not after Ray's own 60 s wait).

Each cluster is a ``ray start --block`` process in a session of its own, stopped by signalling that
session (never ``ray stop``, which would stop every Ray cluster of the machine).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from harness.store.database import open_store
from harness.store.jobs import JobTable
from tests.test_faults import _check_complete, _random_point, _subs, _verdicts, _wait_done

# read once, when ray is imported: the first test module that imports it decides for the whole pytest
# process, and tests/test_ray_executor.py's own cluster must stay on loopback
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
pytest.importorskip("ray")
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
TASK = str(ROOT / "tests" / "fixtures" / "tasks" / "mxfp4_small" / "task.yml")
RAY = str(Path(sys.executable).with_name("ray"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class HeadNode:
    """A one-node Ray cluster on loopback with token authentication, in a session of its own."""

    def __init__(self, token: str):
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.temp = tempfile.mkdtemp(prefix="rayc-", dir="/tmp")  # short: Ray's socket paths are bounded
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        env.update(
            RAY_AUTH_MODE="token",
            RAY_AUTH_TOKEN=token,
            RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",  # the node stays 127.0.0.1
            PYTHONPATH=str(ROOT),
        )
        cmd = [RAY, "start", "--head", "--block", "--port", str(self.port), "--node-ip-address", "127.0.0.1"]
        cmd += ["--num-cpus", "2", "--num-gpus", "0", "--include-dashboard", "false", "--temp-dir", self.temp]
        self.proc = subprocess.Popen(
            cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        deadline = time.monotonic() + 120
        while not self._answers():
            assert self.proc.poll() is None, "ray start --head exited"
            assert time.monotonic() < deadline, "the Ray head did not come up in 120 s"
            time.sleep(0.5)
        time.sleep(2)  # the raylet registers after the GCS answers

    def _answers(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        return True

    def process(self, name: str) -> psutil.Process:
        (proc,) = [p for p in self._processes() if p.name() == name]
        return proc

    def _processes(self) -> list[psutil.Process]:
        procs = []
        for p in psutil.process_iter(["cmdline"]):
            if any(self.temp in part for part in (p.info["cmdline"] or [])):
                procs.append(p)
        return procs

    def stop(self) -> None:
        for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.proc.pid, sig)
                self.proc.wait(wait)
                break
            except (ProcessLookupError, subprocess.TimeoutExpired):
                continue
        for p in self._processes():  # anything that left the session (workers, agents)
            try:
                p.kill()
            except psutil.Error:
                pass
        shutil.rmtree(self.temp, ignore_errors=True)


@pytest.fixture(scope="module")
def token() -> str:
    return secrets.token_hex(32)


@pytest.fixture(scope="module")
def head(token):
    node = HeadNode(token)
    yield node
    node.stop()


def _run_all(subs: Path, store: str, tmp: Path, address: str, token: str | None, *extra: str):
    temp = tmp / "tmp"
    temp.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "HARNESS_RAY_"))}
    env.update(TMPDIR=str(temp), HARNESS_SPOOL_DIR=str(tmp / "spool"), PYTHONPATH=str(ROOT))
    if token:
        env["HARNESS_RAY_TOKEN"] = token
    cmd = [sys.executable, "-m", "harness", "run-all", str(subs), "--task", TASK, "--mode", "test"]
    cmd += ["--device", "cpu", "--store", store, "--executor", "ray", "--address", address, "--jobs", "2", *extra]
    return cmd, env


def test_without_the_token_the_cluster_refuses_and_we_say_why(head, tmp_path):
    subs = _subs(tmp_path / "subs", correct=1)
    cmd, env = _run_all(subs, str(tmp_path / "store"), tmp_path, head.address, None)
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr
    assert f"cannot connect to the Ray cluster at {head.address}" in out.stderr and "HARNESS_RAY_TOKEN" in out.stderr
    assert "Traceback" not in out.stderr


def test_with_the_token_every_job_runs_on_the_joined_cluster(head, token, tmp_path):
    subs = _subs(tmp_path / "subs", correct=2)
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    cmd, env = _run_all(
        subs, str(tmp_path / "store"), tmp_path, head.address, None, "--ray-token-file", str(token_file)
    )
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "on the ray executor (2 at a time)" in out.stderr
    _check_complete(
        str(tmp_path / "store"), tmp_path, {"ok00": "pass", "ok01": "pass", "wrong": "fail", "raises": "error"}
    )
    with open_store(str(tmp_path / "store")) as st:
        assert all(j.node for j in JobTable(st).jobs())  # each job says where it ran


@pytest.mark.parametrize("victim", ["raylet", "gcs_server"])
def test_the_cluster_killed_mid_run_ends_the_run_and_a_rerun_completes_it(token, tmp_path, victim):
    subs = _subs(tmp_path / "subs", pause_s=1.5)  # 10 jobs 2 at a time: the run lasts well past the fault
    store = str(tmp_path / "store")
    node = HeadNode(token)
    try:
        cmd, env = _run_all(subs, store, tmp_path, node.address, token)
        log = open(tmp_path / "driver.log", "w")
        driver = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=log, text=True)
        try:
            _wait_done(store, driver, _random_point(1, 5))
            victim_process = node.process(victim)
            assert driver.poll() is None, "the driver ended before the cluster was killed: the fault never fired"
            victim_process.kill()
            killed = time.monotonic()
            code = driver.wait(240)
            ended_after = time.monotonic() - killed
        finally:
            driver.kill()
            log.close()
    finally:
        node.stop()
    text = (tmp_path / "driver.log").read_text()
    assert code == 75, text
    assert "the Ray cluster" in text and ended_after < 45, (ended_after, text)  # ours, not Ray's 60 s wait
    assert "Traceback" not in text and "please report it" not in text, text
    assert all(v[0] in ("pass", "fail", "error") for v in _verdicts(store).values())
    assert "error" not in [v for name, vs in _verdicts(store).items() if name != "raises" for v in vs]
    with open_store(store) as st:
        assert JobTable(st).counts()["running"] == 0  # released, or failed (infrastructure): none held
    fresh = HeadNode(token)
    try:
        cmd, env = _run_all(subs, store, tmp_path, fresh.address, token)
        out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    finally:
        fresh.stop()
    assert out.returncode == 0, out.stderr
    expected = {f"ok{i:02d}": "pass" for i in range(8)} | {"wrong": "fail", "raises": "error"}
    _check_complete(store, tmp_path, expected)


def _job_worker(raylet: psutil.Process) -> psutil.Process | None:
    """A Ray worker of this node running one of the harness's jobs (Ray titles it 'ray::harness-job')."""
    for p in raylet.children(recursive=True):
        try:
            if " ".join(p.cmdline()).startswith("ray::harness-job"):
                return p
        except psutil.Error:
            continue
    return None


def test_a_ray_worker_killed_mid_run_is_retried_and_the_run_completes(token, tmp_path):
    subs = _subs(tmp_path / "subs", pause_s=1.5)  # 10 jobs 2 at a time: the run lasts well past the fault
    store = str(tmp_path / "store")
    node = HeadNode(token)
    try:
        cmd, env = _run_all(subs, store, tmp_path, node.address, token)
        log = open(tmp_path / "driver.log", "w")
        driver = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=log, text=True)
        try:
            _wait_done(store, driver, _random_point(1, 5))
            deadline = time.monotonic() + 60
            while (victim := _job_worker(node.process("raylet"))) is None:
                assert driver.poll() is None and time.monotonic() < deadline, "no job running to kill"
                time.sleep(0.1)
            victim.kill()
            code = driver.wait(240)
        finally:
            driver.kill()
            log.close()
    finally:
        node.stop()
    text = (tmp_path / "driver.log").read_text()
    assert code == 0 and "retrying " in text and "Ray: " in text, text  # the crash was seen and retried
    expected = {f"ok{i:02d}": "pass" for i in range(8)} | {"wrong": "fail", "raises": "error"}
    _check_complete(store, tmp_path, expected)
