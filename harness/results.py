"""Result dataclasses and their versioned JSON form.

Everything the harness measures ends up in a :class:`RunResult`. Raw samples are kept in
nanoseconds, unrounded; rounding happens only when formatting a table.

Schema history (``SCHEMA_VERSION``):
  1 - first version: run, device, cases with stats (samples_ns), score_us, SOL per case.
      Later additions, all optional (absent in older files, read as None): RunResult.score_ci_us,
      RunResult.phases_s, RunResult.stdout_cut_bytes / stderr_cut_bytes (absent: read as 0);
      CaseResult.extra keys kernel_only_* / profiler_* / clocks_* (issue #7),
      written from the records of harness.extras.
  2 - blocks (issue #50): RunResult.blocks (one BlockRecord per block: seed index, shape order, per-shape
      means, block score, GPU clocks, throttled flag) and RunResult.score_interval (the interval from the
      block scores, with the rule's version); score_ci_us is then that interval's [low, high]. Version 1
      files are still read (blocks empty, score_interval None).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from harness.extras import Clocks, DeviceClockCheck, KernelOnlyFigures, ProfilerCheck

SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)

# Verdicts, from best to worst. A run's verdict is the worst verdict among its cases.
PASS = "pass"  # output checked and correct (and timed, for benchmark cases)
FAIL = "fail"  # wrong output (values, NaN/inf, shape, dtype, device)
ERROR = "error"  # could not import, compile or run (exception, crash, missing module, OOM)
TIMEOUT = "timeout"  # ran past the task's timeout for the mode
REJECTED = "rejected"  # refused by policy or caught tampering
NOT_RUN = "not_run"  # never reached because an earlier case ended the worker
VERDICTS = (PASS, FAIL, ERROR, TIMEOUT, REJECTED, NOT_RUN)
_SEVERITY = {PASS: 0, NOT_RUN: 1, FAIL: 2, ERROR: 3, TIMEOUT: 4, REJECTED: 5}


def worst_verdict(verdicts: Iterable[str]) -> str:
    listed = list(verdicts)
    if not listed:
        return ERROR
    return max(listed, key=_SEVERITY.__getitem__)


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
    def from_samples(cls, samples_ns: Iterable[float]) -> Stats:
        xs = [float(x) for x in samples_ns]
        if not xs:
            raise ValueError("Stats need at least one sample")
        n = len(xs)
        mean = math.fsum(xs) / n
        std = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else math.nan
        stderr = std / math.sqrt(n) if n > 1 else math.nan
        s = sorted(xs)
        median = s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])
        return cls(samples_ns=xs, runs=n, mean=mean, std=std, stderr=stderr, median=median, min=s[0], max=s[-1])

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Stats:
        """From the JSON form, where NaN (the std of a single sample) was stored as null."""
        nan = float("nan")
        fields: dict[str, Any] = {
            k: (nan if v is None and k not in ("samples_ns", "runs") else v) for k, v in d.items()
        }
        return cls(**fields)

    @property
    def relative_error(self) -> float:
        return self.stderr / self.mean if self.mean > 0 and not math.isnan(self.stderr) else math.inf


@dataclass
class SpeedOfLight:
    """How close a case is to the hardware limit of the device it ran on."""

    time_ns: float | None  # max(memory time, compute time, launch floor); None when the device is unknown
    bound: str | None  # "memory" | "compute" | "launch" | None
    percent: float | None  # 100 * sol / measured mean
    bytes: int = 0
    flops: int = 0
    note: str = ""  # e.g. "unknown GPU 'X': no peak numbers"


@dataclass
class CaseResult:
    kind: str  # "test" | "benchmark" | "leaderboard"
    spec: dict[str, Any]
    verdict: str
    message: str = ""
    stats: Stats | None = None
    baseline_us: float | None = None  # the task's published baseline for this shape, when it has one
    sol: SpeedOfLight | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # the records of harness.extras, flat (see there)
    warnings: list[str] = field(default_factory=list)

    def record(self, *records: Any) -> None:
        """Writes records of ``harness.extras`` into ``extra``, under their JSON keys."""
        for rec in records:
            self.extra.update(rec.to_extra())

    @property
    def kernel_only(self) -> KernelOnlyFigures | None:
        return KernelOnlyFigures.from_extra(self.extra)

    @property
    def profiler_check(self) -> ProfilerCheck | None:
        return ProfilerCheck.from_extra(self.extra)

    @property
    def clocks(self) -> Clocks | None:
        return Clocks.from_extra(self.extra)

    @property
    def device_clock(self) -> DeviceClockCheck | None:
        return DeviceClockCheck.from_extra(self.extra)


@dataclass
class DeviceInfo:
    name: str
    kind: str  # "cuda" | "rocm" | "cpu"
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
class BlockRecord:
    """One block of a run's timed cases: fresh inputs, its own order of the shapes, and (unless the run
    was given --same-worker) a fresh worker."""

    index: int
    seed_index: int  # the block's inputs derive from (secret, case seed, seed_index * BLOCK_STRIDE + i)
    order: list[int]  # the shapes' indices (task order numbers) in the order this block timed them
    shape_means_us: list[float | None]  # per shape, in task order (None: not timed in this block)
    samples: list[int]  # per shape, in task order
    score_us: float | None  # the task's rule over this block's per-shape means (None unless all timed)
    clocks_before: dict[str, Any] = field(default_factory=dict)  # NVML readings, or {"note": why not}
    clocks_after: dict[str, Any] = field(default_factory=dict)
    throttled: list[str] = field(default_factory=list)  # throttle reasons seen in this block (empty: none)
    wall_s: float | None = None
    fresh_worker: bool = True  # False: this block ran in the worker of the block before (--same-worker)
    warmup_chunks: int = 0  # untimed chunks of fresh inputs before each case's timed ones (--warmup-chunks)
    lead_in: str = "chunk"  # which chunks got the lead-in (warm-up calls, heat): RunOptions.lead_in


@dataclass
class ScoreInterval:
    """The score's interval: from the blocks (``method`` "blocks-t"), or from one process's samples
    ("bootstrap-samples", too narrow for a rerun) when the run had a single block."""

    low_us: float
    high_us: float
    method: str
    blocks: int
    confidence: float = 0.95
    df: float | None = None
    se_log: float | None = None
    spread: float | None = None  # between-block sd of log block scores (about their CV)
    rule_version: int = 1
    run_sd: float | None = None  # the device and task's measured between-run sd it adds (rule 2; 0: none)

    @property
    def from_blocks(self) -> bool:
        return self.method in ("blocks-t", "blocks-t+run")

    def source_text(self) -> str:
        """Where the interval comes from, in words (``blocks`` blocks, and any between-run sd added)."""
        if not self.from_blocks:
            return "one process's samples: a rerun can differ by more"
        if not self.run_sd:
            return f"{self.blocks} blocks"
        return f"{self.blocks} blocks and the {100 * self.run_sd:.2f}% between-run spread measured for this task on such a GPU"


@dataclass
class RunResult:
    task: str
    submission: SubmissionInfo
    mode: str
    device: DeviceInfo
    verdict: str
    message: str = ""
    score_us: float | None = None  # the task's ranking rule over benchmark means; only when all passed
    cases: list[CaseResult] = field(default_factory=list)
    started_at: str = ""  # ISO 8601, UTC
    finished_at: str = ""
    wall_s: float | None = None
    harness_version: str = ""
    complete: bool = True  # False when the run was interrupted
    stdout: str = ""  # the submission's captured output, capped (its head and tail, a marker between)
    stderr: str = ""
    stdout_cut_bytes: int = 0  # how much of the submission's stdout the cap left out (0: all of it kept)
    stderr_cut_bytes: int = 0
    warnings: list[str] = field(default_factory=list)
    findings: list[dict[str, Any]] = field(default_factory=list)  # static scan findings
    score_ci_us: list[float] | None = None  # 95% interval of score_us [low, high] (see score_interval); optional
    phases_s: dict[str, float] | None = None  # where the run's wall time went (worker start, generate, ...)
    timing_method: str = ""  # how samples were taken: launch gate (host time hidden) or strict
    sandbox: dict[str, Any] | None = None  # what confined the worker (harness.worker.sandbox); optional
    blocks: list[BlockRecord] = field(default_factory=list)  # schema 2: the timed cases' blocks
    score_interval: ScoreInterval | None = None  # schema 2: the interval of score_us and how it was made
    # the first calls made ahead in parallel workers (harness.engine.compile_ahead.AheadRecord); optional
    compile_ahead: dict[str, Any] | None = None
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return json_safe(dataclasses.asdict(self))

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True, allow_nan=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunResult:
        d = dict(d)
        version = d.get("schema_version")
        if version not in READABLE_VERSIONS:
            raise ValueError(
                f"result has schema_version {version!r}; this harness reads {', '.join(map(str, READABLE_VERSIONS))}"
            )
        d["schema_version"] = SCHEMA_VERSION
        d["blocks"] = [BlockRecord(**b) for b in d.get("blocks") or []]
        if d.get("score_interval") is not None:
            d["score_interval"] = ScoreInterval(**d["score_interval"])
        d["submission"] = SubmissionInfo(**d["submission"])
        d["device"] = DeviceInfo(**d["device"])
        cases = []
        for c in d.get("cases", []):
            c = dict(c)
            if c.get("stats") is not None:
                c["stats"] = Stats.from_dict(c["stats"])
            if c.get("sol") is not None:
                c["sol"] = SpeedOfLight(**c["sol"])
            cases.append(CaseResult(**c))
        d["cases"] = cases
        return cls(**d)

    @classmethod
    def from_json(cls, text: str) -> RunResult:
        return cls.from_dict(json.loads(text))

    def benchmark_cases(self) -> list[CaseResult]:
        return [c for c in self.cases if c.kind in ("benchmark", "leaderboard")]


def json_safe(obj: Any) -> Any:
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
