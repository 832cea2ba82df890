"""The worker's replies, one dataclass each, decoded and validated once, where they arrive in the parent.

The worker runs untrusted code, so every reply is treated as forged until decoded: a field that is
missing, of the wrong type, or inconsistent with its request (samples or outputs not as asked, tensor
bytes that do not match their shape) raises :class:`harness.protocol.ProtocolError`, which ends the
case as rejected (``harness.engine.session``). Past the decoder the parent reads typed fields only.

Every reply but :class:`Ready` is either the kind asked for or :class:`Failed` (``"ok": false``: the
submission raised, or the worker could not do what was asked); ``reply.ok`` tells them apart and
``reply.integrity`` carries the worker's own tamper report and thread count. This module imports no
part of the parent: the worker may use it too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from harness.protocol import TIMING_SERIES, TIMING_STEPS, ProtocolError, accepts_dtype, dtype_itemsize
from harness.requests import HELD_STEP

if TYPE_CHECKING:
    import torch

_REQUIRED = object()


def _field(
    header: dict[str, Any], key: str, valid: Callable[[object], bool], what: str, default: Any = _REQUIRED
) -> Any:
    if key not in header:
        if default is _REQUIRED:
            raise ProtocolError(f"{what} without its {key!r} field")
        return default
    value = header[key]
    if not valid(value):
        raise ProtocolError(f"{what} with a malformed {key!r} field ({type(value).__name__})")
    return value


def _number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _count(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _int64(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and -(2**63) <= x < 2**63


def _text(x: object) -> bool:
    return isinstance(x, str)


def _flag(x: object) -> bool:
    return isinstance(x, bool)


def _optional_number(x: object) -> bool:
    return x is None or _number(x)


def _list_of(valid: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda x: isinstance(x, list) and all(valid(v) for v in x)


def _counts(x: object) -> bool:
    return isinstance(x, dict) and all(isinstance(k, str) and _count(v) for k, v in x.items())


def _report(x: object) -> bool:
    """A flat report of names to flags, counts and texts (the sandbox's)."""
    return isinstance(x, dict) and all(
        isinstance(k, str) and (isinstance(v, (bool, str)) or _count(v)) for k, v in x.items()
    )


def _no_payloads(payloads: list, what: str) -> None:
    if payloads:
        raise ProtocolError(f"{what} carrying {len(payloads)} tensor frame(s) it does not announce")


@dataclass(frozen=True)
class Integrity:
    """The worker's integrity report: harness or torch objects the submission replaced, and its Python
    thread count (None when the reply carries none: a failure before the report could be made)."""

    tampered: tuple[str, ...] = ()
    threads: int | None = None
    l2_persisting: dict = field(default_factory=dict)  # harness.worker.persisting_l2 report ({} off CUDA)

    @classmethod
    def decode(cls, header: dict, what: str, required: bool) -> Integrity:
        default = _REQUIRED if required else None
        tampered = _field(header, "tampered", _list_of(_text), what, default)
        threads = _field(header, "threads", _count, what, default)
        l2 = _field(header, "l2_persisting", _counts, what, {})
        return cls(tuple(tampered or ()), threads, dict(l2))


@dataclass(frozen=True)
class Ready:
    """The worker's first message, its calibration, sent before the submission is imported (so no
    submission code can have written it): figures that are not finite numbers read as unknown."""

    gap_ns: float = 0.0
    window_gap_ns: dict = field(default_factory=dict)  # "held" / "opened" -> ns or None
    sandbox: dict | None = None  # what confined the worker (harness.worker.sandbox); None: no report
    startup_s: dict = field(default_factory=dict)  # seconds per start-up step, as the worker reports them

    @classmethod
    def decode(cls, header: dict, payloads: list) -> Ready:
        _no_payloads(payloads, "the worker's ready message")
        window = header.get("window_gap_ns")
        window = window if isinstance(window, dict) else {}
        sandbox = header.get("sandbox")
        return cls(
            gap_ns=_finite_or_none(header.get("gap_ns")) or 0.0,
            window_gap_ns={regime: _finite_or_none(window.get(regime)) for regime in ("held", "opened")},
            sandbox=dict(sandbox) if isinstance(sandbox, dict) and _report(sandbox) else None,
            startup_s=_step_seconds(header.get("startup_s"), STARTUP_STEPS),
        )


STARTUP_STEPS = (
    "isolate",
    "imports",
    "cuda_context",
    "own_kernels",
    HELD_STEP,
    "sampler",
    "calibrate",
    "task",
)  # in order


def _step_seconds(steps: object, names: tuple[str, ...]) -> dict[str, float]:
    """The known steps with a finite, non-negative number of seconds; anything else is dropped (only
    diagnostics: the worker reports them, so nothing is decided from them)."""
    if not isinstance(steps, dict):
        return {}
    out = {name: _finite_or_none(steps.get(name)) for name in names}
    return {name: s for name, s in out.items() if s is not None and s >= 0}


def _finite_or_none(x: object) -> float | None:
    return float(x) if isinstance(x, (int, float)) and _number(x) else None


@dataclass(frozen=True)
class Failed:
    ok: ClassVar[bool] = False
    error: str
    integrity: Integrity
    error_type: str = ""
    traceback: str = ""  # the submission's own frames, with the user's file name
    traceback_full: str = ""  # every frame (shown with --verbose)

    @classmethod
    def decode(cls, header: dict, payloads: list) -> Failed:
        what = "a failure reply"
        _no_payloads(payloads, what)
        return cls(
            error=_field(header, "error", _text, what),
            integrity=Integrity.decode(header, what, False),
            error_type=_field(header, "error_type", _text, what, ""),
            traceback=_field(header, "traceback", _text, what, ""),
            traceback_full=_field(header, "traceback_full", _text, what, ""),
        )


@dataclass(frozen=True)
class Loaded:
    """The submission is imported; how its samples are taken."""

    ok: ClassVar[bool] = True
    timing_method: str
    gated: bool
    integrity: Integrity

    @classmethod
    def decode(cls, header: dict, payloads: list) -> Loaded:
        what = "an import reply"
        _no_payloads(payloads, what)
        return cls(
            _field(header, "timing_method", _text, what)[:300],
            _field(header, "gated", _flag, what),
            Integrity.decode(header, what, True),
        )


@dataclass(frozen=True)
class OutputsShared:
    """The worker mapped the shared output region (``harness.shared_outputs``): ``used``, whether its
    replies place their outputs there (not on a GPU that could not page-lock it); ``pinned``: page-locked."""

    ok: ClassVar[bool] = True
    used: bool
    pinned: bool
    integrity: Integrity

    @classmethod
    def decode(cls, header: dict, payloads: list) -> OutputsShared:
        what = "a reply to the shared output region"
        _no_payloads(payloads, what)
        used, pinned = _field(header, "used", _flag, what), _field(header, "pinned", _flag, what)
        return cls(used, pinned, Integrity.decode(header, what, True))


@dataclass(frozen=True)
class Generated:
    """The worker generated the inputs asked for: each one's fingerprint (``protocol.input_fingerprints``)."""

    ok: ClassVar[bool] = True
    fingerprints: list
    integrity: Integrity

    @classmethod
    def decode(cls, header: dict, payloads: list, n_inputs: int | None = None) -> Generated:
        what = "an input-generation reply"
        _no_payloads(payloads, what)
        fingerprints = _field(header, "fingerprints", _list_of(_list_of(_int64)), what)
        if n_inputs is not None and len(fingerprints) != n_inputs:
            raise ProtocolError(f"{what} with {len(fingerprints)} fingerprints for {n_inputs} inputs")
        return cls(fingerprints, Integrity.decode(header, what, True))


@dataclass(frozen=True)
class Output:
    """One output of the submission: a tensor's dtype, shape, device and bytes (checked to match), or
    ``kind`` "object" with its type name. A tensor of a dtype no task uses has no checked bytes."""

    kind: str  # "tensor" | "object"
    type: str = ""
    dtype: str = ""
    shape: tuple[int, ...] = ()
    device: str = ""
    raw: torch.Tensor | None = None  # uint8, the tensor's bytes (harness.channel.FrameReader.tensor)

    @property
    def usable(self) -> bool:
        return self.kind == "tensor" and accepts_dtype(self.dtype)


def decode_outputs(header: dict, payloads: list, what: str) -> list[Output]:
    metas = _field(header, "outputs", _list_of(lambda m: isinstance(m, dict)), what)
    if sum(m.get("kind") == "tensor" for m in metas) != len(payloads):
        raise ProtocolError(f"{what} whose outputs do not match the data it carries")
    outs, frames = [], iter(payloads)
    for meta in metas:
        kind = _field(meta, "kind", lambda k: k in ("tensor", "object"), f"{what}'s output")
        if kind == "object":
            outs.append(Output("object", type=_field(meta, "type", _text, f"{what}'s output")))
            continue
        dtype = _field(meta, "dtype", _text, f"{what}'s output")
        shape = tuple(_field(meta, "shape", _list_of(_count), f"{what}'s output"))
        device = _field(meta, "device", _text, f"{what}'s output")
        raw = next(frames)
        if accepts_dtype(dtype) and math.prod(shape) * dtype_itemsize(dtype) != raw.numel():
            raise ProtocolError(f"output bytes ({raw.numel()}) do not match shape {list(shape)} of {dtype}")
        outs.append(Output("tensor", dtype=dtype, shape=shape, device=device, raw=raw))
    return outs


@dataclass(frozen=True)
class Called:
    """One untimed call (a test): its single output."""

    ok: ClassVar[bool] = True
    output: Output
    integrity: Integrity

    @classmethod
    def decode(cls, header: dict, payloads: list) -> Called:
        what = "a call reply"
        outputs = decode_outputs(header, payloads, what)
        if len(outputs) != 1:
            raise ProtocolError(f"{what} with {len(outputs)} outputs instead of 1")
        return cls(outputs[0], Integrity.decode(header, what, True))


@dataclass(frozen=True)
class WarmedUp:
    ok: ClassVar[bool] = True
    calls: int
    ms: float
    integrity: Integrity

    @classmethod
    def decode(cls, header: dict, payloads: list) -> WarmedUp:
        what = "a warm-up reply"
        _no_payloads(payloads, what)
        return cls(
            _field(header, "calls", _count, what),
            _field(header, "ms", _number, what),
            Integrity.decode(header, what, True),
        )


@dataclass(frozen=True)
class Timed:
    """A chunk of timed calls: per sample its event time, its tail (host time from the end event seen
    complete to the device idle), device-clock window (or None), whether the launch gate held, the host
    time nothing hid (or None), a second synchronize's host time (or None), the device clock's tail (or
    None); the outputs asked for."""

    ok: ClassVar[bool] = True
    samples_ns: list
    tail_ns: list
    window_ns: list
    gate_held: list
    unhidden_host_ns: list
    idle_sync_ns: list
    device_tail_ns: list
    gate_misses: int
    outputs: list
    integrity: Integrity
    steps_s: dict = field(default_factory=dict)  # where the worker's time went, as it reports it (TIMING_STEPS)

    @classmethod
    def decode(cls, header: dict, payloads: list, n_samples: int, n_outputs: int) -> Timed:
        """Exactly ``n_samples`` samples and ``n_outputs`` outputs, as asked: anything else is a forgery
        (an honest worker cannot produce it), and fewer outputs would leave timed calls unchecked."""
        what = "a timing reply"
        times = _list_of(lambda x: isinstance(x, (int, float)) and _number(x) and x >= 0)
        valid = {
            "samples_ns": times,
            "tail_ns": times,
            "window_ns": _list_of(_optional_number),
            "gate_held": _list_of(_flag),
            "unhidden_host_ns": _list_of(_optional_number),
            "idle_sync_ns": _list_of(_optional_number),
            "device_tail_ns": _list_of(_optional_number),
        }
        series = {k: _field(header, k, valid[k], what) for k in TIMING_SERIES}
        outputs = decode_outputs(header, payloads, what)
        if any(len(v) != n_samples for v in series.values()) or len(outputs) != n_outputs:
            raise ProtocolError(
                f"{what} that does not match its request ({n_samples} samples and {n_outputs} outputs asked for)"
            )
        return cls(
            **series,
            gate_misses=_field(header, "gate_misses", _count, what),
            outputs=outputs,
            integrity=Integrity.decode(header, what, True),
            steps_s=_step_seconds(header.get("steps_s"), TIMING_STEPS),
        )


@dataclass(frozen=True)
class Profiled:
    ok: ClassVar[bool] = True
    table: str
    integrity: Integrity

    @classmethod
    def decode(cls, header: dict, payloads: list) -> Profiled:
        what = "a profile reply"
        _no_payloads(payloads, what)
        return cls(_field(header, "table", _text, what), Integrity.decode(header, what, True))


@dataclass(frozen=True)
class GraphFigures:
    """Kernel-only time from CUDA graph replays (``harness.worker.kernel_only.graph_kernel_time``)."""

    ns: float | None
    note: str = ""
    spread_pct: float | None = None
    nodes_per_call: float | None = None


@dataclass(frozen=True)
class ProfilerFigures:
    """The profiler's kernel sum per call (CUPTI); ``note`` None when the worker gave none."""

    ns: float | None
    note: str | None = None
    kernels_per_call: float | None = None
    window_ns: float | None = None


@dataclass(frozen=True)
class KernelOnlyMeasured:
    """``poisoned``: the CUDA context broke (a failed capture); the worker must be replaced."""

    ok: ClassVar[bool] = True
    graph: GraphFigures
    profiler: ProfilerFigures | None
    poisoned: bool
    integrity: Integrity

    @classmethod
    def decode(cls, header: dict, payloads: list) -> KernelOnlyMeasured:
        what = "a kernel-only reply"
        _no_payloads(payloads, what)
        graph = _field(header, "graph", lambda g: isinstance(g, dict), what)
        prof = _field(header, "profiler", lambda p: p is None or isinstance(p, dict), what, None)
        g, p = f"{what}'s graph figures", f"{what}'s profiler figures"
        figures = GraphFigures(
            ns=_field(graph, "ns", _optional_number, g, None),
            note=_field(graph, "note", lambda n: n is None or _text(n), g, None) or "",
            spread_pct=_field(graph, "spread_pct", _optional_number, g, None),
            nodes_per_call=_field(graph, "nodes_per_call", _optional_number, g, None),
        )
        profiler = (
            None
            if prof is None
            else ProfilerFigures(
                ns=_field(prof, "ns", _optional_number, p, None),
                note=_field(prof, "note", _text, p, None),
                kernels_per_call=_field(prof, "kernels_per_call", _optional_number, p, None),
                window_ns=_field(prof, "window_ns", _optional_number, p, None),
            )
        )
        return cls(figures, profiler, _field(header, "poisoned", _flag, what), Integrity.decode(header, what, True))


def decode_reply(header: dict[str, Any], payloads: list[torch.Tensor], expected: Any, **expect: Any) -> Any:
    """The reply as ``expected`` (a class above) or as :class:`Failed`; raises ProtocolError."""
    ok = _field(header, "ok", _flag, "a reply")
    if not ok:
        return Failed.decode(header, payloads)
    return expected.decode(header, payloads, **expect)
