"""Runs one submission on one task: the verdict-deciding side.

The parent (this module) generates every input, keeps a private copy, sends the worker a clone,
checks what comes back with the task's ``check_implementation``, and decides each verdict. It never
imports the submission. A bad submission never raises out of :func:`run_submission`; the returned
:class:`RunResult` carries its verdict.
"""
from __future__ import annotations

import ctypes
import datetime as dt
import math
import os
import shutil
import stat
import sys
import tempfile
import time
from contextlib import contextmanager

from pathlib import Path

import psutil
import torch

import harness
from harness.analysis import plausibility, sol
from harness import protocol
from harness.engine.clocks import ClockReader, clock_warnings
from harness.analysis.confidence import score_ci_us
from harness.engine.device import device_info, select_device
from harness.engine.options import RunOptions
from harness.errors import UsageError
from harness.protocol import ProtocolError, accepts_dtype, rebuild_tensor
from harness.analysis.ranking import RankRule, ShapeTime
from harness.analysis.ranking import score as rank_score
from harness.results import (ERROR, FAIL, NOT_RUN, PASS, REJECTED, CaseResult, RunResult, Stats, shape_label,
                             worst_verdict)
from harness.engine.seeds import derive_seed
from harness.engine.submission import submission_info
from harness.engine.supervisor import Supervisor, WorkerFailure
from harness.worker.main import WorkerConfig

from harness.engine.modes import MODES  # noqa: E402  (re-exported for the CLI)
NOBODY = 65534
WARMUP_INDEX = 1 << 40          # leaderboard warm-up inputs use seeds no timed input uses
GATE_MISSED = ("the launch gate could not close for some samples (the GPU was busy); those samples "
               "include the host's launch time")


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _world_traversable(path: str) -> bool:
    p = Path(path).resolve()
    for d in [p, *p.parents]:
        try:
            mode = d.stat().st_mode
        except OSError:
            return False
        if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
            return False
    return True


def _privilege_drop_possible() -> bool:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return False
    import harness as h
    needed = [sys.prefix, sys.base_prefix, os.path.dirname(os.__file__), os.path.dirname(torch.__file__),
              os.path.dirname(os.path.dirname(h.__file__))]
    return all(_world_traversable(p) for p in needed)


def _make_undumpable() -> None:
    """Linux: the parent's /proc/<pid>/{mem,environ} and ptrace become root-only, so a worker of the
    same user cannot read the secret from the parent's memory."""
    try:
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)   # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        pass


class _Run:
    def __init__(self, path: Path, task, mode: str, options: RunOptions, progress):
        self.path, self.task, self.mode, self.opt = path, task, mode, options
        self.progress = progress or (lambda _msg: None)
        self.device = select_device(options.device)
        self.info = device_info(self.device)
        self.gpu = self.device.type == "cuda"
        # --no-defenses (measurement only): a leaderboard run times like a benchmark run (fixed inputs,
        # last output checked, no integrity rejections), so the cost of the defenses can be measured.
        self.leaderboard = mode == "leaderboard" and options.defenses
        self.cases: list[CaseResult] = []
        self.warnings: list[str] = list(options.extra_warnings)
        self.gated = False                  # per-call samples hide launch time behind the launch gate
        self.sup: Supervisor | None = None
        self.baseline_threads = None
        self.tmp = None
        self.cfg: WorkerConfig | None = None
        self.memory_limit = 0
        self.measured_peaks = sol.load_measured()
        self.phases: dict[str, float] = {}
        self.gap_ns, self.window_gap_ns = 0.0, {}       # the worker's calibration (see _start_worker)
        self.clocks = ClockReader(self.device) if self.gpu else None
        self.kernel_only_off = None if options.kernel_only else "turned off (--no-kernel-only)"

    @contextmanager
    def phase(self, name: str):
        """Adds the wall time of the block to ``phases[name]`` (seconds)."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - t0

    def _request(self, phase: str, msg: dict, deadline: float, what: str):
        with self.phase(phase):
            return self.sup.request(msg, deadline, what)

    # -- set-up --------------------------------------------------------------------------------------
    def _worker_config(self) -> WorkerConfig:
        self.tmp = tempfile.mkdtemp(prefix="harness-run-")
        sub_copy = os.path.join(self.tmp, "submission.py")
        shutil.copyfile(self.path, sub_copy)
        compat = str(self.task.compat_dir)   # used in place: its modules find tasks/_compat_common beside it
        triton_cache = self.opt.triton_cache_dir or os.path.join(self.tmp, "triton-cache")
        # Caches and temporary files stay inside the run's own directory: writable after the drop to
        # 'nobody' (torch.compile's default cache is /tmp/torchinductor_<$USER>, the harness's user) and
        # never shared with another submission.
        env = {"HOME": self.tmp, "TMPDIR": self.tmp, "TRITON_CACHE_DIR": triton_cache,
               "TORCHINDUCTOR_CACHE_DIR": os.path.join(self.tmp, "inductor-cache"),
               "PYTHONDONTWRITEBYTECODE": "1"}
        if not self.gpu:
            env["TRITON_INTERPRET"] = "1"   # Triton kernels run under Triton's interpreter on the CPU
        drop = self.opt.drop_privileges
        if drop is None:
            drop = _privilege_drop_possible()
        uid = None
        if drop:
            uid = NOBODY
            walk = [self.tmp] + ([triton_cache] if self.opt.triton_cache_dir else [])
            for root, dirs, files in (entry for top in walk for entry in os.walk(top)):
                for name in [root] + [os.path.join(root, n) for n in dirs + files]:
                    os.chown(name, NOBODY, NOBODY)
        elif hasattr(os, "geteuid") and os.geteuid() == 0:
            from harness.engine.privileges import needed_paths, root_warning_once
            self.warnings += root_warning_once(needed_paths())
        return WorkerConfig(submission_path=sub_copy, compat_dir=compat, device=str(self.device),
                            l2_bytes=self.info.l2_bytes, hide_bytes=self.task.original_clear_bytes,
                            stdout_path=os.path.join(self.tmp, "stdout.txt"),
                            stderr_path=os.path.join(self.tmp, "stderr.txt"),
                            output_limit_bytes=self.opt.output_limit_mb << 20,
                            run_as_uid=uid, run_as_gid=uid, env=env, task_file=str(self.task.module.__file__),
                            submission_name=str(self.path))

    def _deadline(self, seconds: float) -> float:
        return time.monotonic() + seconds * self.opt.timeout_scale

    def _case_spec(self, case: dict) -> dict:
        return dict(case, seed=self.opt.seed) if self.opt.seed is not None else dict(case)

    # -- inputs --------------------------------------------------------------------------------------
    def _place_inputs(self, specs: list, privates: list, deadline: float, keep: int = 0) -> list:
        """Has the worker generate its own copies of ``privates`` from their ``specs`` (the parent keeps
        the originals for checking) and returns the slot numbers that later messages name them by; the
        worker's first ``keep`` slots stay. The copies must match the originals' fingerprints."""
        header, _ = self._request("worker_generate", {"op": "generate", "specs": specs, "keep": keep}, deadline,
                                  "generating inputs in the worker")
        reason = self._guard(header)
        if reason:
            raise WorkerFailure(REJECTED, reason)
        if not header.get("ok"):
            raise WorkerFailure(ERROR, f"could not generate the inputs in the worker: {header.get('error')}")
        with self.phase("generate"):
            mine = [protocol.input_fingerprint(d) for d in privates]
        if header.get("fingerprints") != mine:
            raise WorkerFailure(ERROR, "the inputs the worker generated differ from the harness's own for the "
                                       "same seeds: the task's generate_input must depend only on its seed (draw "
                                       "from a torch.Generator seeded with it), or the submission changed them")
        return list(range(keep, keep + len(privates)))

    # -- checks on every reply -----------------------------------------------------------------------
    def _guard(self, header: dict) -> str | None:
        """A reason to reject, from the worker's own integrity report and the parent's process count."""
        if not self.opt.defenses:
            return None
        if header.get("tampered"):
            return ("the submission replaced harness or torch objects it must leave alone: "
                    + ", ".join(header["tampered"]))
        if self.leaderboard and self.baseline_threads is not None:
            if header.get("threads", 0) > self.baseline_threads:
                return (f"the submission leaves {header['threads'] - self.baseline_threads} Python thread(s) "
                        "running during timed calls; ranked runs allow no background work")
            children = len(self.sup.strays()) if self.sup else 0   # counted here: the worker could lie
            if children > 0:
                return (f"the submission leaves {children} child process(es) running during timed "
                        "calls; ranked runs allow no background work")
        return None

    def _outputs(self, header, payloads):
        """The outputs a reply carries, rebuilt here; an output that is not a usable tensor becomes an
        ``_Unusable`` (a wrong output), a malformed reply a rejection (only tampering produces one)."""
        metas = header.get("outputs", [])
        if not isinstance(metas, list) or not all(isinstance(m, dict) for m in metas) or \
                sum(m.get("kind") == "tensor" for m in metas) != len(payloads):
            raise WorkerFailure(REJECTED, "a reply whose outputs do not match the data it carries: the "
                                          "submission wrote into the harness's channel")
        outs, it = [], iter(payloads)
        with self.phase("receive"):
            for meta in metas:
                if meta.get("kind") != "tensor":
                    outs.append(_Unusable(f"a {meta.get('type', '?')}, not a torch.Tensor"))
                    continue
                raw = next(it)
                if not accepts_dtype(meta.get("dtype")):
                    outs.append(_Unusable(f"a torch.Tensor of dtype {meta.get('dtype')}, which is no task's "
                                          "output dtype"))
                    continue
                try:
                    outs.append(rebuild_tensor(meta, raw, self.device))
                except ProtocolError as exc:
                    raise WorkerFailure(REJECTED, f"a malformed output in the worker's reply ({exc}): the "
                                                  "submission wrote into the harness's channel") from exc
        return outs

    def _check(self, data, out) -> tuple[bool, str]:
        if isinstance(out, _Unusable):
            return False, f"custom_kernel returned {out.what}"
        with self.phase("check"):
            return self.task.check(data, out)

    def _check_fixed(self, data, out, passed: list) -> tuple[bool, str]:
        """Benchmark mode re-checks the same fixed input every chunk: an output bit-identical to one
        that already passed on that input passes without recomputing the reference."""
        if passed and isinstance(out, torch.Tensor) and out.dtype == passed[0].dtype \
                and out.shape == passed[0].shape and torch.equal(out, passed[0]):
            return True, ""
        ok, message = self._check(data, out)
        if ok and isinstance(out, torch.Tensor):
            passed[:] = [out]
        return ok, message

    # -- phases --------------------------------------------------------------------------------------
    def _one_input(self, what: str, i: int, cases: list, deadline: float):
        """Case ``i`` of ``cases``: its spec, a progress label, the parent's input and the worker's slot."""
        spec = self._case_spec(cases[i])
        label = f"{what} {i + 1}/{len(cases)} {_fmt(spec)}"
        self.progress(label)
        [spec], [data] = self._inputs_for(spec, 0, 1, fresh=False)
        [item] = self._place_inputs([spec], [data], deadline)
        return spec, label, data, item

    def run_tests(self, deadline: float) -> bool:
        for i in range(len(self.task.tests)):
            spec, label, data, item = self._one_input("test", i, self.task.tests, deadline)
            header, payloads = self._request("call", {"op": "call", "data": item}, deadline, f"running {label}")
            reason = self._guard(header)
            if reason:
                self.cases.append(CaseResult("test", spec, REJECTED, reason))
                return False
            if not header.get("ok"):
                self.cases.append(CaseResult("test", spec, ERROR, header.get("error", "?"),
                                             extra=_tracebacks(header)))
                continue
            ok, message = self._check(data, self._outputs(header, payloads)[0])
            self.cases.append(CaseResult("test", spec, PASS if ok else FAIL, message))
        return all(c.verdict == PASS for c in self.cases if c.kind == "test")

    def _inputs_for(self, spec: dict, index: int, count: int, fresh: bool | None = None):
        """``count`` inputs from index ``index`` on, as (their specs with seeds, the inputs): seeds derived
        from the secret in ranked runs (``fresh``), else from the public seed (index 0: the case's own)."""
        fresh = self.leaderboard if fresh is None else fresh
        specs = [dict(spec, seed=derive_seed(self.opt.secret, spec["seed"], index + j) if fresh
                      else spec["seed"] + 42 * (index + j)) for j in range(count)]
        with self.phase("generate"):
            return specs, [self.task.generate_input(s, self.device) for s in specs]

    def _limits(self):
        o = self.opt
        max_repeats = o.max_repeats or (100 if self.gpu else 10)
        max_time = o.max_time_s or ((30.0 if self.leaderboard else 10.0) if self.gpu else 2.0)
        wall_cap = o.wall_cap_s or (120.0 if self.gpu else 30.0)
        return max_repeats, max_time * 1e9, wall_cap

    def run_benchmark_case(self, i: int, case: dict, deadline: float) -> CaseResult:
        kind = "leaderboard" if self.leaderboard else "benchmark"
        spec = self._case_spec(case)
        label = f"benchmark {i + 1}/{len(self.task.benchmarks)} {_fmt(spec)}"
        self.progress(label)
        per_call = self.task.timing_protocol == "per_call"
        result = CaseResult(kind, spec, PASS, baseline_us=self.task.baseline_for(case))
        batch = 1 if per_call else self.task.inputs_per_measurement
        if not self.gpu and batch > self.opt.cpu_inputs_per_measurement:
            batch = self.opt.cpu_inputs_per_measurement
            result.warnings.append(f"CPU run: {batch} inputs per measurement instead of the task's "
                                   f"{self.task.inputs_per_measurement}")
        max_repeats, max_time_ns, wall_cap = self._limits()

        # Warm-up calls bring the clocks up before every chunk of timed calls. In ranked runs they use
        # an input of their own (slot 0), never one that is timed afterwards.
        warm = self._inputs_for(spec, WARMUP_INDEX, 1) if self.leaderboard else ([], [])
        # unranked runs reuse one fixed set of inputs for every sample of the case
        fixed_specs, fixed = ([], None) if self.leaderboard else self._inputs_for(spec, 0, batch)
        fixed_items = None if self.leaderboard else self._place_inputs(fixed_specs, fixed, deadline)
        header, _ = self._request("timing", {"op": "warmup",
                                             "data": 0 if fixed_items else self._place_inputs(*warm, deadline)[0],
                                             "min_calls": 3 if self.gpu else 1, "min_ms": 100 if self.gpu else 0},
                                  deadline, f"warming up {label}")
        if self.leaderboard and self.baseline_threads is None:
            self.baseline_threads = header.get("threads")
        if not header.get("ok") or self._guard(header):
            return self._ended(result, header)

        series, started, index = {k: [] for k in protocol.TIMING_SERIES}, time.monotonic(), 0
        samples = series["samples_ns"]
        chunk_warmup_ms = 20 if self.gpu else 0
        passed_fixed = []
        result.extra["clocks_before"] = self._read_clocks()
        while True:
            if per_call:
                k = min(10 if self.gpu else 1, max_repeats - len(samples))
                specs, privates = self._inputs_for(spec, index, k) if self.leaderboard else ([], fixed * k)
                returned = list(range(k)) if self.leaderboard else [k - 1]
            else:
                specs, privates = self._inputs_for(spec, index, batch) if self.leaderboard else ([], fixed)
                returned = list(range(batch)) if self.leaderboard else [batch - 1]
            # Every chunk, in both modes alike (so ranked and unranked times compare): the submission's
            # own warm-up calls on an input that is not timed next (ranked: before the timed inputs reach
            # the worker, so untimed code never sees them), then, right before timing, the harness's
            # own GPU work to hold the clocks up and a read of each timed input (see timing.Sampler).
            if chunk_warmup_ms:
                header, _ = self._request("warmup", {"op": "warmup", "data": 0, "min_calls": 1,
                                                     "min_ms": chunk_warmup_ms}, deadline, f"warming up {label}")
                if not header.get("ok") or self._guard(header):
                    return self._ended(result, header, samples)
            if self.leaderboard:
                items = self._place_inputs(specs, privates, deadline, keep=1)   # slot 0: the warm-up input
            else:
                items = fixed_items * k if per_call else fixed_items
            index += len(privates)
            header, payloads = self._request("timing", {"op": "time", "protocol": self.task.timing_protocol,
                                                        "inputs": items, "return": returned,
                                                        "heat_ms": chunk_warmup_ms, "touch": self.gpu},
                                             deadline, f"timing {label}")
            if not header.get("ok") or self._guard(header):
                return self._ended(result, header, samples)
            _check_timing_reply(header, len(items) if per_call else 1, len(returned))
            for idx, out in zip(returned, self._outputs(header, payloads)):
                ok, message = (self._check(privates[idx], out) if self.leaderboard
                               else self._check_fixed(privates[idx], out, passed_fixed))
                if not ok:
                    result.verdict, result.message = FAIL, f"timed call {len(samples) + 1 + idx}: {message}"
                    return self._finish_case(result, samples + header["samples_ns"], series, batch)
            for k, values in series.items():
                values += header[k]
            if header.get("gate_misses") and GATE_MISSED not in self.warnings:
                self.warnings.append(GATE_MISSED)
            stats = Stats.from_samples(samples)
            if len(samples) >= self.opt.min_runs and (
                    stats.relative_error < self.opt.target_rel_err or sum(samples) > max_time_ns
                    or time.monotonic() - started > wall_cap or len(samples) >= max_repeats):
                break
        result.extra["clocks_after"] = self._read_clocks()
        result = self._finish_case(result, samples, series, batch)
        if result.verdict == PASS:
            result.warnings += clock_warnings(result.extra["clocks_before"], result.extra["clocks_after"])
            self._kernel_only(result, [0] if per_call else items, deadline)
            host = result.extra["unhidden_host_ns"] = plausibility.unhidden_host_ns(series["unhidden_host_ns"])
            result.warnings += plausibility.host_bound_warnings(host, result.extra.get("kernel_only_ns"))
        return result

    def _read_clocks(self) -> dict:
        if self.clocks is None:
            return {"note": "not available on CPU"}
        with self.phase("clocks"):
            return self.clocks.read()

    def _kernel_only(self, result: CaseResult, items: list, deadline: float) -> None:
        """Adds the kernel-only figure (and with --verify-timing the profiler's) to ``result.extra``."""
        x = result.extra
        x.update(kernel_only_ns=None, kernel_only_method=None, launch_overhead_ns=None)
        if not self.gpu:
            x["kernel_only_note"] = "not available on CPU: kernel-only times need CUDA graphs on a GPU"
            if self.opt.verify_timing:
                x.update(profiler_kernel_ns=None, kernel_only_vs_profiler_pct=None, profiler_kernels_per_call=None,
                         profiler_note="not available on CPU: device kernel times need CUPTI on a GPU")
            return
        if self.kernel_only_off:
            x["kernel_only_note"] = self.kernel_only_off
            return
        label = f"kernel-only {_fmt(result.spec)}"
        self.progress(label)
        msg = {"op": "kernel_only", "inputs": items, "n": max(2, 20 // len(items)), "replays": 7,
               "profiler": self.opt.verify_timing, "calls": max(2, 10 // len(items))}
        try:
            header, _ = self._request("kernel_only", msg, deadline, f"measuring {label}")
        except WorkerFailure as failure:     # the worker died: note it, carry on with a fresh one
            x["kernel_only_note"] = f"the worker died while measuring kernel-only time: {failure.message}"
            self._replace_worker(deadline, "the worker died during a kernel-only measurement")
            return
        reason = self._guard(header)
        if reason:
            result.verdict, result.message = REJECTED, reason
            return
        if not header.get("ok"):
            x["kernel_only_note"] = f"kernel-only measurement failed: {header.get('error', '?')}"
            return
        graph, prof = header.get("graph") or {}, header.get("profiler") or {}
        notes = [graph.get("note") or ""]
        if graph.get("ns") is not None:
            x.update(kernel_only_ns=graph["ns"], kernel_only_method="cuda_graph",
                     kernel_only_spread_pct=graph.get("spread_pct"),
                     kernel_only_nodes_per_call=graph.get("nodes_per_call"))
        elif prof.get("ns") is not None:
            x.update(kernel_only_ns=prof["ns"], kernel_only_method="profiler")
            notes.append("fell back to the profiler's kernel sum")
        elif prof.get("note"):
            notes.append(f"profiler: {prof['note']}")
        if self.opt.verify_timing:
            x["profiler_kernel_ns"] = prof.get("ns")
            x["profiler_note"] = prof.get("note", "no profiler reading")
            ko, pk = x["kernel_only_ns"], prof.get("ns")
            x["kernel_only_vs_profiler_pct"] = (100 * (ko - pk) / pk if ko is not None and pk
                                                and x["kernel_only_method"] == "cuda_graph" else None)
            x["profiler_kernels_per_call"] = prof.get("kernels_per_call")
            x["profiler_window_ns"] = prof.get("window_ns")
        x["kernel_only_note"] = "; ".join(n for n in notes if n)
        if x["kernel_only_ns"] is not None and result.stats:
            x["launch_overhead_ns"] = result.stats.mean - x["kernel_only_ns"]
        if header.get("poisoned"):
            x["kernel_only_note"] += ("; the failed capture broke the worker's CUDA context: a fresh worker "
                                      "runs the remaining cases, without kernel-only figures")
            self._replace_worker(deadline, "a CUDA graph capture broke the worker's CUDA context")

    def _start_worker(self, deadline: float) -> None:
        """Starts the worker and keeps its calibration, sent before the submission is imported."""
        with self.phase("worker_start"):
            ready = self.sup.start(deadline) or {}
        self.gap_ns = _finite(ready.get("gap_ns")) or 0.0
        window_gap = ready.get("window_gap_ns") if isinstance(ready.get("window_gap_ns"), dict) else {}
        self.window_gap_ns = {regime: _finite(window_gap.get(regime)) for regime in ("held", "opened")}

    def _replace_worker(self, deadline: float, why: str) -> None:
        """A new worker (re-imports the submission) so that the remaining cases still run."""
        self.kernel_only_off = f"not measured: {why} in an earlier case"
        self.warnings.append(f"{why}; the worker was restarted and kernel-only figures are off for later cases")
        self.sup.stop()
        self.sup = Supervisor(self.cfg, self.memory_limit)
        self._start_worker(deadline)
        header, _ = self._request("import", {"op": "load"}, deadline, "re-importing the submission")
        if not header.get("ok"):
            raise WorkerFailure(ERROR, f"the submission could not be re-imported: {header.get('error', '?')}")
        self.baseline_threads = None

    def _ended(self, result: CaseResult, header: dict, samples=()) -> CaseResult:
        reason = self._guard(header)
        if reason:
            result.verdict, result.message = REJECTED, reason
        else:
            result.verdict, result.message = ERROR, header.get("error", "?")
            result.extra.update(_tracebacks(header))
        if samples:
            result.stats = Stats.from_samples(samples)
        return result

    def _finish_case(self, result: CaseResult, samples, series: dict, batch: int) -> CaseResult:
        """``samples``: per input; ``series``: the timing replies' lists (``protocol.TIMING_SERIES``),
        whose walls and windows the plausibility checks read; ``batch``: inputs per sample."""
        if not samples:
            return result
        stats = result.stats = Stats.from_samples(samples)
        nbytes, flops = self.task.case_bytes(result.spec), self.task.case_flops(result.spec)
        result.sol = sol.speed_of_light(self.info.kind, self.info.name, nbytes, flops, stats.mean,
                                        self.measured_peaks)
        if result.verdict != PASS:
            return result
        if self.gpu:
            result.extra["device_clock_excess_ns"] = plausibility.device_clock_excess_ns(
                stats, series["window_ns"], series["gate_held"], self.window_gap_ns, batch)
        reason = plausibility.implausible(stats, series["wall_ns"], self.gap_ns,
                                          sol.physical_floor_ns(self.info.name, nbytes, flops), self.gpu,
                                          series["window_ns"], series["gate_held"], self.window_gap_ns, batch)
        if reason and self.leaderboard:
            result.verdict, result.message = REJECTED, reason
            return result
        if reason:
            result.warnings.append(reason)
        strict = self.task.timing_protocol == "per_call" and not self.gated
        result.warnings += plausibility.noise_warnings(stats, self.gpu, strict)
        return result

    def run_benchmarks(self, deadline: float) -> None:
        for i, case in enumerate(self.task.benchmarks):
            result = self.run_benchmark_case(i, case, deadline)
            self.cases.append(result)
            if result.verdict == REJECTED:
                return

    def run_profile(self, deadline: float) -> None:
        for i in range(len(self.task.benchmarks)):
            spec, label, _data, item = self._one_input("profile", i, self.task.benchmarks, deadline)
            header, _ = self._request("profile", {"op": "profile", "data": item}, deadline, f"profiling {label}")
            if not header.get("ok") or self._guard(header):
                self.cases.append(self._ended(CaseResult("benchmark", spec, PASS), header))
                continue
            self.cases.append(CaseResult("benchmark", spec, PASS, "profiled",
                                         extra={"profile_table": header.get("table", "")}))

    # -- the whole run -------------------------------------------------------------------------------
    def _all_cases_for_mode(self):
        tests = [("test", c) for c in self.task.tests]
        kind = "leaderboard" if self.leaderboard else "benchmark"
        benches = [(kind, c) for c in self.task.benchmarks]
        return {"test": tests, "benchmark": benches, "profile": benches,
                "test+benchmark": tests + benches, "leaderboard": tests + benches}[self.mode]

    def execute(self) -> RunResult:
        started, t0 = _now(), time.monotonic()
        result = RunResult(task=self.task.name, submission=submission_info(self.path), mode=self.mode,
                           device=self.info, verdict=ERROR, started_at=started,
                           harness_version=harness.__version__)
        if self.info.kind == "cpu":
            self.warnings.append("CPU results: times are host-clock times on the CPU, not GPU times")
        if self.leaderboard:
            _make_undumpable()
        if not self.opt.defenses:
            self.warnings.append("DEFENSES OFF (--no-defenses): for measuring their cost only; this result is "
                                 "not a ranked result (fixed inputs, no integrity or background-work checks)")
        if self.mode == "leaderboard" and self.opt.defenses and self.opt.scan_policy != "off":
            if self._scan(result):
                return result
        task = self.task
        self.memory_limit = int((self.opt.memory_limit_gb or psutil.virtual_memory().total * 0.75 / 2**30) * 2**30)
        try:
            self.cfg = self._worker_config()
            self.sup = Supervisor(self.cfg, self.memory_limit)
            first = task.ranked_timeout if self.leaderboard else (
                task.benchmark_timeout if self.mode in ("benchmark", "profile") else task.test_timeout)
            deadline = self._deadline(first)
            self._start_worker(deadline)
            header, _ = self._request("import", {"op": "load"}, deadline, "importing the submission")
            result.timing_method = str(header.get("timing_method", ""))[:300]
            self.gated = header.get("gated") is True
            if self._guard(header):
                result.message = self._guard(header)
                self.cases.append(CaseResult("import", {}, REJECTED, result.message))
            elif not header.get("ok"):
                result.message = header.get("error", "the submission could not be imported")
                self.cases.append(CaseResult("import", {}, ERROR, result.message,
                                             extra=_tracebacks(header)))
            else:
                if self.mode in ("test", "test+benchmark", "leaderboard"):
                    tests_ok = self.run_tests(deadline)
                    if self.mode != "test":
                        if tests_ok:
                            if not self.leaderboard:
                                deadline = self._deadline(task.benchmark_timeout)
                            self.run_benchmarks(deadline)
                        else:
                            self.warnings.append("benchmarks skipped: a test did not pass")
                elif self.mode == "benchmark":
                    self.run_benchmarks(deadline)
                else:
                    self.run_profile(deadline)
                # One last exchange: a reply the submission forged earlier leaves the real one queued,
                # and it arrives here out of sequence (Supervisor.request rejects).
                self._place_inputs([], [], deadline)
        except WorkerFailure as failure:
            label = self._current_case_label()
            self.cases.append(CaseResult(label[0], label[1], failure.verdict, failure.message))
        finally:
            if self.clocks is not None:
                self.clocks.close()
            if self.sup is not None:
                with self.phase("worker_stop"):
                    self.sup.stop()
                result.stdout, result.stderr = self.sup.captured_output()
            if self.tmp:
                shutil.rmtree(self.tmp, ignore_errors=True)
        self._mark_not_run()
        result.cases = self.cases
        result.verdict = worst_verdict(c.verdict for c in self.cases if c.verdict != NOT_RUN) \
            if any(c.verdict != NOT_RUN for c in self.cases) else ERROR
        if any(c.verdict == NOT_RUN for c in self.cases) and result.verdict == PASS:
            result.verdict = ERROR
        result.message = result.message or _summary(self.cases)
        result.score_us = _score(task, self.cases) if self.mode in ("benchmark", "test+benchmark",
                                                                    "leaderboard") else None
        if result.score_us is not None:
            with self.phase("bootstrap"):
                result.score_ci_us = score_ci_us([c.stats.samples_ns for c in result.benchmark_cases()],
                                                 task.ranking_by)
        result.warnings = self.warnings
        result.finished_at, result.wall_s = _now(), time.monotonic() - t0
        self.phases["other"] = max(0.0, result.wall_s - sum(self.phases.values()))
        result.phases_s = dict(self.phases)
        return result

    def _scan(self, result: RunResult) -> bool:
        """Static pre-scan (harness.engine.scan); True when the policy rejects the run before any code runs."""
        from harness.engine.scan import ScanUnavailable, scan_file
        try:
            findings, hacked = scan_file(self.path)
        except ScanUnavailable as exc:
            self.warnings.append(str(exc))
            return False
        result.findings = findings
        for f in findings:
            self.warnings.append(f"static scan: {f['rule']} ({f['severity']}): {f['message']}")
        if hacked and self.opt.scan_policy == "reject":
            rules = ", ".join(sorted({f["rule"] for f in findings if f.get("blocking")}))
            result.verdict = REJECTED
            result.message = (f"rejected by the static scan before running (--scan-policy reject): {rules}; "
                              "see the findings")
            self.cases.append(CaseResult("scan", {}, REJECTED, result.message))
            result.cases = self.cases
            result.warnings = self.warnings
            result.finished_at = _now()
            return True
        return False

    def _current_case_label(self):
        planned = self._all_cases_for_mode()
        done = len(self.cases)
        if done < len(planned):
            kind, case = planned[done]
            return kind, self._case_spec(case)
        return "run", {}

    def _mark_not_run(self) -> None:
        planned = self._all_cases_for_mode()
        if self.cases and self.cases[0].kind == "import":
            return
        for kind, case in planned[len(self.cases):]:
            self.cases.append(CaseResult(kind, self._case_spec(case), NOT_RUN,
                                         "not run: an earlier case ended the run"))


def _tracebacks(header: dict) -> dict:
    """A failed reply's tracebacks: the submission's own frames, and every frame (shown with --verbose)."""
    return {"traceback": header.get("traceback", ""), "traceback_full": header.get("traceback_full", "")}


def _finite(x) -> float | None:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None


def _check_timing_reply(header: dict, n_samples: int, n_outputs: int) -> None:
    """A timing reply carries exactly the samples and outputs asked for; anything else is a forgery
    (an honest worker cannot produce it), and fewer outputs would leave timed calls unchecked."""
    lists = samples, walls, windows, held, unhidden = [header.get(k) for k in protocol.TIMING_SERIES]
    numbers = samples + walls if all(isinstance(x, list) for x in lists) else None
    if numbers is None or any(len(x) != n_samples for x in lists) or \
            not all(isinstance(x, (int, float)) and math.isfinite(x) and x >= 0 for x in numbers) or \
            not all(w is None or isinstance(w, (int, float)) and math.isfinite(w) for w in windows + unhidden) or \
            not all(isinstance(h, bool) for h in held) or \
            len(header.get("outputs") or []) != n_outputs:
        raise WorkerFailure(REJECTED, "a timing reply that does not match its request (samples or outputs "
                                      "missing or malformed): the submission wrote into the harness's channel")


class _Unusable:
    """An output the harness cannot check as a tensor; ``what`` describes it."""

    def __init__(self, what: str):
        self.what = what


def _fmt(spec: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in spec.items())


def _summary(cases) -> str:
    counts = {}
    for c in cases:
        counts[c.verdict] = counts.get(c.verdict, 0) + 1
    first_bad = next((c for c in cases if c.verdict not in (PASS, NOT_RUN)), None)
    text = ", ".join(f"{n} {v}" for v, n in counts.items())
    return f"{text}; first problem: {first_bad.message}" if first_bad else text


def _score(task, cases) -> float | None:
    """The task's ranking rule over benchmark means, in microseconds; None unless every case passed."""
    bench = [c for c in cases if c.kind in ("benchmark", "leaderboard")]
    if not bench or any(c.verdict != PASS for c in cases) or any(c.stats is None for c in bench):
        return None
    shapes = [ShapeTime(shape_label(c.spec), c.stats.mean / 1e3, c.stats.stderr / 1e3) for c in bench]
    return rank_score(shapes, RankRule(task.ranking_by)).value_us


def run_submission(path, task, mode: str = "test+benchmark", options: RunOptions | None = None,
                   progress=None) -> RunResult:
    """Runs ``path`` on ``task`` (a Task or a task name) in ``mode``; never raises for a bad submission.
    Raises UsageError for a bad request (missing file, unknown mode, unusable device)."""
    from tasks import TaskSpecError, load_task
    path = Path(path)
    if mode not in MODES:
        raise UsageError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    if not path.is_file():
        raise UsageError(f"submission file {str(path)!r} does not exist; give the path to a .py file "
                         "that defines custom_kernel(data)")
    if path.suffix != ".py":
        raise UsageError(f"submission {str(path)!r} is not a .py file; submissions are single Python files")
    if isinstance(task, str):
        try:
            task = load_task(task)
        except TaskSpecError as exc:
            raise UsageError(str(exc)) from exc
    options = options or RunOptions()
    if mode == "leaderboard" and options.secret is None:
        from harness.engine.seeds import take_secret
        options.secret, source = take_secret()
        options.extra_warnings.append(f"secret seed: {source}")
    return _Run(path, task, mode, options, progress).execute()
