"""Inside the worker: what the harness captures before the submission is imported, and the check that
the submission left it alone.

Two layers, one check (:func:`tampered`):
- named originals (clocks, events, synchronize, a few tensor methods) are captured when this module is
  imported, which the worker does before it imports the submission; the sampler calls the captured
  objects, so a submission that later replaces ``torch.cuda.Event`` or ``time.perf_counter_ns`` does not
  change what is measured, and the watch-list below reports that it tried;
- whole namespaces the worker relies on to measure and to reply (the worker's own modules, the task
  module that generates the inputs, the JSON, pickle and pipe code that carries messages,
  ``torch.Tensor``'s methods) are snapshotted with every function's code object and defaults
  (replacing ``f.__code__`` keeps ``f``'s identity). After every operation the worker compares, and the
  parent rejects the run if anything differs.

A submission shares the worker's address space, so this raises the bar; it is not a proof (see
SECURITY.md: ctypes-level writes and native code are out of its reach).
"""

from __future__ import annotations

import json
import json.encoder
import multiprocessing.connection
import pickle
import sys
import threading
import time
import types

import torch

_perf_counter_ns = time.perf_counter_ns
_empty = torch.empty
_thread_count = threading.active_count
_CUDA = torch.cuda.is_available()
_Event = _event_record = _event_elapsed = _device_sync = _c_sync = None
_Stream = _CUDAGraph = _graph_ctx = None
if _CUDA:
    _Event = torch.cuda.Event
    _event_record = torch.cuda.Event.record
    _event_elapsed = torch.cuda.Event.elapsed_time
    _device_sync = torch.cuda.synchronize
    _c_sync = torch._C._cuda_synchronize
    _Stream, _CUDAGraph, _graph_ctx = torch.cuda.Stream, torch.cuda.CUDAGraph, torch.cuda.graph

# What a submission must leave alone; checked by identity after every call into it.
_WATCHED = {
    "time.perf_counter_ns": (time, "perf_counter_ns"),
    "time.perf_counter": (time, "perf_counter"),
    "time.time": (time, "time"),
    "torch.cuda.Event": (torch.cuda, "Event"),
    "torch.cuda.synchronize": (torch.cuda, "synchronize"),
    "torch.cuda.Event.record": (torch.cuda.Event, "record"),
    "torch.cuda.Event.elapsed_time": (torch.cuda.Event, "elapsed_time"),
    "torch.Tensor.clone": (torch.Tensor, "clone"),
    "torch.Tensor.cpu": (torch.Tensor, "cpu"),
    "torch.Tensor.contiguous": (torch.Tensor, "contiguous"),
    "torch.allclose": (torch, "allclose"),
    "torch._C._cuda_synchronize": (torch._C, "_cuda_synchronize"),
}
_ORIGINALS = {name: getattr(owner, attr, None) for name, (owner, attr) in _WATCHED.items()}


def tampered_names() -> list[str]:
    """Names of watched objects that are no longer the ones captured at import."""
    return [name for name, (owner, attr) in _WATCHED.items() if getattr(owner, attr, None) is not _ORIGINALS[name]]


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        _c_sync()


def thread_count() -> int:
    return _thread_count()


def _static_attrs(cls: type) -> dict:
    """Every attribute of ``cls`` as its MRO resolves it, without calling descriptors (stable ids)."""
    out = {}
    for klass in reversed(cls.__mro__):
        out.update(vars(klass))
    return out


def _code_parts(value):
    if isinstance(value, types.FunctionType):
        return (value.__code__, value.__defaults__, value.__kwdefaults__)
    return None


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return all(x is y for x, y in zip(a, b))


def _is_code(value) -> bool:
    """Module-level entries worth watching: code and types, not state variables that change by design."""
    return callable(value) or isinstance(value, types.ModuleType)


def _namespaces(worker) -> dict:
    from harness import protocol
    from harness.worker import gate, kernel_only, persisting_l2, sampler

    worker_mod = sys.modules[type(worker).__module__]
    modules = {
        "harness.worker.main": worker_mod,
        "harness.worker.sampler": sampler,
        "harness.worker.kernel_only": kernel_only,
        "harness.worker.originals": sys.modules[__name__],
        "harness.protocol": protocol,
        "harness.worker.gate": gate,
        "harness.worker.persisting_l2": persisting_l2,
        "json": json,
        "json.encoder": json.encoder,
        "pickle": pickle,
        "multiprocessing.connection": multiprocessing.connection,
    }
    if getattr(worker, "task_module", None) is not None:
        modules["task"] = worker.task_module  # its generate_input makes the inputs in the worker
    spaces = {name: {k: v for k, v in vars(m).items() if _is_code(v)} for name, m in modules.items()}
    gate_obj = getattr(worker.sampler, "gate", None)
    persisting = getattr(worker.sampler, "persisting", None)
    spaces.update(
        {
            "Worker": _static_attrs(type(worker)),
            "Sampler": _static_attrs(sampler.Sampler),
            "L2Flusher": _static_attrs(sampler.L2Flusher),
            "LaunchGate": _static_attrs(gate.LaunchGate),
            "PersistingL2": _static_attrs(persisting_l2.PersistingL2),
            "Connection": _static_attrs(type(worker.conn)),
            "JSONEncoder": _static_attrs(json.JSONEncoder),
            "torch.Tensor": _static_attrs(torch.Tensor),
            "worker": {k: getattr(worker, k, None) for k in ("conn", "sampler", "cfg")},
            "worker.sampler": {
                k: v
                for k, v in vars(worker.sampler).items()
                if k in ("start", "end", "flush", "gate", "_stamp", "_stamps", "persisting")
            },
            # the persisting-L2 reset's driver functions (only the largest raised limit moves)
            "worker.sampler.persisting": {k: v for k, v in vars(persisting).items() if k != "raised_bytes"}
            if persisting is not None
            else {},
            "worker.conn": dict(vars(worker.conn)),
            # the launch gate's settings (its cap bounds the host time hidden); only the sequence moves
            "worker.sampler.gate": {k: v for k, v in vars(gate_obj).items() if k != "_seq"} if gate_obj else {},
            "types": {"worker": type(worker), "worker.sampler": type(worker.sampler), "worker.conn": type(worker.conn)},
        }
    )
    return spaces


def snapshot(worker) -> dict:
    """Taken in the worker before the submission is imported."""
    snap = {}
    for space, entries in _namespaces(worker).items():
        for name, value in entries.items():
            if name.startswith("__") and name not in ("__class__", "__init__", "__call__"):
                continue
            snap[(space, name)] = (value, _code_parts(value))
    return snap


def changed(snap: dict, worker) -> list[str]:
    """Names (``space.attr``) whose object, code or defaults differ from ``snap``, or that are new."""
    now = {}
    for space, entries in _namespaces(worker).items():
        for name, value in entries.items():
            if name.startswith("__") and name not in ("__class__", "__init__", "__call__"):
                continue
            now[(space, name)] = value
    out = []
    for key, (value, code) in snap.items():
        current = now.get(key, _MISSING)
        if current is not value or not _same(_code_parts(current), code):
            out.append(".".join(key))
    for key in now.keys() - snap.keys():
        if key[0] in (
            "Worker",
            "Sampler",
            "L2Flusher",
            "LaunchGate",
            "PersistingL2",
            "Connection",
            "JSONEncoder",
            "torch.Tensor",
            "worker.sampler",
            "worker.conn",
            "worker.sampler.gate",
            "worker.sampler.persisting",
        ):
            out.append(".".join(key))  # a new attribute there shadows an inherited one
    return sorted(out)


_MISSING = object()


def tampered(snap: dict, worker) -> list[str]:
    """Everything the submission replaced: watched originals and changed namespace entries."""
    return tampered_names() + changed(snap, worker)
