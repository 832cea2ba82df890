"""harness.engine.process_tree: the submission's strays found from the children files, the same processes
psutil's whole-machine scan finds, and psutil itself where the kernel has no children files."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from harness.engine import process_tree

# a process with a child that has a child of its own: three levels under the test
TREE = (
    "import subprocess, sys; "
    "subprocess.Popen([sys.executable, '-c', \"import subprocess; subprocess.Popen(['sleep', '60']); "
    "print('up', flush=True); import time; time.sleep(60)\"], stdout=sys.stdout); "
    "sys.stdout.flush(); sys.stdin.read()"
)


@pytest.fixture
def tree():
    proc = subprocess.Popen([sys.executable, "-c", TREE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
    yield proc
    for p in psutil.Process(proc.pid).children(recursive=True):
        p.kill()
    proc.kill()
    proc.wait()


def _pids(processes: list[psutil.Process]) -> set[int]:
    return {p.pid for p in processes}


def test_descendants_are_the_ones_psutil_finds_on_the_whole_machine(tree):
    expected = _pids(psutil.Process(tree.pid).children(recursive=True))
    assert len(expected) == 2  # the child and the grandchild
    assert _pids(process_tree.descendants(tree.pid)) == expected
    assert tree.pid in _pids(process_tree.children(os.getpid()))


def test_without_children_files_psutil_answers(tree, monkeypatch):
    monkeypatch.setattr(process_tree, "child_pids", lambda pid: None)
    assert _pids(process_tree.descendants(tree.pid)) == _pids(psutil.Process(tree.pid).children(recursive=True))
    assert tree.pid in _pids(process_tree.children(os.getpid()))


def test_an_ended_process_has_no_children():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert process_tree.child_pids(proc.pid) == [] and process_tree.descendants(proc.pid) == []
