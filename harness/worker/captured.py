"""Inside the worker: the clocks, events and synchronize that the harness captures when this module is
imported, which the worker does before it imports the submission.

The sampler and the kernel-only figures call these captured objects, so a submission that later replaces
``torch.cuda.Event`` or ``time.perf_counter_ns`` does not change what is measured. :data:`WATCHED` names
the public objects a submission must leave alone; :func:`tampered_names` reports which it replaced, and
:mod:`harness.worker.originals` also snapshots this module's own entries. This module imports no other
worker module, so every worker module may import it.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import torch

_perf_counter_ns = time.perf_counter_ns
_empty = torch.empty
_foreach_norm: Any = getattr(torch, "_foreach_norm", None)
_thread_count = threading.active_count
# CUDA's objects, captured whether or not this machine has CUDA (nothing calls them without it): asking
# torch whether it has (torch.cuda.is_available()) would initialize CUDA's runtime here, and the worker
# pool's server imports this module before it forks workers, which then could not use CUDA.
_Event: Any = torch.cuda.Event
_event_record: Any = torch.cuda.Event.record
_event_elapsed: Any = torch.cuda.Event.elapsed_time
_event_query: Any = torch.cuda.Event.query
_c_sync: Any = getattr(torch._C, "_cuda_synchronize", None)  # absent from a CPU-only build of torch
_Stream: Any = torch.cuda.Stream
_CUDAGraph: Any = torch.cuda.CUDAGraph
_graph_ctx: Any = torch.cuda.graph

# What a submission must leave alone; checked by identity after every call into it.
WATCHED: dict[str, tuple[object, str]] = {
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
_ORIGINALS = {name: getattr(owner, attr, None) for name, (owner, attr) in WATCHED.items()}


def tampered_names() -> list[str]:
    """Names of watched objects that are no longer the ones captured at import."""
    return [name for name, (owner, attr) in WATCHED.items() if getattr(owner, attr, None) is not _ORIGINALS[name]]


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        _c_sync()


def thread_count() -> int:
    return _thread_count()
