"""The Ray executor: each job is one Ray task asking for one GPU, anywhere in a Ray cluster.

Cluster: ``address=None`` starts a local one on this machine (every local GPU; on a machine without
GPUs, ``jobs`` CPU slots and the jobs run on the CPU); ``address='auto'`` or ``'ray://host:10001'``
joins one started with ``ray start --head``. A process that has already called ``ray.init`` (a test)
is used as it is.

Each task (``num_gpus=1``, ``accelerator_type`` from ``gpu_type``) is a streaming generator: it first
yields a :class:`~.job.JobStart` (node, the GPU ids Ray assigned, time), then the
:class:`~.job.JobReport`. Through Ray Client (``ray://``), which runs no streaming generators, it is
one plain task: the job shows as running from its submission, and its node and GPU arrive with it. Ray sets ``CUDA_VISIBLE_DEVICES`` / ``ROCR_VISIBLE_DEVICES`` for the task,
so the runner, started with device ``cuda`` (the first visible one), uses exactly the assigned GPU,
and its worker inherits the same mask.

Retries: Ray's own retries are off (``max_retries=0``); a task whose worker or node died, or whose
report says the GPU could not be used or the harness failed, is submitted again, at most
``retries`` times, with the reason recorded. A submission's failure is a verdict and never retried.

The secret travels inside the pickled RunOptions, a task argument (never ``runtime_env`` or an
environment variable), and the driver took it out of its own environment before Ray started.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import sys
import time
from collections import deque

from harness.engine.executors.job import JobSink, JobSpec, JobStart, job_start, run_job
from harness.engine.options import RunOptions
from harness.errors import UsageError

TICK_S = 0.5
LOCAL_IP = "127.0.0.1"
PROBE_TIMEOUT_S = 5.0
# ray.init replaces a loopback node address (_node_ip_address='127.0.0.1') by this machine's outward
# address unless this, read once when ray is imported, is off: then a local cluster's GCS, raylet and
# workers all listen on 127.0.0.1
RAY_LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def _on_loopback(address: str) -> bool:
    """A cluster on this machine's loopback (its driver must see this node as 127.0.0.1 too)."""
    host = address.split("://", 1)[-1].rpartition(":")[0].strip("[]")
    return host in ("127.0.0.1", "localhost", "::1")


def _import_ray(local: bool):
    """``ray``; for a cluster started here or joined on loopback, imported so that this node is 127.0.0.1
    (a process that imported ray before keeps what it had)."""
    if local and "ray" not in sys.modules:
        old = os.environ.get(RAY_LOOPBACK_ENV)
        os.environ[RAY_LOOPBACK_ENV] = "0"
        try:
            import ray
        finally:
            if old is None:
                os.environ.pop(RAY_LOOPBACK_ENV, None)
            else:
                os.environ[RAY_LOOPBACK_ENV] = old
        return ray
    import ray

    return ray


def _check_reachable(address: str) -> None:
    """A ``host:port`` or ``ray://host:port`` that does not answer is a usage error now (ray.init
    would wait for it for minutes). ``auto`` is left to Ray, which says at once when there is none."""
    if address == "auto":
        return
    target = address.split("://", 1)[-1]
    host, _, port = target.rpartition(":")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=PROBE_TIMEOUT_S).close()
    except (OSError, ValueError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
        raise UsageError(
            f"no Ray cluster answers at {address} ({detail}); give the head node's address "
            "(HOST:6379, ray://HOST:10001, or 'auto' on a cluster node), or drop --address to "
            "start a local cluster"
        ) from exc


def _job_task(spec: JobSpec, options: RunOptions):
    import ray

    start = job_start(spec)
    yield start
    if ray.get_gpu_ids() and options.device in (None, "auto", "cuda"):
        # the one GPU Ray assigned is the only one visible: cuda:0. If torch cannot use it, the run
        # is refused (DeviceError) and retried elsewhere, never silently moved to the CPU.
        options = dataclasses.replace(options, device="cuda:0")
    yield run_job(spec, options, start, on_usage_error="retry")


def _job_task_once(spec: JobSpec, options: RunOptions):
    """The same job as one plain task (Ray Client runs no streaming generators)."""
    steps = _job_task(spec, options)
    next(steps)
    return next(steps)


def _error_reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}".rstrip(": ")


class RayExecutor:
    name = "ray"

    def __init__(
        self,
        *,
        address: str | None = None,
        jobs: int | None = None,
        gpu_type: str | None = None,
        retries: int = 2,
        gpus_per_job: int | None = None,
        temp_dir: str | None = None,
        streaming: bool | None = None,
    ):
        try:
            ray = _import_ray(local=address is None or _on_loopback(address))
        except ImportError as exc:
            raise UsageError("--executor ray needs Ray: pip install 'ray' (or the harness's 'cluster' extra)") from exc
        self.ray = ray
        self.retries = retries
        self.gpu_type = gpu_type
        self.started_cluster = False
        if not ray.is_initialized():
            self._connect(address, jobs, temp_dir)
        resources = ray.cluster_resources()
        self.gpus_per_job = (1 if resources.get("GPU", 0) > 0 else 0) if gpus_per_job is None else gpus_per_job
        self._check_resources(resources)
        capacity = int(resources.get("GPU", 0)) if self.gpus_per_job else int(resources.get("CPU", 1))
        self.slots = max(1, min(capacity, jobs) if jobs else capacity)
        resources = dict(
            num_gpus=self.gpus_per_job,
            num_cpus=0 if self.gpus_per_job else 1,
            max_retries=0,
            accelerator_type=gpu_type if self.gpus_per_job else None,
            name="harness-job",
        )
        self.streaming = not (address or "").startswith("ray://") if streaming is None else streaming
        self._remote = ray.remote(_job_task).options(**resources)
        self._remote_once = ray.remote(_job_task_once).options(**resources)

    def _connect(self, address, jobs, temp_dir) -> None:
        ray = self.ray
        kwargs = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
        try:
            if address:
                _check_reachable(address)
                ray.init(address=address, **kwargs)
            else:
                import torch

                gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
                ray.init(
                    num_gpus=gpus,
                    num_cpus=max(1, gpus or jobs or 1),
                    _temp_dir=temp_dir,
                    _node_ip_address=LOCAL_IP,
                    **kwargs,
                )  # a local cluster listens on loopback only
                self.started_cluster = True
        except (ConnectionError, ValueError, RuntimeError, TimeoutError) as exc:
            where = f"the Ray cluster at {address}" if address else "a local Ray cluster"
            raise UsageError(
                f"cannot connect to {where}: {_error_reason(exc)}; start one with "
                "'ray start --head' and pass --address auto (or ray://HOST:10001), or drop "
                "--address to start a local cluster"
            ) from exc

    def _check_resources(self, resources: dict) -> None:
        if not self.gpus_per_job:
            return
        if resources.get("GPU", 0) < self.gpus_per_job:
            self.close()
            raise UsageError(
                "the Ray cluster has no GPUs: start its nodes with GPUs (ray start ... --num-gpus N), "
                "or add --device cpu to run the jobs on CPUs"
            )
        if self.gpu_type and f"accelerator_type:{self.gpu_type}" not in resources:
            have = sorted(k.split(":", 1)[1] for k in resources if k.startswith("accelerator_type:"))
            self.close()
            raise UsageError(
                f"no GPU of type {self.gpu_type!r} in the Ray cluster (it has: "
                f"{', '.join(have) or 'none labelled'}); pick one of those with --gpu-type"
            )

    def run(self, specs: list[JobSpec], options: RunOptions, sink: JobSink) -> None:
        ray = self.ray
        pending = deque((spec, 0) for spec in specs)
        inflight: dict = {}  # generator (or ref) -> [spec, attempt, started]
        while pending or inflight:
            while pending and len(inflight) < self.slots:
                spec, attempt = pending.popleft()
                spec.submitted_at = time.time()
                if self.streaming:
                    inflight[self._remote.remote(spec, options)] = [spec, attempt, False]
                else:  # Ray Client: no streaming; where it runs comes with its report
                    inflight[self._remote_once.remote(spec, options)] = [spec, attempt, True]
                    sink.started(spec, JobStart(spec.job_id, "(reported at the end)", None, spec.submitted_at, 0))
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=TICK_S)
            for key in ready:
                spec, attempt, started = inflight[key]
                try:
                    item = ray.get(next(key) if self.streaming else key)
                except StopIteration:
                    del inflight[key]
                    continue
                except Exception as exc:
                    del inflight[key]
                    self._retry_or_fail(sink, pending, spec, attempt, f"Ray: {_error_reason(exc)}")
                    continue
                if not started:
                    inflight[key][2] = True
                    sink.started(spec, item)
                    continue
                del inflight[key]
                if not self.streaming:
                    sink.placed(spec, item.start)
                if item.result is not None:
                    sink.finished(spec, item.result)
                else:
                    self._retry_or_fail(sink, pending, spec, attempt, item.retry_reason)
            sink.tick()

    def _retry_or_fail(self, sink, pending, spec, attempt, reason) -> None:
        if attempt < self.retries:
            sink.retrying(spec, reason)
            pending.appendleft((spec, attempt + 1))
        else:
            sink.failed(spec, reason)

    def close(self) -> None:
        if self.started_cluster and self.ray.is_initialized():
            self.ray.shutdown()
            self.started_cluster = False
