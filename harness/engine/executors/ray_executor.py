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
report says the GPU could not be used or the harness failed, is submitted again after a backoff, at
most ``retries`` times, with the reason recorded; then it is failed (infrastructure), with no verdict.
A submission's failure is a verdict and never retried. When the cluster itself is gone (its GCS does
not answer, or no node is alive) the run ends at once with :class:`EngineLost` (exit 75) and the jobs
in flight go back to the queue.

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
from collections.abc import Iterator
from typing import Any

from harness.engine.executors.job import (
    JobReport,
    JobSink,
    JobSource,
    JobSpec,
    JobStart,
    job_start,
    retry_delay_s,
    run_job,
)
from harness.engine.options import RunOptions
from harness.errors import HarnessError, UsageError

TICK_S = 0.5
GCS_PROBE_S = 2.0  # how often the driver checks that the cluster's GCS still answers
GCS_MISSES = 2  # probes in a row without an answer: the cluster is gone (Ray itself waits 60 s, then exits)
LOCAL_IP = "127.0.0.1"
PROBE_TIMEOUT_S = 5.0
# ray.init replaces a loopback node address (_node_ip_address='127.0.0.1') by this machine's outward
# address unless this, read once when ray is imported, is off: then a local cluster's GCS, raylet and
# workers all listen on 127.0.0.1
RAY_LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


EXIT_ENGINE_LOST = 75  # EX_TEMPFAIL: rerun when the cluster is back


class EngineLost(HarnessError):
    """The Ray cluster (its GCS, or every node) went away in the middle of a run."""

    exit_code = EXIT_ENGINE_LOST


def _gcs_answers(ray: Any, timeout: float = PROBE_TIMEOUT_S) -> bool:
    try:
        address = ray.get_runtime_context().gcs_address
    except Exception:
        return False
    host, _, port = str(address).rpartition(":")
    try:
        socket.create_connection((host or LOCAL_IP, int(port)), timeout=timeout).close()
    except (OSError, ValueError):
        return False
    return True


def engine_alive(ray: Any) -> bool:
    """The cluster still runs: its GCS answers and at least one node is alive."""
    if not _gcs_answers(ray):
        return False
    try:
        return any(node.get("Alive") for node in ray.nodes())
    except Exception:
        return False


def _on_loopback(address: str) -> bool:
    """A cluster on this machine's loopback (its driver must see this node as 127.0.0.1 too)."""
    host = address.split("://", 1)[-1].rpartition(":")[0].strip("[]")
    return host in ("127.0.0.1", "localhost", "::1")


def _import_ray(local: bool) -> Any:
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


def _ray_initialized() -> bool:
    ray = sys.modules.get("ray")
    return bool(ray is not None and ray.is_initialized())


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


def _job_task(spec: JobSpec, options: RunOptions) -> Iterator[JobStart | JobReport]:
    import ray

    start = job_start(spec)
    yield start
    if ray.get_gpu_ids() and options.device in (None, "auto", "cuda"):
        # the one GPU Ray assigned is the only one visible: cuda:0. If torch cannot use it, the run
        # is refused (DeviceError) and retried elsewhere, never silently moved to the CPU.
        options = dataclasses.replace(options, device="cuda:0")
    yield run_job(spec, options, start, on_usage_error="retry")


def _job_task_once(spec: JobSpec, options: RunOptions) -> JobStart | JobReport:
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
        token: str | None = None,
    ):
        if address and not _ray_initialized():
            from harness.engine.executors.ray_auth import apply_token

            apply_token(token)  # read by Ray when it is imported and when it connects
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

    def _connect(self, address: str | None, jobs: int | None, temp_dir: str | None) -> None:
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
                "--address to start a local cluster; a cluster started with RAY_AUTH_MODE=token needs "
                "its token in $HARNESS_RAY_TOKEN or --ray-token-file FILE"
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

    def run(self, source: JobSource, options: RunOptions, sink: JobSink) -> None:
        """Runs every job ``source`` hands out, ``slots`` at a time. Any exception (a signal's, the
        engine lost) cancels the tasks still in flight before it goes on."""
        self._pending: deque = deque()  # (spec, attempt, not_before): retries waiting for their backoff
        self._inflight: dict = {}  # generator (or ref) -> [spec, attempt, started]
        self._next_probe, self._misses = time.monotonic() + GCS_PROBE_S, 0
        try:
            while self._fill(source, options, sink) or self._inflight or self._pending or not source.exhausted():
                self._watch_gcs()
                if self._inflight:
                    for key in self._wait():
                        self._collect(key, sink)
                else:
                    time.sleep(TICK_S)
                sink.tick()
        except BaseException:
            self._cancel_inflight()
            raise

    def _watch_gcs(self) -> None:
        """Every GCS_PROBE_S: a GCS that misses GCS_MISSES probes in a row ends the run (EngineLost)."""
        if time.monotonic() < self._next_probe:
            return
        self._next_probe = time.monotonic() + GCS_PROBE_S
        self._misses = 0 if _gcs_answers(self.ray, timeout=1.0) else self._misses + 1
        if self._misses >= GCS_MISSES:
            raise EngineLost(
                "the Ray cluster's GCS does not answer any more: the cluster is gone; its jobs go back to the "
                "queue: start the cluster again (or drop --address for a local one) and rerun the same command"
            )

    def _wait(self) -> list:
        try:
            ready, _ = self.ray.wait(list(self._inflight), num_returns=1, timeout=TICK_S)
        except Exception as exc:  # Ray's own machinery failed, not a task
            reason = f"Ray: {_error_reason(exc)}"
            self._check_engine(reason)
            raise EngineLost(f"Ray failed ({reason}); its jobs go back to the queue: rerun to resume") from exc
        return list(ready)

    def _fill(self, source: JobSource, options: RunOptions, sink: JobSink) -> bool:
        """Starts jobs while a slot is free: a retry whose backoff is over first, else a new claim.
        True when it started one."""
        started = False
        while len(self._inflight) < self.slots:
            if self._pending and self._pending[0][2] <= time.monotonic():
                spec, attempt, _ = self._pending.popleft()
            else:
                claimed = source.next()
                if claimed is None:
                    break
                spec, attempt = claimed, 0
            self._submit(spec, attempt, options, sink)
            started = True
        return started

    def _submit(self, spec: JobSpec, attempt: int, options: RunOptions, sink: JobSink) -> None:
        spec.submitted_at = time.time()
        if self.streaming:
            self._inflight[self._remote.remote(spec, options)] = [spec, attempt, False]
        else:  # Ray Client: no streaming; where it runs comes with its report
            self._inflight[self._remote_once.remote(spec, options)] = [spec, attempt, True]
            sink.started(spec, JobStart(spec.job_id, "(reported at the end)", None, spec.submitted_at, 0))

    def _collect(self, key: Any, sink: JobSink) -> None:
        ray = self.ray
        spec, attempt, started = self._inflight[key]
        try:
            item = ray.get(next(key) if self.streaming else key)
        except StopIteration:
            del self._inflight[key]
            return
        except Exception as exc:
            del self._inflight[key]
            reason = f"Ray: {_error_reason(exc)}"
            self._check_engine(reason)
            self._retry_or_fail(sink, spec, attempt, reason)
            return
        if not started:
            self._inflight[key][2] = True
            sink.started(spec, item)
            return
        del self._inflight[key]
        if not self.streaming:
            sink.placed(spec, item.start)
        if item.result is not None:
            sink.finished(spec, item.result)
        else:
            self._retry_or_fail(sink, spec, attempt, item.retry_reason)

    def _retry_or_fail(self, sink: JobSink, spec: JobSpec, attempt: int, reason: str | None) -> None:
        reason = reason or "no result and no reason (a bug in the harness)"
        if attempt < self.retries:
            sink.retrying(spec, reason)
            self._pending.append((spec, attempt + 1, time.monotonic() + retry_delay_s(attempt)))
        else:
            sink.failed(spec, reason)

    def _check_engine(self, reason: str) -> None:
        """A task failed in Ray: when the cluster itself is gone (its GCS does not answer, or no node is
        alive), the run ends now with EngineLost instead of spending every job's retries."""
        if engine_alive(self.ray):
            return
        raise EngineLost(
            f"the Ray cluster is gone ({reason}); its jobs go back to the queue: start the cluster again "
            "(or drop --address for a local one) and rerun the same command to resume"
        )

    def _cancel_inflight(self) -> None:
        for key in list(getattr(self, "_inflight", {})):
            try:
                self.ray.cancel(key, force=True)
            except Exception:  # best effort: the cluster may be gone
                pass
        self._inflight = {}

    def close(self) -> None:
        if self.started_cluster and self.ray.is_initialized():
            self.ray.shutdown()
            self.started_cluster = False
