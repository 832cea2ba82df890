"""Linux Landlock through ctypes: an unprivileged process confines itself (and all its later children).

PyPI's ``landlock`` (1.0.0.dev5, alpha) covers only file-system rules, not the network (ABI 4) or the
signal and abstract-socket scopes (ABI 6) the worker needs, so the three system calls are called
directly here (uapi: include/uapi/linux/landlock.h). A ruleset names what it *handles*; everything
handled is denied except what a rule allows. What the running kernel lacks is left out of the handled
set (best effort), and :class:`Ruleset` says which parts it could handle.
"""

from __future__ import annotations

import ctypes
import os
import stat

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # the same on every architecture
CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH, RULE_NET_PORT = 1, 2
PR_SET_NO_NEW_PRIVS = 38

# file-system access rights (the ABI that introduced each)
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER = 1 << 13  # ABI 2: rename/link across directories
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5: ioctl on device files
FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # the rights a rule on a non-directory may hold

READ = EXECUTE | READ_FILE | READ_DIR
WRITE = (
    WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO | MAKE_SYM | REFER | TRUNCATE
)
DEVICE = READ_FILE | WRITE_FILE | IOCTL_DEV | READ_DIR

# network (ABI 4) and scopes (ABI 6)
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class LandlockError(OSError):
    pass


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def abi_version() -> int:
    """The kernel's Landlock ABI (0: no Landlock: an old kernel, or not enabled in its LSM list)."""
    try:
        v = _libc().syscall(
            ctypes.c_long(SYS_CREATE_RULESET), None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION)
        )
    except (OSError, AttributeError):
        return 0
    return max(0, int(v))


def handled_fs(abi: int) -> int:
    return next((FS_BY_ABI[a] for a in sorted(FS_BY_ABI, reverse=True) if abi >= a), 0)


class Ruleset:
    """Build with :meth:`allow`, then :meth:`restrict_self` (irreversible, for this thread and every
    thread and process it starts later). ``fs``/``net``/``scopes``: which parts to handle; each is
    dropped where the kernel's ABI lacks it (see the attributes of the same names)."""

    def __init__(self, fs: bool = True, net: bool = True, scopes: bool = True, abi: int | None = None):
        self.abi = abi_version() if abi is None else abi
        if self.abi < 1:
            raise LandlockError(0, "this kernel has no Landlock (Linux 5.13+ with landlock in its LSM list)")
        self.fs_mask = handled_fs(self.abi) if fs else 0
        self.net_mask = NET_BIND_TCP | NET_CONNECT_TCP if net and self.abi >= 4 else 0
        self.scope_mask = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if scopes and self.abi >= 6 else 0
        self.fs, self.net, self.scopes = bool(self.fs_mask), bool(self.net_mask), bool(self.scope_mask)
        # ABI 1 cannot handle REFER: renames across directories are then always denied
        attr = _RulesetAttr(self.fs_mask, self.net_mask, self.scope_mask)
        size = ctypes.sizeof(_RulesetAttr) if self.abi >= 6 else (16 if self.abi >= 4 else 8)
        fd = _libc().syscall(
            ctypes.c_long(SYS_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)
        )
        if fd < 0:
            err = ctypes.get_errno()
            raise LandlockError(err, f"landlock_create_ruleset failed: {os.strerror(err)}")
        self.fd = int(fd)
        self.allowed: list[tuple[str, int]] = []

    def allow(self, path: str, access: int) -> bool:
        """Allows ``access`` beneath ``path`` (a directory) or on it (a file: only the file rights
        apply). False when the path does not exist (nothing to allow)."""
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                access &= FILE_ONLY
            access &= self.fs_mask
            if not access:
                return False
            rule = _PathBeneathAttr(access, fd)
            if (
                _libc().syscall(
                    ctypes.c_long(SYS_ADD_RULE),
                    ctypes.c_int(self.fd),
                    ctypes.c_int(RULE_PATH_BENEATH),
                    ctypes.byref(rule),
                    ctypes.c_uint32(0),
                )
                < 0
            ):
                err = ctypes.get_errno()
                raise LandlockError(err, f"landlock_add_rule({path!r}) failed: {os.strerror(err)}")
        finally:
            os.close(fd)
        self.allowed.append((path, access))
        return True

    def restrict_self(self) -> None:
        """Confines the calling thread (set no_new_privs first, as Landlock requires without CAP_SYS_ADMIN)."""
        libc = _libc()
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            raise LandlockError(err, f"prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(err)}")
        try:
            if libc.syscall(ctypes.c_long(SYS_RESTRICT_SELF), ctypes.c_int(self.fd), ctypes.c_uint32(0)) < 0:
                err = ctypes.get_errno()
                raise LandlockError(err, f"landlock_restrict_self failed: {os.strerror(err)}")
        finally:
            os.close(self.fd)
