"""harness.engine.process_tree: the submission's strays found from the children files, the same processes
psutil's whole-machine scan finds, and psutil itself where the kernel has no children files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from harness.engine import process_tree

ROOT = Path(__file__).resolve().parents[2]

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


def test_the_stray_scan_benchmark_finds_the_same_processes_both_ways(tmp_path):
    """bench/stray_scan.py's smoke run: a results file whose looks found the worker-like tree's one child
    both ways, with a crowd of extra processes about."""
    out = tmp_path / "scan.json"
    cmd = [sys.executable, "bench/stray_scan.py", "--others", "0", "20", "--reps", "3", "--out", str(out)]
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, timeout=120)
    rows = json.loads(out.read_text())["rows"]
    assert [r["other_processes"] for r in rows] == [0, 20]
    assert all(r["same_processes_found"] and r["process_tree_ms"] > 0 for r in rows), rows
    # the crowd was there (counted among the crowd's own children: the machine's count moves with other work)
    assert [r["crowd_alive"] for r in rows] == [0, 20]
