"""Shared pytest setup: tests marked ``gpu`` are skipped when no CUDA/ROCm device is present; after the
report, the interpreter's teardown says nothing when Triton's bindings were loaded (see below)."""

import atexit
import os
import sys

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA or ROCm GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_unconfigure(config):
    """Triton's compiler bindings (nanobind) leak a few ``ir.attribute`` objects when Gluon kernels are
    compiled (tests/test_examples.py compiles them for sm_90 on the CPU), and nanobind lists every
    leaked object, type and function on stderr at interpreter exit: 30 lines that are a refcount bug
    of Triton's binding code, nothing of ours and nothing the user can act on. pytest has written its
    report by now; at interpreter exit (after pytest has given stderr back), what the teardown writes
    to stderr goes to /dev/null."""
    if "triton._C.libtriton" in sys.modules:
        atexit.register(_quiet_teardown)


def _quiet_teardown():
    sys.stderr.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
