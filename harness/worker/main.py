"""The worker: the only process that imports the submission.

It generates each input itself, with the task's own generator, from a seed the parent sends right
before the input is needed (the parent generates the same input for checking; no tensor crosses
from the parent, which for nvfp4_gemm's 50 inputs of 77 MB per sample took seconds), calls
``custom_kernel``, times the calls with the task's protocol (``harness.worker.sampler``) and sends outputs
and samples back as plain bytes (``harness.protocol``).
It never sees a reference output or the secret seed (only the per-input seeds derived from it, which
give away no more than the inputs themselves).
"""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import multiprocessing.reduction
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from typing import Any, TypeVar

import torch

from harness import protocol
from harness.protocol import ProtocolError
from harness.requests import (
    HELD_STEP,
    Call,
    Exit,
    Generate,
    Load,
    MeasureKernelOnly,
    Proceed,
    Profile,
    Request,
    ShareOutputs,
    Time,
    Warmup,
    decode_request,
)
from harness.shared_outputs import SharedOutputs
from harness.worker import imports, kernel_only, originals, sandbox
from harness.worker.config import WorkerConfig
from harness.worker.gate import load_ahead
from harness.worker.sampler import Sampler
from harness.worker.staging import OutputStaging, Staged
from tasks.registry import load_task_module

T = TypeVar("T")

MAX_TRACEBACK_CHARS = 6000
Reply = dict[str, Any]
Kernel = Callable[[Any], Any]
Snapshot = tuple[dict[str, Any], "Staged | None"]  # an output's description and its host copy (tensors only)


def _describe_exception(exc: BaseException, shown: dict[str, str] | None = None) -> str:
    """One sentence a competitor can act on; ``shown`` maps the submission copy's path to the user's name."""
    text = _rename(_describe(exc, shown or {}), shown or {})
    return text


def _rename(text: str, shown: dict[str, str]) -> str:
    for path, name in shown.items():
        text = text.replace(path, name)
    return text


def _describe(exc: BaseException, shown: dict[str, str]) -> str:
    name = type(exc).__name__
    if isinstance(exc, imports.HiddenModuleError):  # a ranked run's fence: the message says what is available
        return str(exc)
    if isinstance(exc, ModuleNotFoundError):
        return f"the submission needs the Python module {exc.name!r}, which is not installed here"
    if isinstance(exc, SyntaxError):
        where = shown.get(exc.filename, exc.filename) if exc.filename else "the submission"
        return f"syntax error in {where} line {exc.lineno}: {exc.msg}"
    if isinstance(exc, torch.OutOfMemoryError):
        return f"ran out of device memory: {exc}".split("\n")[0]
    if "CompilationError" in name or "CompileError" in name:
        return f"a kernel failed to compile ({name}): {str(exc).strip()[:800]}"
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        return (
            "the submission wrote more than the allowed output to stdout/stderr or files (output flood); "
            "remove the prints"
        )
    if isinstance(exc, SystemExit):
        return f"the submission called sys.exit({exc.code!r})"
    return f"{name}: {str(exc).strip()[:1500]}"


def _chain(
    te: traceback.TracebackException | None, seen: set[int] | None = None
) -> Iterator[traceback.TracebackException]:
    """A TracebackException and the ones it was raised from or during, each once."""
    seen = set() if seen is None else seen
    if te is None or id(te) in seen:
        return
    seen.add(id(te))
    yield te
    yield from _chain(te.__cause__, seen)
    yield from _chain(te.__context__, seen)


def format_submission_traceback(exc: BaseException, shown: dict[str, str], own_only: bool) -> str:
    """The traceback with the submission copy's path replaced by the user's file name; ``own_only``
    keeps only the submission's own frames (the harness's and the libraries' are left out)."""
    te = traceback.TracebackException.from_exception(exc)  # source lines are read here, from the copy
    for part in _chain(te):
        if own_only:
            part.stack = traceback.StackSummary.from_list([f for f in part.stack if f.filename in shown])
        for frame in part.stack:
            frame.filename = shown.get(frame.filename, frame.filename)
        filename = getattr(part, "filename", None)
        if filename in shown:  # a SyntaxError's own file
            part.filename = shown[filename]
    return _rename("".join(te.format()), shown)


def _error_reply(exc: BaseException, shown: dict[str, str] | None = None) -> Reply:
    shown = shown or {}
    full = format_submission_traceback(exc, shown, own_only=False)
    own = format_submission_traceback(exc, shown, own_only=True) if shown else full
    return {
        "ok": False,
        "error": _describe_exception(exc, shown),
        "error_type": type(exc).__name__,
        "traceback": own[-MAX_TRACEBACK_CHARS:],
        "traceback_full": full[-MAX_TRACEBACK_CHARS:],
    }


class Worker:
    def __init__(self, cfg: WorkerConfig, conn: Connection, startup_s: dict[str, float] | None = None):
        """``startup_s``: seconds per start-up step, this constructor's steps added (the ready message)."""
        self.cfg = cfg
        self.conn = conn
        self.device = torch.device(cfg.device)
        self.startup_s = startup_s if startup_s is not None else {}
        step = time.perf_counter()

        def took(name: str) -> None:
            nonlocal step
            now = time.perf_counter()
            self.startup_s[name] = now - step
            step = now

        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
            torch.empty(1, device=self.device)  # the CUDA context, created here rather than in the sampler
        took("cuda_context")
        _load_own_kernels_ahead(cfg, self.device)
        took("own_kernels")
        if cfg.hold:
            _wait_to_proceed(conn)
            took(HELD_STEP)  # not a cost: the parent names the steps before it as done ahead
        with _own_kernels_cache(cfg):  # the gate's and the clock's kernels compile here, not in the submission's
            self.sampler = Sampler(self.device, cfg.l2_bytes, cfg.hide_bytes)
        took("sampler")
        self.gap_ns = self.sampler.calibrate() if self.device.type == "cuda" else 0.0
        took("calibrate")
        self.kernels_cache = sandbox.seal(cfg)  # before any submission code: its cache becomes read-only
        self.kernel: Kernel | None = None
        self.task_module: Any = None
        self.task_error = "the worker was given no task to generate inputs with"
        if cfg.task_file:
            try:  # before the submission is imported, so its code is in the integrity snapshot
                self.task_module = load_task_module(cfg.task_file)
            except Exception as exc:
                self.task_error = (
                    f"the worker could not load the task's generator {cfg.task_file} "
                    f"({_describe_exception(exc)}); it must be readable by the worker's user"
                )
        self.slots: list[tuple[Any, ...]] = []  # input tuples generated on request (Generate), named by index
        self.staging = OutputStaging(self.device)  # the host copies of a reply's outputs
        took("task")
        self._baseline = originals.snapshot(self)  # before the submission is imported

    def _shown_names(self) -> dict[str, str]:
        """The submission copy's path -> the name the user knows it by."""
        if not self.cfg.submission_name:
            return {}
        return {
            self.cfg.submission_path: self.cfg.submission_name,
            os.path.abspath(self.cfg.submission_path): self.cfg.submission_name,
        }

    # -- replies -------------------------------------------------------------------------------------
    def _integrity(self) -> Reply:
        tampered = originals.tampered(self._baseline, self)
        return {
            "tampered": tampered,
            "threads": originals.thread_count(),
            "l2_persisting": self.sampler.persisting.report(),
        }

    def _send_outputs(self, header: Reply, snapshots: list[Snapshot]) -> None:
        """``snapshots``: (meta, bytes or None) pairs from :meth:`_snapshot`, sent before the next
        reply's :meth:`OutputStaging.begin` reuses their memory."""
        header["outputs"] = [meta for meta, _ in snapshots]
        header.update(self._integrity())
        protocol.send(self.conn, header, [raw for _, raw in snapshots if raw is not None])

    def _snapshot(self, out: object) -> Snapshot:
        """``out``'s description and, for a tensor, its bytes copied to the host now."""
        meta = protocol.describe_output(out)
        if meta["kind"] == "tensor" and isinstance(out, torch.Tensor):  # describe_output: exactly a Tensor
            return meta, self.staging.copy(out)
        return meta, None

    # -- operations ----------------------------------------------------------------------------------
    def load(self, request: Load) -> Reply:
        # the submission's path: its own folder, the compat modules (task, utils, reference), the Python
        # install; not the harness's folder (its modules the worker needs are already imported)
        root = os.path.realpath(sandbox.harness_root())
        sys.path[:] = [os.path.dirname(os.path.abspath(self.cfg.submission_path)), self.cfg.compat_dir] + [
            p for p in sys.path if p not in ("", ".") and os.path.realpath(p) != root
        ]
        spec = importlib.util.spec_from_file_location("submission", self.cfg.submission_path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {self.cfg.submission_path} as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules["submission"] = module
        with imports.fenced(self.cfg, root):  # ranked: the harness's own packages are not the competition's
            spec.loader.exec_module(module)
        kernel = getattr(module, "custom_kernel", None)
        if not callable(kernel):
            return {
                "ok": False,
                "error": "the submission defines no callable custom_kernel(data); "
                "add `def custom_kernel(data): ...` at module level",
                "error_type": "MissingEntryPoint",
            }
        self.kernel = kernel
        return {
            "ok": True,
            "timing_method": self.sampler.method,
            "gated": self.sampler.gate is not None,
            **self._integrity(),
        }

    def _input(self, slot: int) -> tuple[Any, ...]:
        return self.slots[slot]

    def _kernel(self) -> Kernel:
        if self.kernel is None:
            raise RuntimeError("the submission is not loaded yet (the parent sends Load first)")
        return self.kernel

    def generate(self, request: Generate) -> Reply:
        """Generates the inputs of ``specs`` (a case with its seed each) on our device and keeps them as
        the slots later messages name; the first ``keep`` slots already here stay. Replies with each
        input's fingerprint, which the parent compares with its own copy's."""
        if self.task_module is None:
            return {"ok": False, "error": self.task_error, "error_type": "TaskNotLoaded"}
        made = [tuple(self.task_module.generate_input(**spec, device=self.device)) for spec in request.specs]
        self.slots = self.slots[: request.keep] + made
        originals.synchronize(self.device)
        return {"ok": True, "fingerprints": protocol.input_fingerprints(made), **self._integrity()}

    def share_outputs(self, request: ShareOutputs) -> Reply:
        """Maps the region whose descriptor follows the request; later replies place their outputs
        there (``harness.worker.staging``)."""
        fd = multiprocessing.reduction.recv_handle(self.conn)
        if self.staging.shared is not None:
            self.staging.shared.close()
        region = SharedOutputs.attach(fd, request.nbytes, self.device)
        used = region.worth_using(self.device)  # not on a GPU that could not page-lock it: the channel's buffers
        if not used:
            region.close()
        self.staging.shared = region if used else None
        return {"ok": True, "used": used, "pinned": region.pinned, **self._integrity()}

    def call(self, request: Call) -> None:
        out = self._kernel()(self._input(request.data))
        originals.synchronize(self.device)
        self.staging.begin()
        self._send_outputs({"ok": True}, [self._snapshot(out)])

    def warmup(self, request: Warmup) -> Reply:
        """Calls until ``min_calls`` calls and ``min_ms`` milliseconds have passed (clocks up, caches
        filled). Real time, not the calls' own: each call carries the sampler's flush and launch gate,
        and counting only the calls' time once made a 20 ms warm-up last about 170 ms (nvfp4_gemm)."""
        data, kernel, calls, start = self._input(request.data), self._kernel(), 0, time.perf_counter_ns()
        while calls < request.min_calls or time.perf_counter_ns() - start < request.min_ms * 1e6:
            self.sampler.per_call(kernel, data)
            calls += 1
            if calls >= request.max_calls:
                break
        return {"ok": True, "calls": calls, "ms": (time.perf_counter_ns() - start) / 1e6, **self._integrity()}

    def time(self, request: Time) -> None:
        """``inputs``: a list of input tuples. per_call: one sample per input (an input may repeat).
        batched: one sample over all of them. Outputs at the ``return`` indices come back; each is
        copied to the host right after its own sample, so a buffer the next call reuses cannot change it.
        The reply's ``steps_s`` says where the request's time went (:data:`harness.protocol.TIMING_STEPS`)."""
        inputs, returned = [self._input(i) for i in request.inputs], set(request.returned)
        kernel, touch = self._kernel(), request.touch
        steps = dict.fromkeys(protocol.TIMING_STEPS, 0.0)

        def step(name: str, fn: Callable[..., T], *args: Any) -> T:
            t0 = time.perf_counter()
            try:
                return fn(*args)
            finally:
                steps[name] += time.perf_counter() - t0

        self.staging.begin()
        step("heat", self.sampler.heat, request.heat_ms)
        series: dict[str, list[Any]] = {k: [] for k in protocol.TIMING_SERIES}
        snapshots: list[Snapshot] = []

        def record(ns: float, tail: float) -> None:
            s = self.sampler
            values = (ns, tail, s.window_ns, s.window_held, s.unhidden_host_ns, s.idle_sync_ns, s.device_tail_ns)
            for k, v in zip(protocol.TIMING_SERIES, values, strict=True):
                series[k].append(v)

        if request.protocol == "batched":
            if touch:
                step("touch", self.sampler.touch, [t for data in inputs for t in data])
            ns, tail, outs = step("calls", self.sampler.batched, kernel, inputs)
            record(ns, tail)
            snapshots = step("outputs", lambda: [self._snapshot(o) for i, o in enumerate(outs) if i in returned])
        else:
            for i, data in enumerate(inputs):
                if touch:  # right before its own sample, as the ranked original generates each input
                    step("touch", self.sampler.touch, data)
                ns, tail, out = step("calls", self.sampler.per_call, kernel, data)
                record(ns, tail)
                if i in returned:
                    snapshots.append(step("outputs", self._snapshot, out))
        header = {"ok": True, **series, "gate_misses": self.sampler.gate_misses, "steps_s": steps}
        self._send_outputs(header, snapshots)

    def profile(self, request: Profile) -> Reply:
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.device.type == "cuda" else [])
        data, kernel = self._input(request.data), self._kernel()
        kernel(data)
        originals.synchronize(self.device)
        with profile(activities=activities) as prof:
            for _ in range(request.calls):
                kernel(data)
            originals.synchronize(self.device)
        sort = "self_cuda_time_total" if self.device.type == "cuda" else "self_cpu_time_total"
        try:
            table = prof.key_averages().table(sort_by=sort, row_limit=15)
        except Exception:
            table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15)
        return {"ok": True, "table": table, **self._integrity()}

    def kernel_only(self, request: MeasureKernelOnly) -> Reply:
        """Device time of the submission's own kernels on a cold L2, without host launch overhead: CUDA
        graphs replayed behind the launch gate (``kernel_only.graph_kernel_time``); with ``profiler`` also
        the profiler's kernel sum from the same graphs. The profiler's kernel sum of eager calls
        (``kernel_only.profiler_kernel_time``) stands in when the capture failed. ``poisoned``: the CUDA
        context broke, the worker must be replaced."""
        inputs, kernel = [self._input(i) for i in request.inputs], self._kernel()
        graph = kernel_only.graph_kernel_time(
            kernel,
            inputs,
            self.device,
            self.sampler.flush,
            n=request.n,
            replays=request.replays,
            gate=self.sampler.gate,
            profile=request.profiler,
        )
        reply: Reply = {"ok": True, "graph": graph, "poisoned": bool(graph.get("poisoned"))}
        if "profiler" in graph:
            reply["profiler"] = graph.pop("profiler")
        elif not reply["poisoned"] and graph.get("ns") is None:
            reply["profiler"] = kernel_only.profiler_kernel_time(
                kernel, inputs, self.device, self.sampler.flush, calls=request.calls
            )
            if self.device.type == "cuda" and reply["profiler"].get("ns") is None:
                reply["poisoned"] = not kernel_only.cuda_usable(self.device)
        reply.update(self._integrity())
        return reply

    def _handler(self, request: Request) -> Callable[[Any], Reply | None]:
        handlers: dict[type[Request], Callable[[Any], Reply | None]] = {
            Load: self.load,
            Generate: self.generate,
            Call: self.call,
            Warmup: self.warmup,
            Time: self.time,
            Profile: self.profile,
            MeasureKernelOnly: self.kernel_only,
            ShareOutputs: self.share_outputs,
        }
        return handlers[type(request)]

    def handle(self, msg: dict[str, Any]) -> bool:
        """Decodes ``msg`` (:func:`harness.requests.decode_request`) and answers it; False on :class:`Exit`."""
        try:
            request = decode_request(msg)
        except ProtocolError as exc:  # the parent's bug, never the submission's: say so, keep serving
            error = {"ok": False, "error": f"the harness sent a bad request: {exc}", "error_type": "BadRequest"}
            protocol.send(self.conn, {**error, **self._integrity()})
            return True
        if isinstance(request, Exit):
            return False
        reply: Reply | None
        try:
            reply = self._handler(request)(request)
        except BaseException as exc:
            reply = _error_reply(exc, self._shown_names())
            reply.update(self._integrity())
        if reply is not None:
            protocol.send(self.conn, reply)
        return True


def _wait_to_proceed(conn: Connection) -> None:
    """A held worker (``WorkerConfig.hold``) waits here, its CUDA context made and nothing launched on the
    GPU, while the worker it replaces still works or is being reaped; it goes on at the parent's
    :class:`Proceed` and ends quietly at anything else (an Exit, a closed channel)."""
    try:
        request = decode_request(protocol.receive_from_parent(conn))
    except (EOFError, OSError, ProtocolError):
        os._exit(0)
    if not isinstance(request, Proceed):
        os._exit(0)


def _load_own_kernels_ahead(cfg: WorkerConfig, device: torch.device) -> None:
    """Where the sampler builds a launch gate, its kernels (the gate and the timestamps) are loaded before
    a held worker waits, launching nothing, so the sampler's first launches after the wait find them
    loaded. A failure here is left to the sampler: it meets it again at its first launch and reports it."""
    if cfg.hide_bytes <= 0:  # no gate (Sampler): nothing to load
        return
    try:
        with _own_kernels_cache(cfg):
            load_ahead(device)
    except Exception:
        pass


@contextlib.contextmanager
def _own_kernels_cache(cfg: WorkerConfig) -> Iterator[None]:
    """Triton's cache is the harness's own kernels' entry inside the block, the submission's after it (only
    in a confined worker, which can seal it afterwards: else they compile where the submission's do)."""
    if not cfg.harness_kernels_dir or not sandbox.confined():
        yield
        return
    submissions = os.environ.get("TRITON_CACHE_DIR")
    os.environ["TRITON_CACHE_DIR"] = cfg.harness_kernels_dir
    try:
        yield
    finally:
        if submissions is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = submissions


def worker_main(
    conn: Connection, cfg: WorkerConfig, confinement: dict[str, Any], startup_s: dict[str, float] | None = None
) -> None:
    """Runs after :func:`harness.worker.entry.start` has confined the process (``confinement``: its report;
    ``startup_s``: the seconds its steps took)."""
    worker = Worker(cfg, conn, startup_s)
    # the calibration goes out before the submission is imported: the parent keeps these figures, so
    # a submission that changes them in the worker changes nothing
    protocol.send(
        conn,
        {
            "ok": True,
            "ready": True,
            "pid": os.getpid(),
            "gap_ns": worker.gap_ns,
            "window_gap_ns": dict(worker.sampler.window_gap_ns),
            "sandbox": {**confinement, "harness_kernels_cache": worker.kernels_cache},
            "startup_s": worker.startup_s,
        },
    )
    while True:
        try:
            msg = protocol.receive_from_parent(conn)
        except EOFError:
            break
        if not worker.handle(msg):
            break
    conn.close()
    os._exit(0)  # skip interpreter teardown: the submission may have left state that hangs at exit
