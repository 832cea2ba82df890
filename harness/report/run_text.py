"""Human-readable text for a RunResult. Returns strings; the commands print them."""

from __future__ import annotations

from harness.report.tables import format_rows
from harness.report.tables import us_from_ns as fmt_us
from harness.results import PASS, CaseResult, RunResult, shape_label

CASE_HEADERS = ["kind", "shape", "verdict", "mean ± stderr (us)", "min", "max", "runs", "baseline (us)", "SOL (us)"]

# said once, in the report: what a CPU result is good for (its speed can spread tenfold between runs)
CPU_NOTE = (
    "CPU run: good for correctness and a rough speed, not for ranking (host clock on shared cores: "
    "scores spread widely between runs)"
)


def render_run(result: RunResult, diagnosis: str | None = None) -> str:
    """The run's report; ``diagnosis`` (harness.engine.diagnosis) is one more line under 'why:'."""
    out = _header(result)
    out += ["", _case_table(result).rstrip("\n")]
    out += _timing_notes(result)
    notes = [(c, c.message) for c in result.cases if c.verdict != PASS and c.message]
    if notes:
        out.append("")
        out += [f"{c.kind} {shape_label(c.spec)}: {c.verdict}: {message}" for c, message in notes]
    for c in result.cases:
        if c.extra.get("profile_table"):
            out += ["", f"profile {shape_label(c.spec)}", c.extra["profile_table"]]
    out.append("")
    out += render_blocks(result)
    out.append(f"verdict: {result.verdict.upper()}   score: {_score_text(result)}   wall: {result.wall_s or 0:.1f} s")
    if result.verdict != PASS:
        out.append(f"why: {result.message}")
    if diagnosis:
        out.append(diagnosis)
    return "\n".join(out)


def _header(result: RunResult) -> list[str]:
    d = result.device
    out = [
        f"task {result.task} | submission {result.submission.name} ({result.submission.path}) | mode {result.mode}",
        f"device {d.name} [{d.kind}{', ' + d.capability if d.capability else ''}] | torch {d.torch}"
        f" | triton {d.triton or '-'} | harness {result.harness_version}",
    ]
    if d.kind == "cpu":
        out.append(CPU_NOTE)
    elif result.timing_method:
        out.append(f"timing: {result.timing_method}")
    return out


def _case_row(c: CaseResult, kernel_only: bool) -> list[str]:
    s, sol = c.stats, c.sol
    row = [
        c.kind,
        shape_label(c.spec),
        c.verdict,
        f"{fmt_us(s.mean)} ± {fmt_us(s.stderr)}" if s else "-",
        fmt_us(s.min) if s else "-",
        fmt_us(s.max) if s else "-",
        str(s.runs) if s else "-",
        f"{c.baseline_us:.3f}" if c.baseline_us is not None else "-",
        fmt_us(sol.time_ns) if sol and sol.time_ns else "-",
        f"{sol.percent:.1f}% {sol.bound}" if sol and sol.percent is not None else "-",
    ]
    return row + ([fmt_us(c.extra.get("kernel_only_ns"))] if kernel_only else [])


def _case_table(result: RunResult) -> str:
    kernel_only = any(c.extra.get("kernel_only_ns") is not None for c in result.cases)
    headers = [*CASE_HEADERS, "% of SOL"] + (["kernel-only (us)"] if kernel_only else [])
    return format_rows(headers, [_case_row(c, kernel_only) for c in result.cases])


def _score_text(result: RunResult) -> str:
    if result.score_us is None:
        return "-"
    text = f"{result.score_us:.3f} us"
    if result.score_ci_us:
        si = result.score_interval
        source = si.source_text() if si is not None else "one process's samples: a rerun can differ by more"
        text += f" (95% CI {result.score_ci_us[0]:.3f}-{result.score_ci_us[1]:.3f}, from {source})"
    return text


def render_blocks(result: RunResult) -> list[str]:
    """One line per run of several blocks: the block scores, their spread and any throttled block."""
    blocks = result.blocks
    if len(blocks) < 2:
        return []
    scores = ", ".join(f"{b.score_us:.3f}" if b.score_us is not None else "-" for b in blocks)
    si = result.score_interval
    spread = f"; spread {100 * si.spread:.2f}%" if si is not None and si.spread is not None else ""
    renews = "fresh worker and inputs each" if all(b.fresh_worker for b in blocks) else "one worker, fresh inputs each"
    line = f"blocks: {len(blocks)} ({renews}), block scores (us): {scores}{spread}"
    throttled = [str(b.index + 1) for b in blocks if b.throttled]
    if throttled:
        line += f"; measured while throttled: block {', '.join(throttled)}"
    return [line]


def _all_cases_note(cases: list[CaseResult]) -> list[str] | None:
    """The same kernel-only reason for every case (e.g. a CPU run), said once; None otherwise."""
    if not cases or not all(
        c.extra.get("kernel_only_ns") is None
        and c.extra.get("profiler_kernel_ns") is None
        and c.extra.get("kernel_only_note")
        for c in cases
    ):
        return None
    notes = {str(c.extra["kernel_only_note"]) for c in cases}
    notes |= {str(c.extra["profiler_note"]) for c in cases if c.extra.get("profiler_note") is not None}
    if len(notes) > 2:
        return None
    return ["", "kernel-only / timing check, all cases: " + "; ".join(sorted(notes))]


def _timing_check_line(x: dict, shape: str) -> str:
    dev, kernels = x.get("kernel_only_vs_profiler_pct"), x.get("profiler_kernels_per_call")
    per_kernel = (x["kernel_only_ns"] - x["profiler_kernel_ns"]) / kernels if dev is not None and kernels else None
    parts = [
        f"timing check {shape}: kernel-only {fmt_us(x.get('kernel_only_ns'))} us vs profiler "
        f"kernel sum {fmt_us(x.get('profiler_kernel_ns'))} us"
    ]
    if dev is not None:
        parts.append(f" ({dev:+.1f}%" + (f", {per_kernel:+.0f} ns per kernel" if per_kernel is not None else "") + ")")
    if x.get("profiler_window_ns") is not None:
        parts.append(f", profiler window {fmt_us(x['profiler_window_ns'])} us")
    if kernels:
        parts.append(f", {kernels:g} kernels/call")
    parts.append(f", launch overhead {fmt_us(x.get('launch_overhead_ns'))} us")
    if x.get("profiler_note"):
        parts.append(f"; {x['profiler_note']}")
    return "".join(parts)


def _timing_notes(result: RunResult) -> list[str]:
    """Kernel-only notes and --verify-timing lines, one per benchmark case that has something to say."""
    cases = result.benchmark_cases()
    once = _all_cases_note(cases)
    if once is not None:
        return once
    lines = []
    for c in cases:
        x, shape = c.extra, shape_label(c.spec)
        if "profiler_kernel_ns" in x:
            lines.append(_timing_check_line(x, shape))
        if x.get("kernel_only_note") and c.verdict == PASS:
            lines.append(f"kernel-only {shape}: {x['kernel_only_note']}")
    if any(c.extra.get("kernel_only_vs_profiler_pct") is not None for c in cases):
        lines.append(
            "(kernel-only is the call's device window: it holds the device's dispatch gap before each "
            "kernel, a few hundred ns, which the kernel sum leaves out and the profiler's window keeps)"
        )
    return ["", *lines] if lines else []


def render_phases(result: RunResult) -> str:
    """One line: where the run's wall time went."""
    phases = result.phases_s or {}
    parts = [f"{k} {v:.2f}" for k, v in sorted(phases.items(), key=lambda kv: -kv[1]) if v >= 0.005]
    return f"phases (s, wall {result.wall_s or 0:.2f}): " + ", ".join(parts)


def render_warnings(result: RunResult) -> list[str]:
    lines = [f"warning: {w}" for w in result.warnings]
    for c in result.cases:
        lines += [f"warning: {c.kind} {shape_label(c.spec)}: {w}" for w in c.warnings]
    return lines


def render_output_excerpt(result: RunResult, limit: int = 2000, verbose: bool = False) -> str:
    """The submission's output and its first traceback: its own frames, or every frame when ``verbose``."""
    parts = []
    for name, text in (("stdout", result.stdout), ("stderr", result.stderr)):
        if text.strip():
            cut = len(text) - limit
            t = text if cut <= 0 else text[: limit // 2] + f"\n[... {cut} characters cut ...]\n" + text[-limit // 2 :]
            parts.append(f"--- submission {name} ---\n{t.rstrip()}")
    key = "traceback_full" if verbose else "traceback"
    tbs = [str(c.extra.get(key) or c.extra.get("traceback")) for c in result.cases if c.extra.get("traceback")]
    if tbs:
        parts.append(
            (
                "--- traceback (first, every frame) ---\n"
                if verbose
                else "--- traceback (first; the harness's frames with --verbose) ---\n"
            )
            + tbs[0].rstrip()
        )
    return "\n".join(parts)
