"""The optional records a benchmark case carries besides its samples (informational, never ranked).

A record is written into ``CaseResult.extra`` (:meth:`CaseResult.record`) under the flat keys the JSON
results have always had, and read back from it (``CaseResult.kernel_only`` and so on, ``None`` when the
case has none), so a result file keeps its shape. ``extra`` also carries, outside these records,
``traceback`` (the submission's traceback when it raised) and ``profile_table`` (the profile mode's
torch profiler table).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class KernelOnlyFigures:
    """Written for every case that passed its timed calls (on a GPU measured by CUDA graphs behind the
    launch gate, see ``harness.worker.kernel_only``; on the CPU only the note).

    - ``ns`` (``kernel_only_ns``): device time per call of the submission's kernels on a cold L2, without
      the host's launch overhead; None when it could not be measured (then ``note`` says why).
    - ``method`` (``kernel_only_method``): "cuda_graph": (t[n x (flush + call)] - t[n x flush]) / n from
      CUDA graph replays behind the launch gate (the call's device window, the device's dispatch gap
      around each kernel included); "profiler": the profiler's kernel sum of eager calls, used when graph
      capture failed; None when not measured.
    - ``launch_overhead_ns``: the competition mean (``stats.mean``) minus ``ns``.
    - ``note`` (``kernel_only_note``): why ``ns`` is missing or what it fell back from ("" when all went
      well); None (not written) when the measurement's reply was rejected.
    - ``spread_pct`` (``kernel_only_spread_pct``): (max - min) / median of the graph replays, in percent;
      ``nodes_per_call`` (``kernel_only_nodes_per_call``): kernel, copy and memset nodes per call in the
      captured graph; both written with method "cuda_graph" only.
    - ``unhidden_host_ns``: median per call of the host's launch time that the launch gate did not hide
      (all of it without a gate); above ``ns`` the GPU waited for the host, and a "host-bound" warning
      says so. None on the CPU.
    """

    ns: float | None = None
    method: str | None = None
    launch_overhead_ns: float | None = None
    note: str | None = None
    spread_pct: float | None = None
    nodes_per_call: float | None = None
    unhidden_host_ns: float | None = None

    def to_extra(self) -> dict:
        x = {
            "kernel_only_ns": self.ns,
            "kernel_only_method": self.method,
            "launch_overhead_ns": self.launch_overhead_ns,
            "unhidden_host_ns": self.unhidden_host_ns,
        }
        if self.note is not None:
            x["kernel_only_note"] = self.note
        if self.method == "cuda_graph":
            x.update(kernel_only_spread_pct=self.spread_pct, kernel_only_nodes_per_call=self.nodes_per_call)
        return x

    @classmethod
    def from_extra(cls, x: dict) -> KernelOnlyFigures | None:
        if "kernel_only_ns" not in x:
            return None
        return cls(
            ns=x.get("kernel_only_ns"),
            method=x.get("kernel_only_method"),
            launch_overhead_ns=x.get("launch_overhead_ns"),
            note=x.get("kernel_only_note"),
            spread_pct=x.get("kernel_only_spread_pct"),
            nodes_per_call=x.get("kernel_only_nodes_per_call"),
            unhidden_host_ns=x.get("unhidden_host_ns"),
        )


@dataclass
class ProfilerCheck:
    """--verify-timing: the profiler's view of the same calls (CUPTI via torch.profiler, one replay of the
    kernel-only measurement's two graphs, the flushes excluded).

    - ``kernel_ns`` (``profiler_kernel_ns``): sum of the submission's device operation durations per call.
    - ``note`` (``profiler_note``): why ``kernel_ns`` is missing, or (eager fallback) device events it
      could not attribute.
    - ``vs_kernel_only_pct`` (``kernel_only_vs_profiler_pct``): 100 * (kernel_only_ns - kernel_ns) /
      kernel_ns, for the "cuda_graph" method only.
    - ``kernels_per_call`` (``profiler_kernels_per_call``): device kernels (and copies, memsets) per call.
    - ``window_ns`` (``profiler_window_ns``): the replay's window per call (block period less flush
      period): what kernel_only_ns measures, seen by the profiler. Not written when ``on_device`` is
      False (the CPU: nothing was measured).
    """

    kernel_ns: float | None = None
    note: str | None = None
    vs_kernel_only_pct: float | None = None
    kernels_per_call: float | None = None
    window_ns: float | None = None
    on_device: bool = True

    def to_extra(self) -> dict:
        x = {
            "profiler_kernel_ns": self.kernel_ns,
            "profiler_note": self.note,
            "kernel_only_vs_profiler_pct": self.vs_kernel_only_pct,
            "profiler_kernels_per_call": self.kernels_per_call,
        }
        if self.on_device:
            x["profiler_window_ns"] = self.window_ns
        return x

    @classmethod
    def from_extra(cls, x: dict) -> ProfilerCheck | None:
        if "profiler_kernel_ns" not in x:
            return None
        return cls(
            kernel_ns=x.get("profiler_kernel_ns"),
            note=x.get("profiler_note"),
            vs_kernel_only_pct=x.get("kernel_only_vs_profiler_pct"),
            kernels_per_call=x.get("profiler_kernels_per_call"),
            window_ns=x.get("profiler_window_ns"),
            on_device="profiler_window_ns" in x,
        )


@dataclass
class Clocks:
    """NVML or AMD SMI readings (``harness.engine.clocks``) just before the first timed call (``clocks_before``)
    and after the last (``clocks_after``; None, not written, when the case ended before it): sm_mhz,
    mem_mhz, temp_c, power_w, throttle_mask (NVML), throttle (names); or only a ``note`` saying why not."""

    before: dict
    after: dict | None = None

    def to_extra(self) -> dict:
        return {"clocks_before": self.before, **({} if self.after is None else {"clocks_after": self.after})}

    @classmethod
    def from_extra(cls, x: dict) -> Clocks | None:
        return cls(x["clocks_before"], x.get("clocks_after")) if "clocks_before" in x else None


@dataclass
class TailCheck:
    """GPU, cases whose timed calls passed: ``excess_ns`` (``tail_excess_ns``) is the escaped-work check's
    figure, the median per call of the samples' tails (the end event seen complete -> the device idle)
    less the tail of an honest trivial call calibrated when the worker started (above max(20 us, half the
    median sample) the case is rejected in ranked runs: ``plausibility.implausible``); ``idle_sync_ns``:
    the median per call of a second synchronize right after each tail, of the idle device, which a slow
    host lengthens and work left running does not; ``device_tail_ns``: the median per call of the device
    clock's time from the end stamp until every SM had room for a block again (behind the launch gate),
    which a kernel left running lengthens until it ends and the host does not (None when not read). Both
    decide nothing."""

    excess_ns: float | None = None
    idle_sync_ns: float | None = None
    device_tail_ns: float | None = None

    def to_extra(self) -> dict:
        return {
            "tail_excess_ns": self.excess_ns,
            "idle_sync_ns": self.idle_sync_ns,
            "device_tail_ns": self.device_tail_ns,
        }


@dataclass
class DeviceClockCheck:
    """GPU behind the launch gate, cases that passed: ``excess_ns`` (``device_clock_excess_ns``) is the
    median per call of (the device clock's window from just before the start event to just after the
    end event - the event time), less the same for an honest trivial call; about 0 when the events were
    left alone (above 3 us, or 20 us where the gate opened by itself for most samples, the case is
    rejected in ranked runs: ``plausibility.implausible``). None when not read."""

    excess_ns: float | None = None

    def to_extra(self) -> dict:
        return {"device_clock_excess_ns": self.excess_ns}

    @classmethod
    def from_extra(cls, x: dict) -> DeviceClockCheck | None:
        return cls(x["device_clock_excess_ns"]) if "device_clock_excess_ns" in x else None
