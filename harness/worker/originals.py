"""Inside the worker: the check that the submission left the harness alone.

Two layers, one check (:func:`tampered`):
- named originals (clocks, events, synchronize, a few tensor methods) are captured by
  :mod:`harness.worker.captured` when it is imported, which the worker does before it imports the
  submission; the sampler calls the captured objects, so a submission that later replaces
  ``torch.cuda.Event`` or ``time.perf_counter_ns`` does not change what is measured, and its watch-list
  reports that it tried;
- whole namespaces the worker relies on to measure and to reply (the worker's own modules, the task
  module that generates the inputs, the JSON, pickle, channel and pipe code that carries messages and
  the host copies of its outputs,
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
import types
from typing import Any

import torch

from harness.worker.captured import synchronize, tampered_names, thread_count

__all__ = ["changed", "snapshot", "synchronize", "tampered", "tampered_names", "thread_count"]


Namespaces = dict[str, dict[str, Any]]
Snapshot = dict[tuple[str, str], tuple[Any, "tuple[Any, ...] | None"]]

# Spaces where a NEW attribute is tampering too: it shadows an inherited one.
_SHADOWABLE = frozenset(
    {
        "Worker",
        "Sampler",
        "L2Flusher",
        "LaunchGate",
        "PersistingL2",
        "OutputStaging",
        "Connection",
        "JSONEncoder",
        "torch.Tensor",
        "worker.sampler",
        "worker.conn",
        "worker.sampler.gate",
        "worker.sampler.persisting",
    }
)
_SAMPLER_FIELDS = ("start", "end", "flush", "gate", "_stamp", "_stamps", "persisting")


def _static_attrs(cls: type) -> dict[str, Any]:
    """Every attribute of ``cls`` as its MRO resolves it, without calling descriptors (stable ids)."""
    out: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        out.update(vars(klass))
    return out


def _code_parts(value: object) -> tuple[Any, ...] | None:
    if isinstance(value, types.FunctionType):
        return (value.__code__, value.__defaults__, value.__kwdefaults__)
    return None


def _same(a: tuple[Any, ...] | None, b: tuple[Any, ...] | None) -> bool:
    if a is None or b is None:
        return a is b
    return all(x is y for x, y in zip(a, b))


def _is_code(value: object) -> bool:
    """Module-level entries worth watching: code and types, not state variables that change by design."""
    return callable(value) or isinstance(value, types.ModuleType)


def _module_spaces(worker: Any) -> Namespaces:
    """The code-level entries of the modules the worker measures and replies with."""
    from harness import channel, protocol, requests, shared_outputs
    from harness.worker import captured, gate, kernel_only, persisting_l2, sampler, staging

    modules = {
        "harness.worker.main": sys.modules[type(worker).__module__],
        "harness.worker.sampler": sampler,
        "harness.worker.kernel_only": kernel_only,
        "harness.worker.originals": sys.modules[__name__],
        "harness.worker.captured": captured,
        "harness.protocol": protocol,
        "harness.channel": channel,
        "harness.worker.staging": staging,
        "harness.shared_outputs": shared_outputs,
        "harness.requests": requests,
        "harness.worker.gate": gate,
        "harness.worker.persisting_l2": persisting_l2,
        "json": json,
        "json.encoder": json.encoder,
        "pickle": pickle,
        "multiprocessing.connection": multiprocessing.connection,
    }
    if getattr(worker, "task_module", None) is not None:
        modules["task"] = worker.task_module  # its generate_input makes the inputs in the worker
    return {name: {k: v for k, v in vars(m).items() if _is_code(v)} for name, m in modules.items()}


def _class_spaces(worker: Any) -> Namespaces:
    """Every attribute of the classes the worker measures and replies with."""
    from harness.shared_outputs import SharedOutputs
    from harness.worker import gate, persisting_l2, sampler, staging

    return {
        "Worker": _static_attrs(type(worker)),
        "Sampler": _static_attrs(sampler.Sampler),
        "L2Flusher": _static_attrs(sampler.L2Flusher),
        "LaunchGate": _static_attrs(gate.LaunchGate),
        "PersistingL2": _static_attrs(persisting_l2.PersistingL2),
        "OutputStaging": _static_attrs(staging.OutputStaging),
        "SharedOutputs": _static_attrs(SharedOutputs),
        "Connection": _static_attrs(type(worker.conn)),
        "JSONEncoder": _static_attrs(json.JSONEncoder),
        "torch.Tensor": _static_attrs(torch.Tensor),
    }


def _instance_spaces(worker: Any) -> Namespaces:
    """The worker's own objects: its pipe, its sampler and the sampler's gate and L2 reset."""
    gate_obj = getattr(worker.sampler, "gate", None)
    persisting = getattr(worker.sampler, "persisting", None)
    return {
        "worker": {k: getattr(worker, k, None) for k in ("conn", "sampler", "cfg", "staging")},
        "worker.sampler": {k: v for k, v in vars(worker.sampler).items() if k in _SAMPLER_FIELDS},
        # the persisting-L2 reset's driver functions (only the largest raised limit moves)
        "worker.sampler.persisting": {k: v for k, v in vars(persisting).items() if k != "raised_bytes"}
        if persisting is not None
        else {},
        "worker.conn": dict(vars(worker.conn)),
        # the launch gate's settings (its cap bounds the host time hidden); only the sequence moves
        "worker.sampler.gate": {k: v for k, v in vars(gate_obj).items() if k != "_seq"} if gate_obj else {},
        "types": {"worker": type(worker), "worker.sampler": type(worker.sampler), "worker.conn": type(worker.conn)},
    }


def _namespaces(worker: Any) -> Namespaces:
    return {**_module_spaces(worker), **_class_spaces(worker), **_instance_spaces(worker)}


def _entries(worker: Any) -> dict[tuple[str, str], Any]:
    """Every watched entry by (space, name), leaving out dunders other than the ones that run code."""
    return {
        (space, name): value
        for space, entries in _namespaces(worker).items()
        for name, value in entries.items()
        if not name.startswith("__") or name in ("__class__", "__init__", "__call__")
    }


def snapshot(worker: Any) -> Snapshot:
    """Taken in the worker before the submission is imported."""
    return {key: (value, _code_parts(value)) for key, value in _entries(worker).items()}


def changed(snap: Snapshot, worker: Any) -> list[str]:
    """Names (``space.attr``) whose object, code or defaults differ from ``snap``, or that are new."""
    now = _entries(worker)
    out = []
    for key, (value, code) in snap.items():
        current = now.get(key, _MISSING)
        if current is not value or not _same(_code_parts(current), code):
            out.append(".".join(key))
    out.extend(".".join(key) for key in now.keys() - snap.keys() if key[0] in _SHADOWABLE)
    return sorted(out)


_MISSING = object()


def tampered(snap: Snapshot, worker: Any) -> list[str]:
    """Everything the submission replaced: watched originals and changed namespace entries."""
    return tampered_names() + changed(snap, worker)
