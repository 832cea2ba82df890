"""The kernel-only figure of a passed benchmark case (CUDA graphs in the worker, see
``harness.worker.kernel_only``), with --verify-timing the profiler's too; a worker that dies or breaks
its CUDA context while measuring is replaced, and later cases go without the figure."""

from __future__ import annotations

from harness.engine.context import RunContext, fmt_spec
from harness.engine.session import WorkerSession
from harness.engine.supervisor import WorkerFailure
from harness.extras import KernelOnlyFigures, ProfilerCheck
from harness.messages import GraphFigures, KernelOnlyMeasured, ProfilerFigures
from harness.requests import MeasureKernelOnly
from harness.results import REJECTED, CaseResult

_CPU_NOTE = "not available on CPU: kernel-only times need CUDA graphs on a GPU"
_CPU_PROFILER_NOTE = "not available on CPU: device kernel times need CUPTI on a GPU"


class KernelOnly:
    def __init__(self, ctx: RunContext, session: WorkerSession):
        self.ctx, self.session = ctx, session
        self.off = None if ctx.opt.kernel_only else "turned off (--no-kernel-only)"  # why not measured

    def measure(
        self, result: CaseResult, items: list, deadline: float
    ) -> tuple[KernelOnlyFigures, ProfilerCheck | None]:
        """The kernel-only figures of ``result``'s case (and with --verify-timing the profiler's check,
        else None); a rejected reply rejects the case."""
        verify = self.ctx.opt.verify_timing
        if not self.ctx.gpu:
            return (
                KernelOnlyFigures(note=_CPU_NOTE),
                ProfilerCheck(note=_CPU_PROFILER_NOTE, on_device=False) if verify else None,
            )
        if self.off:
            return KernelOnlyFigures(note=self.off), None
        label = f"kernel-only {fmt_spec(result.spec)}"
        self.ctx.progress(label)
        msg = MeasureKernelOnly(
            inputs=items, n=max(2, 20 // len(items)), replays=7, profiler=bool(verify), calls=max(2, 10 // len(items))
        )
        try:
            reply = self.session.request("kernel_only", msg, deadline, f"measuring {label}", KernelOnlyMeasured)
        except WorkerFailure as failure:  # the worker died: note it, carry on with a fresh one
            figures = KernelOnlyFigures(note=f"the worker died while measuring kernel-only time: {failure.message}")
            self._replace_worker(deadline, "the worker died during a kernel-only measurement")
            return figures, None
        reason = self.session.rejection(reply)
        if reason:
            result.verdict, result.message = REJECTED, reason
            return KernelOnlyFigures(), None
        if not reply.ok:
            return KernelOnlyFigures(note=f"kernel-only measurement failed: {reply.error}"), None
        figures, check = self._figures(result, reply.graph, reply.profiler or ProfilerFigures(ns=None))
        if reply.poisoned:
            figures.note = (figures.note or "") + (
                "; the failed capture broke the worker's CUDA context: a fresh worker "
                "runs the remaining cases, without kernel-only figures"
            )
            self._replace_worker(deadline, "a CUDA graph capture broke the worker's CUDA context")
        return figures, check

    def _figures(
        self, result: CaseResult, graph: GraphFigures, prof: ProfilerFigures
    ) -> tuple[KernelOnlyFigures, ProfilerCheck | None]:
        figures, notes = KernelOnlyFigures(), [graph.note]
        if graph.ns is not None:
            figures = KernelOnlyFigures(
                ns=graph.ns, method="cuda_graph", spread_pct=graph.spread_pct, nodes_per_call=graph.nodes_per_call
            )
        elif prof.ns is not None:
            figures = KernelOnlyFigures(ns=prof.ns, method="profiler")
            notes.append("fell back to the profiler's kernel sum")
        elif prof.note:
            notes.append(f"profiler: {prof.note}")
        check = _profiler_check(figures, prof) if self.ctx.opt.verify_timing else None
        figures.note = "; ".join(n for n in notes if n)
        if figures.ns is not None and result.stats:
            figures.launch_overhead_ns = result.stats.mean - figures.ns
        return figures, check

    def _replace_worker(self, deadline: float, why: str) -> None:
        self.off = f"not measured: {why} in an earlier case"
        self.ctx.warnings.append(f"{why}; the worker was restarted and kernel-only figures are off for later cases")
        self.session.replace(deadline)


def _profiler_check(figures: KernelOnlyFigures, prof: ProfilerFigures) -> ProfilerCheck:
    """--verify-timing: the profiler's kernel sum beside the graph figure, and how far apart they are."""
    ko, pk = figures.ns, prof.ns
    return ProfilerCheck(
        kernel_ns=pk,
        note="no profiler reading" if prof.note is None else prof.note,
        vs_kernel_only_pct=(100 * (ko - pk) / pk if ko is not None and pk and figures.method == "cuda_graph" else None),
        kernels_per_call=prof.kernels_per_call,
        window_ns=prof.window_ns,
    )
