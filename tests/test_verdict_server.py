"""The verdict server (``python -m harness serve``, harness.server): ``run`` in the same environment goes
through it, with the same output and exit codes as a run in its own process; each run gets its own
folder, secret and warnings; Ctrl-C reaches the served run; another environment, or a checkout edited
since the server started, runs in its own process; the servers' folder must be closed to others."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from harness.errors import UsageError
from harness.server import address
from tests.helpers import MXFP4_SMALL, ROOT, SECRET, cheat_with_correct_kernel, cli

SERVED = "run by the verdict server"
EXAMPLE = "submissions/torch_mxfp4.py"


@pytest.fixture(scope="module")
def server_env():
    """A verdict server on the CPU in a runtime folder of its own; its environment, for the clients."""
    runtime = tempfile.mkdtemp(prefix="vs-")  # short: a socket's path has at most 107 bytes
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_SECRET_SEED", "HARNESS_NO_SERVER")}
    env["XDG_RUNTIME_DIR"] = runtime
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))  # for clients elsewhere
    server = subprocess.Popen(
        [sys.executable, "-m", "harness", "serve", "--device", "cpu", "--idle-exit", "600"],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    ready = server.stderr.readline()
    assert "verdict server ready" in ready, ready + server.stderr.read()
    yield env
    stop = cli(["serve", "--stop"], env=env)
    assert stop.returncode == 0 and "stopped" in stop.stderr, stop.stderr
    assert server.wait(timeout=30) == 0
    assert not list(Path(runtime).rglob("*.sock"))  # it removed its socket


def _run(env, *args, extra_env=None):
    return cli(["run", *args, "--task", MXFP4_SMALL, "--device", "cpu"], env=dict(env, **(extra_env or {})))


def test_a_run_is_served_with_its_own_process_output_and_exit_codes(server_env, tmp_path):
    out = tmp_path / "r.json"
    served = _run(server_env, EXAMPLE, "--mode", "test", "--json", str(out))
    assert served.returncode == 0 and SERVED in served.stderr, served.stderr
    assert json.loads(out.read_text())["verdict"] == "pass"
    assert "verdict: PASS" in served.stdout  # the table, on the client's stdout
    wrong = _run(server_env, "tests/fixtures/submissions/wrong_zeros.py", "--mode", "test")
    assert wrong.returncode == 1 and SERVED in wrong.stderr, wrong.stderr
    own = _run(
        server_env, "tests/fixtures/submissions/wrong_zeros.py", "--mode", "test", extra_env={"HARNESS_NO_SERVER": "1"}
    )
    assert own.returncode == 1 and SERVED not in own.stderr
    missing = _run(server_env, "no_such_file.py")
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    status = cli(["serve", "--status"], env=server_env)
    assert json.loads(status.stdout)["runs"] >= 3


def test_each_served_run_gets_its_own_secret_and_folder(server_env, tmp_path):
    """The secret goes with each request and leaves the server after the run: the next run without
    one draws a random secret, as its own process would. A relative --json lands in the client's folder."""
    first = cli(
        ["run", str(ROOT / EXAMPLE), "--task", str(ROOT / MXFP4_SMALL), "--device", "cpu", "--mode", "leaderboard",
         "--max-repeats", "3", "--json", "a.json"],
        env=dict(server_env, HARNESS_SECRET_SEED=SECRET), cwd=tmp_path,
    )  # fmt: skip
    assert first.returncode == 0 and SERVED in first.stderr, first.stderr
    second = cli(
        ["run", str(ROOT / EXAMPLE), "--task", str(ROOT / MXFP4_SMALL), "--device", "cpu", "--mode", "leaderboard",
         "--max-repeats", "3", "--json", "b.json"],
        env=server_env, cwd=tmp_path,
    )  # fmt: skip
    assert second.returncode == 0 and SERVED in second.stderr, second.stderr
    a, b = (json.loads((tmp_path / name).read_text()) for name in ("a.json", "b.json"))
    assert "secret seed: $HARNESS_SECRET_SEED" in a["warnings"]
    assert not any(w.startswith("secret seed") for w in b["warnings"])  # random: nothing said
    if os.getuid() == 0:  # said to every run, as to every process, not once per server
        assert [any("runs as root" in w for w in doc["warnings"]) for doc in (a, b)] == [True, True]


def test_another_environment_or_edited_code_is_not_served(server_env, monkeypatch):
    own = _run(server_env, EXAMPLE, "--mode", "test", extra_env={"SOME_SETTING": "1"})
    assert own.returncode == 0 and SERVED not in own.stderr
    assert "runs for other code or another environment" in own.stderr  # why it was not used, and the fix
    listed = cli(["serve", "--status", "--all"], env=dict(server_env, SOME_SETTING="1"))
    assert listed.returncode == 0 and json.loads(listed.stdout)["runs"] >= 1  # found from the other environment
    assert cli(["serve", "--detach", "--all"], env=server_env).returncode == 2
    shell = _run(server_env, EXAMPLE, "--mode", "test", extra_env={"SHLVL": "7", "OLDPWD": "/"})
    assert SERVED in shell.stderr  # what differs between two shells of one user changes no run
    env = {"PATH": "/bin"}
    before = address.fingerprint(env)
    assert address.fingerprint(dict(env, SHLVL="3", HARNESS_SECRET_SEED="x")) == before
    assert address.fingerprint(dict(env, TRITON_CACHE_DIR="/x")) != before
    files = address.code_state()
    monkeypatch.setattr(address, "code_state", lambda: [*files[:-1], (files[-1][0], files[-1][1], files[-1][2] + 1)])
    assert address.fingerprint(env) != before  # a file saved since: another server
    monkeypatch.setattr(address, "code_state", lambda: files)
    assert address.fingerprint(env) == before
    installed = address.installed_state()
    assert installed  # the venv's site-packages at least
    monkeypatch.setattr(address, "installed_state", lambda: [(installed[0][0], installed[0][1] + 1)])
    assert address.fingerprint(env) != before  # a package installed or removed since: another server


def test_ctrl_c_stops_the_served_run_and_the_server_serves_on(server_env, tmp_path):
    slow = cheat_with_correct_kernel(
        tmp_path, "import time\ndef custom_kernel(data):\n    time.sleep(0.5)\n    return _correct_kernel(data)\n"
    )
    client = subprocess.Popen(
        [sys.executable, "-m", "harness", "run", str(slow), "--task", MXFP4_SMALL, "--device", "cpu", "--mode",
         "benchmark", "--max-repeats", "20"],
        cwd=ROOT, env=server_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines = []
    while not any("benchmark" in line for line in lines):  # a timed case has begun
        line = client.stderr.readline()
        assert line, "".join(lines)
        lines.append(line)
    time.sleep(1.0)
    client.send_signal(signal.SIGINT)
    _out, err = client.communicate(timeout=120)
    assert client.returncode == 130, "".join(lines) + err
    assert "interrupted (Ctrl-C) after" in err, err  # the served run stopped, kept its cases and said so
    again = _run(server_env, EXAMPLE, "--mode", "test")
    assert again.returncode == 0 and SERVED in again.stderr


def test_a_second_client_waits_for_the_run_before_it_and_says_so(server_env, tmp_path):
    """One run at a time (they would share the GPU): the second client is told it waits, then served."""
    slow = cheat_with_correct_kernel(
        tmp_path, "import time\ndef custom_kernel(data):\n    time.sleep(1.5)\n    return _correct_kernel(data)\n"
    )
    first = subprocess.Popen(
        [sys.executable, "-m", "harness", "run", str(slow), "--task", MXFP4_SMALL, "--device", "cpu", "--mode", "test"],
        cwd=ROOT, env=server_env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert SERVED in first.stderr.readline()  # the first is being served
    second = _run(server_env, EXAMPLE, "--mode", "test")
    assert first.wait(timeout=120) == 0 and second.returncode == 0
    assert SERVED in second.stderr and "busy with another run" in second.stderr, second.stderr


def test_the_servers_folder_must_be_closed_to_others(monkeypatch, tmp_path):
    runtime = Path(tempfile.mkdtemp(prefix="vs-"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    folder = address.server_folder(create=True)
    assert folder == runtime / address.APP and folder.stat().st_mode & 0o777 == 0o700
    folder.chmod(0o755)
    with pytest.raises(UsageError, match="closed to others"):
        address.server_folder()
    long = tmp_path / ("x" * 80)  # too long for a socket's path
    long.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(long))
    assert address.server_folder().parent == Path(tempfile.gettempdir())
