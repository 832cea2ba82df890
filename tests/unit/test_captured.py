"""The originals captured before the submission is imported (harness.worker.captured) are watched by the
worker's integrity check: replacing one in that module, or in a module that imported it, is tampering."""

from __future__ import annotations

import multiprocessing
import types

from harness.worker import captured, originals, sampler


def _worker():
    conn, _other = multiprocessing.Pipe()
    sampler_obj = types.SimpleNamespace(start=None, end=None, flush=None, gate=None)
    return types.SimpleNamespace(sampler=sampler_obj, conn=conn, cfg=None)


def test_replacing_a_captured_clock_is_tampering(monkeypatch):
    worker = _worker()
    snap = originals.snapshot(worker)
    assert originals.changed(snap, worker) == []
    monkeypatch.setattr(captured, "_perf_counter_ns", lambda: 0)
    assert originals.changed(snap, worker) == ["harness.worker.captured._perf_counter_ns"]


def test_replacing_the_samplers_copy_is_tampering(monkeypatch):
    worker = _worker()
    snap = originals.snapshot(worker)
    monkeypatch.setattr(sampler, "_perf_counter_ns", lambda: 0)
    assert originals.changed(snap, worker) == ["harness.worker.sampler._perf_counter_ns"]


def test_replacing_a_watched_torch_object_is_named(monkeypatch):
    import torch

    assert captured.tampered_names() == []
    monkeypatch.setattr(torch.Tensor, "clone", lambda self: self)
    assert captured.tampered_names() == ["torch.Tensor.clone"]
