"""The worker's sandbox (harness.worker.sandbox), attacked from inside a submission.

The probe tries, at import, every escape the sandbox must stop and prints what it attempted and how
each attempt ended; the tests assert that every attempt ran and was denied (with the errno Landlock
gives, so a denial for another reason does not count), and that a write inside its own run folder,
the control, succeeded. On this machine the harness runs as root and the Python install is under
/root, so the worker cannot drop to 'nobody': it runs as root (capabilities dropped), the case of a
harness user that owns everything the worker could reach.
"""

from __future__ import annotations

import errno
import glob
import json
import os
import shutil
import socket
import sysconfig
import tempfile

import pytest

from harness.results import PASS
from harness.worker import landlock
from tests.helpers import MXFP4_SMALL, NVFP4_SMALL, ROOT, listening_sockets, run

needs_landlock = pytest.mark.skipif(landlock.abi_version() < 6, reason="needs Landlock ABI 6 (Linux 6.12+)")

PROBE = r'''
import json as _json, os as _os, signal as _signal, socket as _socket, sys as _sys, sysconfig as _sysconfig

_T = _json.loads(r"""{targets}""")
_report = {{"attempted": [], "denied": {{}}, "allowed": []}}


def _try(name, fn):
    _report["attempted"].append(name)
    try:
        fn()
    except OSError as exc:
        _report["denied"][name] = exc.errno
    else:
        _report["allowed"].append(name)


def _write(path):
    def attempt():
        with open(path, "w") as f:
            f.write("planted by the sandbox probe")
    return attempt


def _connect(address, family=_socket.AF_INET):
    def attempt():
        s = _socket.socket(family, _socket.SOCK_STREAM)
        s.settimeout(3)
        try:
            s.connect(address)
        finally:
            s.close()
    return attempt


def _bind():
    s = _socket.socket()
    try:
        s.bind(("127.0.0.1", 0))
    finally:
        s.close()


_name = "sandbox_probe_%d.txt" % _os.getpid()
_try("write own run folder", _write(_os.path.join(_os.path.dirname(_os.path.abspath(__file__)), _name)))
for _d in _T["write_dirs"] + [_sysconfig.get_paths()["purelib"], _os.path.dirname(_os.getcwd())]:
    _try("write " + _d, _write(_os.path.join(_d, _name)))
_try("write sitecustomize.py", _write(_os.path.join(_sysconfig.get_paths()["purelib"], "sitecustomize.py")))
for _f in _T["read_files"]:
    _try("read " + _f, lambda _f=_f: open(_f, "rb").read())
_try("tcp connect", _connect(("127.0.0.1", _T["port"])))
_try("tcp bind", _bind)
_try("abstract unix socket", _connect("\0" + _T["abstract"], _socket.AF_UNIX))
if _T["run_socket"]:
    _try("pathname unix socket", _connect(_T["run_socket"], _socket.AF_UNIX))
_try("signal the parent", lambda: _os.kill(_os.getppid(), _signal.SIGCONT))
_try("read the parent's environment", lambda: open("/proc/%d/environ" % _os.getppid(), "rb").read())
_report.update(cwd=_os.getcwd(), folder=_os.path.dirname(_os.path.abspath(__file__)), sys_path=_sys.path)
print("SANDBOX-PROBE " + _json.dumps(_report), flush=True)


def custom_kernel(data):
    return _correct_kernel(data)
'''
# what Landlock answers: EACCES for file and TCP access, EPERM for what is out of its scope
EXPECTED_ERRNO = {
    "tcp connect": errno.EACCES,
    "tcp bind": errno.EACCES,
    "abstract unix socket": errno.EPERM,
    "signal the parent": errno.EPERM,
    "read the parent's environment": errno.EACCES,
}
HIDDEN = errno.ECONNREFUSED  # a root worker's view of the system's sockets: covered by /dev/null


@pytest.fixture
def targets(tmp_path):
    """A listening TCP socket and abstract unix socket in this (the harness's) process, another
    run's submission, and folders the probe must not write to."""
    with listening_sockets("harness-sandbox-probe") as (port, abstract):
        # as root: a service's socket under /run (where docker's and dbus's live), which Landlock does not guard
        run_socket, service = None, None
        if os.geteuid() == 0 and os.access("/run", os.W_OK):
            run_socket = f"/run/harness-sandbox-probe-{os.getpid()}.sock"
            service = socket.socket(socket.AF_UNIX)
            service.bind(run_socket)
            service.listen()
        other_run = tempfile.mkdtemp(prefix="harness-run-")
        other = os.path.join(other_run, "submission.py")
        with open(other, "w") as f:
            f.write("def custom_kernel(data): ...  # another competitor's file\n")
        secret = tmp_path / "secret.txt"
        secret.write_text("a secret of the harness's user\n")
        write_dirs = [
            str(ROOT),
            str(ROOT / "harness"),
            str(ROOT / "tasks"),
            str(ROOT / "fp4_reference"),
            tempfile.gettempdir(),
            str(tmp_path),
            other_run,
        ]
        yield {
            "port": port,
            "abstract": abstract,
            "write_dirs": write_dirs,
            "run_socket": run_socket,
            # another run's file, the repository's examples, a secret of the harness's user, and a folder a
            # test runner put on the path (pytest's rootdir)
            "read_files": [
                other,
                str(ROOT / "submissions" / "torch_nvfp4.py"),
                str(secret),
                str(ROOT / "tests" / "conftest.py"),
            ],
        }
        if service is not None:
            service.close()
            os.unlink(run_socket)
    shutil.rmtree(other_run, ignore_errors=True)


def _probe_report(r) -> dict:
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("SANDBOX-PROBE ")), None)
    assert line, f"the probe printed no report (verdict {r.verdict}: {r.message}); stdout: {r.stdout[-2000:]}"
    return json.loads(line[len("SANDBOX-PROBE ") :])


def _assert_all_denied(report: dict, targets: dict, netns: bool) -> None:
    """``netns``: the worker has a network namespace of its own, where the harness's abstract socket
    does not even exist (ECONNREFUSED); Landlock's scope on its own is tested in test_worker_sandbox."""
    expected = (
        ["write own run folder"]
        + [f"write {d}" for d in targets["write_dirs"]]
        + [f"read {f}" for f in targets["read_files"]]
        + list(EXPECTED_ERRNO)
        + (["pathname unix socket"] if targets["run_socket"] else [])
    )
    assert set(expected) <= set(report["attempted"]), set(expected) - set(report["attempted"])
    assert report["allowed"] == ["write own run folder"], report["allowed"]  # the control, and only it
    assert set(report["denied"]) == set(report["attempted"]) - {"write own run folder"}
    for name, err in report["denied"].items():
        want = {EXPECTED_ERRNO.get(name, errno.EACCES)}
        if netns and name == "abstract unix socket":
            want.add(errno.ECONNREFUSED)
        if name == "pathname unix socket":
            want = {HIDDEN}
        assert err in want, (name, errno.errorcode.get(err, err))
    assert report["cwd"] == report["folder"]  # the worker works in its run folder
    root = os.path.realpath(ROOT)
    assert not [p for p in report["sys_path"] if p in ("", ".") or os.path.realpath(p) == root], report["sys_path"]


@needs_landlock
@pytest.mark.parametrize("drop", [None, False], ids=["default-user", "harness-user"])
def test_probe_every_escape_attempt_runs_and_fails(cheat, targets, drop):
    sub = cheat(PROBE.format(targets=json.dumps(targets)), name="probe")
    r = run(sub, mode="test", drop_privileges=drop)
    _assert_all_denied(_probe_report(r), targets, r.sandbox.get("netns"))
    assert r.verdict == PASS, r.message  # an honest kernel still passes inside the sandbox
    assert r.sandbox["fs"] and r.sandbox["net"] and r.sandbox["scoped_signals"], r.sandbox
    assert r.sandbox["landlock_abi"] == landlock.abi_version()
    assert r.sandbox["threads_before"] == 1  # confined before any other thread existed
    if os.geteuid() == 0:
        assert r.sandbox["netns"] is True
        assert r.sandbox["user"] == "nobody" or r.sandbox.get("capabilities_dropped") is True
        assert r.sandbox["hidden_sockets"] >= 1  # at least the test's own service socket
    assert not [w for w in r.warnings if w.startswith("sandbox:")], r.warnings
    assert not [f for d in targets["write_dirs"] for f in glob.glob(os.path.join(d, "sandbox_probe_*.txt"))]
    assert not os.path.exists(os.path.join(sysconfig.get_paths()["purelib"], "sitecustomize.py"))


@pytest.mark.gpu
@needs_landlock
@pytest.mark.parametrize("task", [MXFP4_SMALL, NVFP4_SMALL])
def test_gpu_probe_every_escape_attempt_runs_and_fails(cheat, targets, task):
    """The same probe on the GPU, in a ranked run: the device files the GPU needs are allowed, the
    rest is not, and the honest kernel inside it still passes and is scored."""
    sub = cheat(PROBE.format(targets=json.dumps(targets)), task=task, name="probe")
    r = run(sub, task=task, mode="leaderboard", device="cuda")
    _assert_all_denied(_probe_report(r), targets, r.sandbox.get("netns"))
    assert r.verdict == PASS and r.score_us is not None, r.message
    assert not [w for w in r.warnings if w.startswith("sandbox:")], r.warnings


def test_a_kernel_without_landlock_is_reported_not_hidden(monkeypatch):
    """Where the kernel lacks Landlock the report says so, and the parent's warning names it."""
    from harness.worker import sandbox

    monkeypatch.setattr(landlock, "abi_version", lambda: 0)
    report = sandbox.confine("/nonexistent", user="same")
    assert report["fs"] is False and "no Landlock" in report["landlock_error"]
    assert sandbox.missing(report) == [f"Landlock ({report['landlock_error']})"]
    partial = {"landlock_abi": 3, "fs": True, "net": False, "scoped_signals": False, "user": "same"}
    assert sandbox.missing(partial) == [
        "TCP connect/bind denial (Landlock ABI 4)",
        "signal and abstract-socket scoping (Landlock ABI 6)",
    ]


COMPILED = r"""
import glob as _glob, os as _os

# Inductor's C++ backend on the CPU: g++ runs inside the sandbox, with its cache in the run folder
_one = torch.compile(lambda x: x.sum() / x.numel(), dynamic=False)(torch.ones(8))
_built = _glob.glob(_os.path.join(_os.environ["TORCHINDUCTOR_CACHE_DIR"], "**", "*.so"), recursive=True)
print("INDUCTOR-BUILT", len(_built), all(p.startswith(_os.getcwd()) for p in _built), flush=True)


def custom_kernel(data):
    out = _correct_kernel(data)
    return (out.float() * _one).to(out.dtype)
"""


@needs_landlock
def test_torch_compile_builds_inside_the_sandbox(cheat):
    """torch.compile's Inductor compiles and loads a C++ kernel (g++, the Python and torch headers, its
    cache under the run folder) in the sandboxed worker, and the kernel is used."""
    r = run(cheat(COMPILED, name="compiled"), mode="test", timeout_scale=5)
    assert r.verdict == PASS, (r.message, r.stderr[-3000:])
    built = next(ln for ln in r.stdout.splitlines() if ln.startswith("INDUCTOR-BUILT"))
    _, count, inside = built.split()
    assert int(count) >= 1 and inside == "True", built
    assert r.sandbox["fs"], r.sandbox
