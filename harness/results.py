"""Result dataclasses and their versioned JSON form.

Everything the harness measures ends up in a :class:`RunResult`. Raw samples are kept in
nanoseconds, unrounded; rounding happens only when formatting a table.

Schema history (``SCHEMA_VERSION``):
  1 - first version: run, device, cases with stats (samples_ns), score_us, SOL per case.
      Later additions, all optional (absent in older files, read as None): RunResult.score_ci_us,
      RunResult.phases_s; CaseResult.extra keys kernel_only_* / profiler_* / clocks_* (issue #7).
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 1

# Verdicts, from best to worst. A run's verdict is the worst verdict among its cases.
PASS = "pass"          # output checked and correct (and timed, for benchmark cases)
FAIL = "fail"          # wrong output (values, NaN/inf, shape, dtype, device)
ERROR = "error"        # could not import, compile or run (exception, crash, missing module, OOM)
TIMEOUT = "timeout"    # ran past the task's timeout for the mode
REJECTED = "rejected"  # refused by policy or caught tampering
NOT_RUN = "not_run"    # never reached because an earlier case ended the worker
VERDICTS = (PASS, FAIL, ERROR, TIMEOUT, REJECTED, NOT_RUN)
_SEVERITY = {PASS: 0, NOT_RUN: 1, FAIL: 2, ERROR: 3, TIMEOUT: 4, REJECTED: 5}


def worst_verdict(verdicts) -> str:
    verdicts = list(verdicts)
    if not verdicts:
        return ERROR
    return max(verdicts, key=_SEVERITY.__getitem__)


@dataclass
class Stats:
    """Every sample plus its summary, in nanoseconds."""

    samples_ns: list[float]
    runs: int
    mean: float
    std: float
    stderr: float
    median: float
    min: float
    max: float

    @classmethod
    def from_samples(cls, samples_ns) -> "Stats":
        xs = [float(x) for x in samples_ns]
        if not xs:
            raise ValueError("Stats need at least one sample")
        n = len(xs)
        mean = math.fsum(xs) / n
        std = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else math.nan
        stderr = std / math.sqrt(n) if n > 1 else math.nan
        s = sorted(xs)
        median = s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
        return cls(samples_ns=xs, runs=n, mean=mean, std=std, stderr=stderr, median=median,
                   min=s[0], max=s[-1])

    @property
    def relative_error(self) -> float:
        return self.stderr / self.mean if self.mean > 0 and not math.isnan(self.stderr) else math.inf


@dataclass
class SpeedOfLight:
    """How close a case is to the hardware limit of the device it ran on."""

    time_ns: float | None      # max(memory time, compute time, launch floor); None when the device is unknown
    bound: str | None          # "memory" | "compute" | "launch" | None
    percent: float | None      # 100 * sol / measured mean
    bytes: int = 0
    flops: int = 0
    note: str = ""             # e.g. "unknown GPU 'X': no peak numbers"


@dataclass
class CaseResult:
    kind: str                  # "test" | "benchmark" | "leaderboard"
    spec: dict[str, Any]
    verdict: str
    message: str = ""
    stats: Stats | None = None
    baseline_us: float | None = None   # the task's published baseline for this shape, when it has one
    sol: SpeedOfLight | None = None
    extra: dict[str, Any] = field(default_factory=dict)   # see CASE_EXTRA_KEYS
    warnings: list[str] = field(default_factory=list)


CASE_EXTRA_KEYS = """What ``CaseResult.extra`` may carry (all optional; informational, never ranked):

kernel_only_ns           device time per call of the submission's kernels on a cold L2, without the host's
                         launch overhead; None when it could not be measured (then kernel_only_note says why)
kernel_only_method       "cuda_graph": (t[n x (flush + call)] - t[n x flush]) / n from CUDA graph replays
                         behind the launch gate: the call's device window, the device's dispatch gap around
                         each kernel included; "profiler": the profiler's kernel sum of eager calls, used
                         when graph capture failed
kernel_only_nodes_per_call  kernel, copy and memset nodes per call in the captured graph
kernel_only_note         why kernel_only_ns is missing or what it fell back from ("" when all went well)
kernel_only_spread_pct   (max - min) / median of the graph replays, in percent
launch_overhead_ns       competition mean (stats.mean) minus kernel_only_ns
unhidden_host_ns         median per call of the host's launch time that the launch gate did not hide (all of
                         it without a gate); above kernel_only_ns the GPU waited for the host, and a
                         "host-bound" warning says so. None on the CPU
profiler_kernel_ns       --verify-timing: sum of the submission's device operation durations per call (CUPTI
                         via torch.profiler, one replay of the same two graphs, the flushes excluded)
profiler_window_ns       --verify-timing: the same replay's window per call (block period less flush period):
                         what kernel_only_ns measures, seen by the profiler
profiler_note            why profiler_kernel_ns is missing, or (eager fallback) device events it could not attribute
kernel_only_vs_profiler_pct  --verify-timing: 100 * (kernel_only_ns - profiler_kernel_ns) / profiler_kernel_ns
profiler_kernels_per_call  --verify-timing: device kernels (and copies, memsets) per call
device_clock_excess_ns   GPU behind the launch gate: median per call of (the device clock's window from just
                         before the start event to just after the end event - the event time), less the same
                         for an honest trivial call; about 0 when the events were left alone (above
                         3 us, or 20 us where the gate opened by itself for most samples, the case is
                         rejected in ranked runs: plausibility.implausible). None when not read
clocks_before, clocks_after  NVML readings just before the first and after the last timed call:
                         sm_mhz, mem_mhz, temp_c, power_w, throttle_mask, throttle (names); or only a note
profile_table            profile mode: the torch profiler's table
traceback                the submission's traceback when it raised
"""


@dataclass
class DeviceInfo:
    name: str
    kind: str                  # "cuda" | "rocm" | "cpu"
    driver: str | None = None
    torch: str | None = None
    triton: str | None = None
    capability: str | None = None
    sm_count: int | None = None
    l2_bytes: int | None = None
    memory_bytes: int | None = None


@dataclass
class SubmissionInfo:
    path: str
    sha256: str
    name: str


@dataclass
class RunResult:
    task: str
    submission: SubmissionInfo
    mode: str
    device: DeviceInfo
    verdict: str
    message: str = ""
    score_us: float | None = None      # the task's ranking rule over benchmark means; only when all passed
    cases: list[CaseResult] = field(default_factory=list)
    started_at: str = ""               # ISO 8601, UTC
    finished_at: str = ""
    wall_s: float | None = None
    harness_version: str = ""
    complete: bool = True              # False when the run was interrupted
    stdout: str = ""                   # the submission's captured output, capped
    stderr: str = ""
    warnings: list[str] = field(default_factory=list)
    findings: list[dict[str, Any]] = field(default_factory=list)   # static scan findings
    score_ci_us: list[float] | None = None   # bootstrap 95% interval of score_us [low, high]; optional
    phases_s: dict[str, float] | None = None  # where the run's wall time went (worker start, generate, ...)
    timing_method: str = ""            # how samples were taken: launch gate (host time hidden) or strict
    sandbox: dict[str, Any] | None = None   # what confined the worker (harness.worker.sandbox); optional
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return json_safe(dataclasses.asdict(self))

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True, allow_nan=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunResult":
        d = dict(d)
        version = d.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(f"result has schema_version {version!r}; this harness reads {SCHEMA_VERSION}")
        d["submission"] = SubmissionInfo(**d["submission"])
        d["device"] = DeviceInfo(**d["device"])
        cases = []
        for c in d.get("cases", []):
            c = dict(c)
            if c.get("stats") is not None:
                c["stats"] = Stats(**c["stats"])
            if c.get("sol") is not None:
                c["sol"] = SpeedOfLight(**c["sol"])
            cases.append(CaseResult(**c))
        d["cases"] = cases
        return cls(**d)

    @classmethod
    def from_json(cls, text: str) -> "RunResult":
        return cls.from_dict(json.loads(text))

    def benchmark_cases(self) -> list[CaseResult]:
        return [c for c in self.cases if c.kind in ("benchmark", "leaderboard")]


def json_safe(obj):
    """JSON cannot carry NaN/inf: store them as null."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


_SHAPE_KEY_ORDER = {"m": 0, "n": 1, "k": 2, "l": 3}


def shape_label(spec: dict[str, Any]) -> str:
    """A short name for a benchmark case: its spec without the seed, e.g. 'm=4 n=2880 k=512'."""
    keys = sorted((k for k in spec if k != "seed"), key=lambda k: (_SHAPE_KEY_ORDER.get(k, 99), k))
    return " ".join(f"{k}={spec[k]}" for k in keys) or "case"
