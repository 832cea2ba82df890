"""harness.worker.landlock and harness.worker.sandbox on their own, in a child process that confines
itself with Landlock only (no network namespace, no change of user: the worker of a non-root harness)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.worker import landlock
from tests.helpers import listening_sockets

ROOT = Path(__file__).resolve().parent.parent
needs_landlock = pytest.mark.skipif(landlock.abi_version() < 6, reason="needs Landlock ABI 6 (Linux 6.12+)")

CHILD = textwrap.dedent(r"""
    import json, os, signal, socket, sys
    from harness.worker import sandbox
    run_dir, outside, port, abstract, limit_abi = sys.argv[1:6]
    if limit_abi != "none":                      # pretend an older kernel: only what that ABI handles
        from harness.worker import landlock
        real = landlock.Ruleset.__init__
        landlock.Ruleset.__init__ = lambda self, **kw: real(self, abi=int(limit_abi))
    report = sandbox.confine(run_dir, user="same")
    results = {}

    def attempt(name, fn):
        try:
            fn()
            results[name] = 0
        except OSError as exc:
            results[name] = exc.errno

    def write(path):
        with open(path, "w") as f:
            f.write("x")

    def connect(family, address):
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(3)
            s.connect(address)

    attempt("write inside", lambda: write(os.path.join(run_dir, "inside.txt")))
    attempt("write outside", lambda: write(os.path.join(outside, "outside.txt")))
    attempt("read outside", lambda: open(os.path.join(outside, "other.py")).read())
    attempt("tcp connect", lambda: connect(socket.AF_INET, ("127.0.0.1", int(port))))
    attempt("abstract unix socket", lambda: connect(socket.AF_UNIX, "\0" + abstract))
    attempt("signal the parent", lambda: os.kill(os.getppid(), signal.SIGCONT))
    attempt("import torch", lambda: __import__("torch"))
    attempt("multiprocessing lock", lambda: __import__("multiprocessing").get_context("spawn").Lock())
    print(json.dumps({"report": report, "results": results}))
""")


@pytest.fixture
def listeners():
    with listening_sockets("harness-sandbox-unit") as port_and_name:
        yield port_and_name


def _confined_child(tmp_path, listeners, limit_abi="none") -> dict:
    run_dir, outside = tmp_path / "run", tmp_path / "outside"
    run_dir.mkdir()
    outside.mkdir()
    (outside / "other.py").write_text("secret = 1\n")
    port, abstract = listeners
    p = subprocess.run(
        [sys.executable, "-c", CHILD, str(run_dir), str(outside), str(port), abstract, limit_abi],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@needs_landlock
def test_landlock_alone_denies_writes_reads_tcp_signals_and_abstract_sockets(tmp_path, listeners):
    out = _confined_child(tmp_path, listeners)
    assert out["report"]["fs"] and out["report"]["net"] and out["report"]["scoped_signals"], out["report"]
    assert out["results"] == {
        "write inside": 0,
        "write outside": errno.EACCES,
        "read outside": errno.EACCES,
        "tcp connect": errno.EACCES,
        "abstract unix socket": errno.EPERM,
        "signal the parent": errno.EPERM,
        "import torch": 0,
        "multiprocessing lock": 0,
    }
    assert not (tmp_path / "outside" / "outside.txt").exists()


@needs_landlock
def test_an_older_abi_handles_only_what_it_knows_and_says_so(tmp_path, listeners):
    """ABI 3 (Linux 6.2): files are confined, TCP and signals are not, and the report says which."""
    from harness.worker.sandbox import missing

    out = _confined_child(tmp_path, listeners, limit_abi="3")
    report = out["report"]
    assert (report["landlock_abi"], report["fs"], report["net"], report["scoped_signals"]) == (3, True, False, False)
    assert out["results"]["write outside"] == errno.EACCES and out["results"]["write inside"] == 0
    assert out["results"]["tcp connect"] == 0 and out["results"]["signal the parent"] == 0
    assert len(missing(report)) == 2


def test_ruleset_masks_follow_the_abi():
    assert landlock.handled_fs(0) == 0
    assert landlock.handled_fs(1) == (1 << 13) - 1
    assert landlock.handled_fs(4) == landlock.handled_fs(3) == (1 << 15) - 1
    assert landlock.handled_fs(7) == (1 << 16) - 1


def test_file_rules_keep_only_file_rights(tmp_path):
    if landlock.abi_version() < 1:
        pytest.skip("no Landlock")
    f = tmp_path / "f"
    f.write_text("")
    rules = landlock.Ruleset()
    assert rules.allow(str(f), landlock.READ | landlock.WRITE)
    assert rules.allowed[-1][1] & ~landlock.FILE_ONLY == 0
    assert not rules.allow(str(tmp_path / "missing"), landlock.READ)
    os.close(rules.fd)


SEALS = textwrap.dedent(r"""
    import json, os, sys
    from harness.worker import sandbox
    from harness.worker.config import WorkerConfig
    run_dir, entry = sys.argv[1:3]
    sandbox.GPU_DEVICES = ("/dev/zer*",)  # a device file found by a glob, as /dev/nvidia0 is on a GPU machine
    layers = []
    real = sandbox.apply_landlock
    sandbox.apply_landlock = lambda paths: layers.append(paths) or real(paths)
    sandbox.confine(run_dir, extra_writable=[entry], user="same")
    with open(os.path.join(entry, "triton", "gate.cubin"), "w") as f:  # the worker's own kernels, before the seal
        f.write("the harness's")
    cfg = WorkerConfig(submission_path=os.path.join(run_dir, "s.py"), compat_dir=run_dir, device="cpu",
                       l2_bytes=None, hide_bytes=0, stdout_path="", stderr_path="", run_dir=run_dir,
                       sandbox_writable=[entry], harness_kernels_dir=os.path.join(entry, "triton"))
    done = sandbox.seal(cfg)
    results = {"done": done}
    for name, path in (("kernels", os.path.join(entry, "triton", "planted.bin")), ("run_dir", os.path.join(run_dir, "x"))):
        try:
            open(path, "w").close()
            results[name] = 0
        except OSError as exc:
            results[name] = exc.errno
    results["read_kernels"] = open(os.path.join(entry, "triton", "gate.cubin")).read()
    first, second = layers
    results["same_devices"] = first.devices == second.devices and "/dev/zero" in second.devices
    results["moved"] = [w for w in first.writable if w not in second.writable]
    results["added_readable"] = [r for r in second.readable if r not in first.readable]
    print(json.dumps(results))
""")


@pytest.mark.skipif(landlock.abi_version() < 1, reason="needs Landlock")
def test_the_seal_allows_what_confinement_did_less_writing_the_harness_kernels(tmp_path):
    """The second layer reuses the first layer's lists, computed before any restriction: computed again under
    the first layer, /dev lists nothing and the GPU's device files would be denied from then on."""
    run_dir, entry = tmp_path / "run", tmp_path / "harness-kernels"
    run_dir.mkdir()
    (entry / "triton").mkdir(parents=True)
    done = subprocess.run(
        [sys.executable, "-c", SEALS, str(run_dir), str(entry)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["done"] == "sealed"
    assert seen["kernels"] == errno.EACCES and seen["run_dir"] == 0, seen
    assert seen["read_kernels"] == "the harness's"
    assert seen["same_devices"] and seen["moved"] == [str(entry)] and seen["added_readable"] == [str(entry)], seen
