"""The kernel-only figure of a passed benchmark case (CUDA graphs in the worker, see
``harness.worker.kernel_only``), with --verify-timing the profiler's too; a worker that dies or breaks
its CUDA context while measuring is replaced, and later cases go without the figure."""
from __future__ import annotations

from harness.engine.context import RunContext, fmt_spec
from harness.engine.session import WorkerSession
from harness.engine.supervisor import WorkerFailure
from harness.results import REJECTED, CaseResult


class KernelOnly:
    def __init__(self, ctx: RunContext, session: WorkerSession):
        self.ctx, self.session = ctx, session
        self.off = None if ctx.opt.kernel_only else "turned off (--no-kernel-only)"   # why not measured

    def measure(self, result: CaseResult, items: list, deadline: float) -> None:
        """Adds the kernel-only figure (and with --verify-timing the profiler's) to ``result.extra``."""
        x, verify = result.extra, self.ctx.opt.verify_timing
        x.update(kernel_only_ns=None, kernel_only_method=None, launch_overhead_ns=None)
        if not self.ctx.gpu:
            x["kernel_only_note"] = "not available on CPU: kernel-only times need CUDA graphs on a GPU"
            if verify:
                x.update(profiler_kernel_ns=None, kernel_only_vs_profiler_pct=None, profiler_kernels_per_call=None,
                         profiler_note="not available on CPU: device kernel times need CUPTI on a GPU")
            return
        if self.off:
            x["kernel_only_note"] = self.off
            return
        label = f"kernel-only {fmt_spec(result.spec)}"
        self.ctx.progress(label)
        msg = {"op": "kernel_only", "inputs": items, "n": max(2, 20 // len(items)), "replays": 7,
               "profiler": verify, "calls": max(2, 10 // len(items))}
        try:
            header, _ = self.session.request("kernel_only", msg, deadline, f"measuring {label}")
        except WorkerFailure as failure:     # the worker died: note it, carry on with a fresh one
            x["kernel_only_note"] = f"the worker died while measuring kernel-only time: {failure.message}"
            self._replace_worker(deadline, "the worker died during a kernel-only measurement")
            return
        reason = self.session.rejection(header)
        if reason:
            result.verdict, result.message = REJECTED, reason
            return
        if not header.get("ok"):
            x["kernel_only_note"] = f"kernel-only measurement failed: {header.get('error', '?')}"
            return
        self._record(result, header.get("graph") or {}, header.get("profiler") or {})
        if header.get("poisoned"):
            x["kernel_only_note"] += ("; the failed capture broke the worker's CUDA context: a fresh worker "
                                      "runs the remaining cases, without kernel-only figures")
            self._replace_worker(deadline, "a CUDA graph capture broke the worker's CUDA context")

    def _record(self, result: CaseResult, graph: dict, prof: dict) -> None:
        x = result.extra
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
        if self.ctx.opt.verify_timing:
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

    def _replace_worker(self, deadline: float, why: str) -> None:
        self.off = f"not measured: {why} in an earlier case"
        self.ctx.warnings.append(f"{why}; the worker was restarted and kernel-only figures are off for later cases")
        self.session.replace(deadline)
