"""The worker's confinement, applied to itself before the submission is imported (any uid).

- Linux Landlock (:mod:`harness.worker.landlock`): writes only beneath the run folder (and the devices
  the GPU needs), reads only the Python install, the system's libraries, the GPU driver and toolkit,
  /proc and /sys, a few files of /etc, the harness's own packages and the task's folder (what the
  worker and the compat modules import), TCP connect and bind denied, and signals and abstract unix
  sockets scoped to the worker's own domain (it cannot kill, trace or talk to the harness).
- As root: a network namespace of its own (loopback only) and, when it stays root (no drop to
  'nobody'), no capabilities.
:func:`confine` returns what held, for the parent to report (``RunResult.sandbox``).
"""

from __future__ import annotations

import ctypes
import fcntl
import glob
import os
import shutil
import site
import socket
import stat
import struct
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from harness.worker import landlock

CLONE_NEWNET, CLONE_NEWNS = 0x40000000, 0x00020000
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 1 << 18
SOCKET_DIRS = ("/run",)  # where the system's services keep their sockets (docker, dbus, ...)
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
PR_CAPBSET_DROP, PR_SET_SECUREBITS = 24, 28
SECURE_NOROOT_LOCKED = 0x2F  # NOROOT, NO_SETUID_FIXUP and their locks
CAP_VERSION_3 = 0x20080522
# the only files of /etc the worker reads (the dynamic loader, user and group names, the time zone)
ETC_FILES = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "passwd",
    "group",
    "nsswitch.conf",
    "localtime",
    "timezone",
    "host.conf",
    "hosts",
    "os-release",
    "alternatives",
    "nvidia",
)
READ_ONLY_DEVICES = ("/dev/zero", "/dev/urandom", "/dev/random", "/dev/full")
# POSIX semaphores and shared memory: multiprocessing's locks, which torch.compile's parallel compile uses
SHARED_MEMORY = "/dev/shm"
OWN_THREADS = "/proc/self/task"
COMPILERS = ("cc", "gcc", "g++", "c++", "clang", "clang++", "ld", "as", "nvcc", "ptxas", "hipcc")
GPU_DEVICES = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/dri", "/dev/kfd")
SYSTEM_DIRS = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin")
HARNESS_PACKAGES = ("harness", "tasks", "fp4_reference")


@dataclass
class SandboxPaths:
    """What the worker may reach; built by :func:`worker_paths`."""

    writable: list[str]  # read and write beneath
    readable: list[str]  # read and execute beneath
    devices: list[str] = field(default_factory=list)  # read, write, ioctl
    read_devices: list[str] = field(default_factory=list)  # read only


def harness_root() -> str:
    """The folder the worker's harness was imported from (holds ``harness/``, ``tasks/``, ...)."""
    import harness

    return os.path.dirname(os.path.dirname(os.path.abspath(harness.__file__)))


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _python_dirs() -> list[str]:
    """The Python install (prefixes, site-packages, the path's other folders, loaded libraries' folders),
    never the harness's folder or anything in it but the install itself (a venv may live there): results,
    other submissions, a secret file may lie there, and a test runner puts its folders on the path."""
    root = os.path.realpath(harness_root())
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    dirs = prefixes | {os.path.dirname(os.path.realpath(sys.executable))}
    dirs.update(site.getsitepackages())
    dirs.update(p for p in sys.path if p and os.path.isabs(p))
    for so in _mapped_libraries():
        dirs.add(os.path.dirname(so))
    install = [os.path.realpath(p) for p in prefixes]
    return sorted(
        d
        for d in dirs
        if os.path.realpath(d) != "/"
        and (not _inside(os.path.realpath(d), root) or any(_inside(os.path.realpath(d), p) for p in install))
    )


def _mapped_libraries() -> set[str]:
    """Shared objects this process has loaded (where the torch, CUDA and driver libraries really are)."""
    out = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split(maxsplit=5)[-1].strip()
                if path.startswith("/") and ".so" in os.path.basename(path):
                    out.add(path)
    except OSError:
        pass
    return out


def _toolkit_dirs() -> list[str]:
    names = ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "ROCM_PATH", "TRITON_PTXAS_PATH", "TRITON_LIBCUDA_PATH")
    dirs = [os.environ[n] for n in names if os.environ.get(n)]
    dirs += [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    # the compilers Triton, Inductor and extension builds run (their whole install: bin, lib, libexec),
    # wherever they live (/opt/gcc on the H200 machine)
    named = [os.environ[v] for v in ("CC", "CXX", "CUDAHOSTCXX", "NVCC_CCBIN") if os.environ.get(v)]
    for tool in (*named, *COMPILERS):
        found = shutil.which(tool)
        if found:
            for path in {found, os.path.realpath(found)}:
                prefix = os.path.dirname(os.path.dirname(path))
                if prefix not in ("/", ""):
                    dirs.append(prefix)
    return dirs + glob.glob("/opt/rocm*") + glob.glob("/usr/local/cuda*")


def worker_paths(run_dir: str, extra_writable: Sequence[str] = (), extra_readable: Sequence[str] = ()) -> SandboxPaths:
    """The allow-lists for a worker whose run folder is ``run_dir``; ``extra_readable``: the task's
    folder and compat folder, ``extra_writable``: a shared Triton cache the operator asked for."""
    root = harness_root()
    packages = [os.path.join(root, p) for p in HARNESS_PACKAGES]
    # no folder holding the run folder (a script's folder in /tmp on the path): other runs' folders lie there
    run = os.path.realpath(run_dir)
    python = [d for d in _python_dirs() + _toolkit_dirs() if not _inside(run, os.path.realpath(d))]
    readable = (
        SYSTEM_DIRS
        + tuple(python)
        + tuple(packages)
        + tuple(extra_readable)
        + tuple(os.path.join("/etc", f) for f in ETC_FILES)
        + ("/proc", "/sys")
    )
    devices = ["/dev/null"] + [p for pattern in GPU_DEVICES for p in glob.glob(pattern)]
    return SandboxPaths(
        writable=[run_dir, SHARED_MEMORY, *extra_writable],
        readable=list(readable),
        devices=devices,
        read_devices=list(READ_ONLY_DEVICES),
    )


def apply_landlock(paths: SandboxPaths) -> dict:
    """Confines this process; returns what the kernel let it handle (raises LandlockError)."""
    rules = landlock.Ruleset()
    for p in paths.readable:
        rules.allow(p, landlock.READ)
    for p in paths.read_devices:
        rules.allow(p, landlock.READ_FILE)
    for p in paths.devices:
        rules.allow(p, landlock.DEVICE)
    for p in paths.writable:
        rules.allow(p, landlock.READ | landlock.WRITE)
    # the worker's own threads' files (/proc/self resolves to this process now): CUDA names its threads
    # by opening /proc/self/task/<tid>/comm for writing (with O_TRUNC) and does not start without it (error 304
    # on the H200: bench/sandbox_gpu_probe.py)
    rules.allow(OWN_THREADS, landlock.READ | landlock.WRITE_FILE | landlock.TRUNCATE)
    threads = len(os.listdir("/proc/self/task"))
    rules.restrict_self()
    return {
        "landlock_abi": rules.abi,
        "fs": rules.fs,
        "net": rules.net,
        "scoped_signals": rules.scopes,
        "scoped_abstract_unix_sockets": rules.scopes,
        "threads_before": threads,
    }


def new_network_namespace() -> None:
    """A network namespace of our own (root only): no interface but loopback, which is brought up."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare(CLONE_NEWNET): {os.strerror(err)}")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH14s", fcntl.ioctl(s, SIOCGIFFLAGS, ifreq))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | IFF_UP, b""))


def hide_unix_sockets(dirs: Sequence[str] = SOCKET_DIRS) -> int:
    """Root only: a mount namespace of our own in which every unix socket file under ``dirs`` is covered
    by /dev/null (connecting to it is refused). Landlock ABI 7 does not control connecting to pathname
    sockets, and a root worker would reach root-owned ones (/run/docker.sock). Returns how many."""
    libc = ctypes.CDLL(None, use_errno=True)

    def check(rc: int, what: str) -> None:
        if rc != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")

    check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "making / private")
    hidden = 0
    for top in dirs:
        for folder, _dirs, files in os.walk(top):
            for name in files:
                path = os.path.join(folder, name)
                try:
                    if not stat.S_ISSOCK(os.lstat(path).st_mode):
                        continue
                except OSError:
                    continue
                check(libc.mount(b"/dev/null", path.encode(), None, MS_BIND, None), f"covering {path}")
                hidden += 1
    return hidden


def drop_capabilities() -> None:
    """A root worker that stays root keeps uid 0 but no capability, now or after an exec (no module
    loading, raw I/O, ptrace, reading other users' files past their modes)."""
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except (OSError, ValueError):
        last = 40
    for cap in range(last + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    libc.prctl(PR_SET_SECUREBITS, SECURE_NOROOT_LOCKED, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(CAP_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: all empty (two words each)
    if libc.capset(header, data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capset: {os.strerror(err)}")


def confine(
    run_dir: str,
    extra_writable: Sequence[str] = (),
    extra_readable: Sequence[str] = (),
    user: str = "same",
    netns_done: bool = False,
) -> dict[str, Any]:
    """Applies the Landlock part (after any change of user) and returns the report; where Landlock or a
    part of it is missing the report says so (``landlock_error``) instead of raising."""
    report = {
        "landlock_abi": landlock.abi_version(),
        "fs": False,
        "net": False,
        "scoped_signals": False,
        "scoped_abstract_unix_sockets": False,
        "netns": netns_done,
        "user": user,
    }
    global _confined
    try:
        paths = worker_paths(run_dir, extra_writable, extra_readable)
        report.update(apply_landlock(paths))
        _confined = paths
    except landlock.LandlockError as exc:
        report["landlock_error"] = str(exc)
    return report


_confined: SandboxPaths | None = None  # what confine() allowed, for seal(): computed before any restriction


def confined() -> bool:
    """Whether confine() applied its Landlock rules in this process."""
    return _confined is not None


def seal(cfg: Any) -> str:
    """Makes the harness's own kernels' cache (``cfg.harness_kernels_dir``) read-only for this process and
    every thread and process it starts from now on: a second Landlock layer that allows what the first did,
    less writing there. Called once the worker has compiled those kernels, before the submission is
    imported. Returns what it did, for the sandbox report; raises LandlockError (the worker then does not
    start: its kernels' cache would stay writable)."""
    if not cfg.harness_kernels_dir:
        return "none"
    if _confined is None:
        return "not used: the worker is not confined"
    # the first layer's own lists, computed before it applied (under it, /dev lists nothing: no GPU device
    # files would be allowed again)
    entry = os.path.realpath(os.path.dirname(cfg.harness_kernels_dir))
    writable = [w for w in _confined.writable if os.path.realpath(w) != entry]
    apply_landlock(replace(_confined, writable=writable, readable=[*_confined.readable, entry]))
    return "sealed"


def missing(report: dict) -> list[str]:
    """What did not hold, in words (for the parent's one warning)."""
    if report.get("off"):
        return [f"any sandbox: {report['off']}"]
    out = []
    if report.get("landlock_error"):
        out.append(f"Landlock ({report['landlock_error']})")
    for key, what in (
        ("fs", "file-system confinement"),
        ("net", "TCP connect/bind denial (Landlock ABI 4)"),
        ("scoped_signals", "signal and abstract-socket scoping (Landlock ABI 6)"),
    ):
        if not report.get(key) and not report.get("landlock_error"):
            out.append(what)
    if report.get("user") == "root" and not report.get("capabilities_dropped"):
        out.append("dropping the root worker's capabilities")
    if report.get("netns_error"):
        out.append(f"a network namespace ({report['netns_error']})")
    if report.get("sockets_error"):
        out.append(f"hiding the system's unix sockets ({report['sockets_error']})")
    return out
