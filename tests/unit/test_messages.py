"""Every worker reply type decoded from its wire form, and every malformed field rejected with the
one protocol error (no process is started: the headers are what ``harness.worker.main`` sends)."""

from __future__ import annotations

import math

import pytest
import torch

from harness import protocol
from harness.messages import (
    Called,
    Failed,
    Generated,
    KernelOnlyMeasured,
    Loaded,
    OutputsShared,
    Profiled,
    Ready,
    Timed,
    WarmedUp,
    decode_reply,
)
from harness.protocol import ProtocolError

NAN, INF = float("nan"), float("inf")
INTEGRITY = {"tampered": [], "threads": 1}
TENSOR = torch.arange(6, dtype=torch.float32).reshape(2, 3)
TENSOR_META = protocol.describe_output(TENSOR)  # what the worker announces for it
TENSOR_RAW = TENSOR.reshape(-1).view(torch.uint8).clone()  # a tensor frame as the parent reads it
OBJECT_META = protocol.describe_output(None)
SERIES = {
    "samples_ns": [1.0, 2.0],
    "tail_ns": [3.0, 4.0],
    "window_ns": [None, 2.5],
    "gate_held": [False, True],
    "unhidden_host_ns": [None, 0.0],
    "idle_sync_ns": [None, 2.0],
    "device_tail_ns": [None, 1.5],
}

# (reply class, the honest header, its payloads, what the decoder checks it against)
GOOD = {
    Loaded: ({"ok": True, "timing_method": "launch gate", "gated": True, **INTEGRITY}, [], {}),
    Generated: ({"ok": True, "fingerprints": [[12, -3], []], **INTEGRITY}, [], {"n_inputs": 2}),
    Called: ({"ok": True, "outputs": [TENSOR_META], **INTEGRITY}, [TENSOR_RAW], {}),
    WarmedUp: ({"ok": True, "calls": 3, "ms": 101.5, **INTEGRITY}, [], {}),
    Timed: (
        {"ok": True, **SERIES, "gate_misses": 0, "outputs": [TENSOR_META, OBJECT_META], **INTEGRITY},
        [TENSOR_RAW],
        {"n_samples": 2, "n_outputs": 2},
    ),
    Profiled: ({"ok": True, "table": "Name  Self CPU", **INTEGRITY}, [], {}),
    OutputsShared: ({"ok": True, "used": True, "pinned": False, **INTEGRITY}, [], {}),
    KernelOnlyMeasured: (
        {
            "ok": True,
            "graph": {
                "ns": 5e3,
                "note": "",
                "poisoned": False,
                "spread_pct": 1.5,
                "nodes_per_call": 2.0,
                "flush_ns": 9.0,
            },
            "profiler": {"ns": 4.9e3, "note": "", "kernels_per_call": 2.0, "window_ns": 5.1e3},
            "poisoned": False,
            **INTEGRITY,
        },
        [],
        {},
    ),
}

# (reply class, field path, a malformed value): each must be rejected
MALFORMED = (
    [
        (Loaded, "timing_method", 3),
        (Loaded, "gated", "yes"),
        (Loaded, "gated", 1),
        (Generated, "fingerprints", [[1.5]]),
        (Generated, "fingerprints", [3]),
        (Generated, "fingerprints", "x"),
        (Generated, "fingerprints", [[2**63]]),  # a fingerprint is an int64 sum (negative ones too)
        (Generated, "fingerprints", [[True]]),
        (Generated, "fingerprints", [[1]]),  # one fingerprint for 2 inputs
        (Called, "outputs", {}),
        (Called, "outputs", [3]),
        (Called, "outputs", []),
        (Called, "outputs", [TENSOR_META, TENSOR_META]),  # 2 tensors, 1 frame
        (Called, "outputs", [dict(TENSOR_META, dtype=5)]),
        (Called, "outputs", [dict(TENSOR_META, shape=[2, -3])]),
        (Called, "outputs", [dict(TENSOR_META, shape="2x3")]),
        (Called, "outputs", [dict(TENSOR_META, shape=[3, 3])]),  # bytes for 2x3 only
        (Called, "outputs", [dict(TENSOR_META, dtype="float16")]),  # wrong byte count
        (Called, "outputs", [dict(TENSOR_META, device=None)]),
        (WarmedUp, "calls", -1),
        (WarmedUp, "calls", 2.5),
        (WarmedUp, "ms", NAN),
        (WarmedUp, "ms", "1"),
        (Timed, "samples_ns", [1.0]),
        (Timed, "samples_ns", [1.0, NAN]),
        (Timed, "samples_ns", [-1.0, 2.0]),
        (Timed, "samples_ns", [True, 2.0]),
        (Timed, "tail_ns", "x"),
        (Timed, "tail_ns", [3.0, INF]),
        (Timed, "window_ns", [None]),
        (Timed, "window_ns", ["x", 1.0]),
        (Timed, "gate_held", [1, 0]),
        (Timed, "unhidden_host_ns", None),
        (Timed, "unhidden_host_ns", [INF, 1.0]),
        (Timed, "idle_sync_ns", [1.0]),
        (Timed, "idle_sync_ns", [INF, 1.0]),
        (Timed, "device_tail_ns", [1.0]),
        (Timed, "device_tail_ns", ["x", 1.0]),
        (Timed, "gate_misses", -2),
        (Timed, "outputs", [TENSOR_META]),  # 1 output of 2 asked
        (Profiled, "table", None),
        (KernelOnlyMeasured, "graph", None),
        (KernelOnlyMeasured, "graph.ns", "5"),
        (KernelOnlyMeasured, "graph.ns", INF),
        (KernelOnlyMeasured, "graph.note", 3),
        (KernelOnlyMeasured, "graph.spread_pct", [1]),
        (KernelOnlyMeasured, "graph.nodes_per_call", "2"),
        (KernelOnlyMeasured, "profiler", "x"),
        (KernelOnlyMeasured, "profiler.ns", NAN),
        (KernelOnlyMeasured, "profiler.note", 1),
        (KernelOnlyMeasured, "profiler.kernels_per_call", "2"),
        (KernelOnlyMeasured, "profiler.window_ns", {}),
        (KernelOnlyMeasured, "poisoned", None),
        (OutputsShared, "pinned", 1),
        (OutputsShared, "used", "yes"),
    ]
    + [(cls, "tampered", bad) for cls in GOOD for bad in ("x", [3], None)]
    + [(cls, "threads", bad) for cls in GOOD for bad in (-1, 1.0, "2", None)]
    + [(cls, "ok", bad) for cls in GOOD for bad in (1, "true", None)]
)

REQUIRED = {
    Loaded: ["timing_method", "gated"],
    Generated: ["fingerprints"],
    Called: ["outputs"],
    WarmedUp: ["calls", "ms"],
    Timed: [*SERIES, "gate_misses", "outputs"],
    Profiled: ["table"],
    KernelOnlyMeasured: ["graph", "poisoned"],
    OutputsShared: ["used", "pinned"],
}


def _decode(cls, header, payloads=None, expect=None):
    _good_header, good_payloads, good_expect = GOOD[cls]
    return decode_reply(
        header, good_payloads if payloads is None else payloads, cls, **(good_expect if expect is None else expect)
    )


def _with(header: dict, path: str, value):
    header = {k: (dict(v) if isinstance(v, dict) else v) for k, v in header.items()}
    *parents, key = path.split(".")
    target = header
    for p in parents:
        target = target[p]
    target[key] = value
    return header


@pytest.mark.parametrize("cls", list(GOOD), ids=lambda c: c.__name__)
def test_an_honest_reply_decodes_to_its_type(cls):
    header, _, _ = GOOD[cls]
    reply = _decode(cls, header)
    assert type(reply) is cls and reply.ok and reply.integrity.tampered == () and reply.integrity.threads == 1


def test_decoded_fields():
    loaded = _decode(Loaded, dict(GOOD[Loaded][0], timing_method="m" * 400))
    assert (loaded.timing_method, loaded.gated) == ("m" * 300, True)
    assert _decode(Generated, GOOD[Generated][0]).fingerprints == [[12, -3], []]
    called = _decode(Called, GOOD[Called][0])
    out = called.output
    assert (out.kind, out.dtype, out.shape, out.device, out.usable) == ("tensor", "float32", (2, 3), "cpu", True)
    assert out.raw is not None and torch.equal(out.raw, TENSOR_RAW)
    rebuilt = protocol.rebuild_tensor(out.dtype, out.shape, out.raw, out.device, torch.device("cpu"))
    assert torch.equal(rebuilt, TENSOR)
    timed = _decode(Timed, GOOD[Timed][0])
    assert (timed.samples_ns, timed.window_ns, timed.gate_held, timed.gate_misses) == (
        [1.0, 2.0],
        [None, 2.5],
        [False, True],
        0,
    )
    assert [o.kind for o in timed.outputs] == ["tensor", "object"] and timed.outputs[1].type == "NoneType"
    k = _decode(KernelOnlyMeasured, GOOD[KernelOnlyMeasured][0])
    assert (k.graph.ns, k.graph.spread_pct, k.graph.nodes_per_call, k.profiler.window_ns, k.poisoned) == (
        5e3,
        1.5,
        2.0,
        5.1e3,
        False,
    )
    bare = _decode(
        KernelOnlyMeasured, {"ok": True, "graph": {"ns": None, "note": "capture failed"}, "poisoned": True, **INTEGRITY}
    )
    assert (bare.graph.ns, bare.graph.note, bare.profiler, bare.poisoned) == (None, "capture failed", None, True)


def test_a_tensor_of_a_dtype_no_task_uses_is_an_unusable_output_not_a_forgery():
    meta = protocol.describe_output(torch.zeros(2, dtype=torch.complex64))
    out = _decode(Called, dict(GOOD[Called][0], outputs=[meta]), payloads=[b"\0" * 3]).output
    assert out.kind == "tensor" and not out.usable


@pytest.mark.parametrize("cls, path, value", MALFORMED, ids=[f"{c.__name__}-{p}-{v!r}"[:60] for c, p, v in MALFORMED])
def test_a_malformed_field_is_rejected(cls, path, value):
    with pytest.raises(ProtocolError):
        _decode(cls, _with(GOOD[cls][0], path, value))


@pytest.mark.parametrize(
    "meta",
    [{"kind": "array", "type": "ndarray"}, {"type": "int"}, {"kind": "object", "type": 7}, {"kind": "object"}],
    ids=repr,
)
def test_an_output_of_no_known_kind_or_without_its_type_name_is_rejected(meta):
    with pytest.raises(ProtocolError, match="output"):
        _decode(Called, dict(GOOD[Called][0], outputs=[meta]), payloads=[])
    assert _decode(Called, dict(GOOD[Called][0], outputs=[OBJECT_META]), payloads=[]).output.type == "NoneType"


@pytest.mark.parametrize(
    "cls, key",
    [(c, k) for c, keys in REQUIRED.items() for k in [*keys, "tampered", "threads"]],
    ids=lambda x: getattr(x, "__name__", x),
)
def test_a_missing_field_is_rejected(cls, key):
    header = dict(GOOD[cls][0])
    del header[key]
    with pytest.raises(ProtocolError):
        _decode(cls, header)


@pytest.mark.parametrize("cls", [c for c in GOOD if c not in (Called, Timed)], ids=lambda c: c.__name__)
def test_tensor_frames_a_reply_does_not_announce_are_rejected(cls):
    with pytest.raises(ProtocolError):
        _decode(cls, GOOD[cls][0], payloads=[TENSOR_RAW])


def test_a_timing_reply_must_match_its_request():
    header = GOOD[Timed][0]
    with pytest.raises(ProtocolError):
        _decode(Timed, header, expect={"n_samples": 3, "n_outputs": 2})
    with pytest.raises(ProtocolError):
        _decode(Timed, header, expect={"n_samples": 2, "n_outputs": 1})
    with pytest.raises(ProtocolError):  # an extra tensor frame
        _decode(Timed, header, payloads=[TENSOR_RAW, TENSOR_RAW])


def test_failure_replies():
    failed = decode_reply(
        {"ok": False, "error": "ValueError: x", "error_type": "ValueError", "traceback": "Traceback", **INTEGRITY},
        [],
        Called,
    )
    assert type(failed) is Failed and not failed.ok
    assert (failed.error, failed.error_type, failed.traceback, failed.integrity.threads) == (
        "ValueError: x",
        "ValueError",
        "Traceback",
        1,
    )
    early = decode_reply({"ok": False, "error": "no custom_kernel", "error_type": "MissingEntryPoint"}, [], Loaded)
    assert (early.traceback, early.integrity.tampered, early.integrity.threads) == ("", (), None)
    tampered = decode_reply(
        {"ok": False, "error": "e", "tampered": ["torch.cuda.Event"], "threads": 2}, [], Timed, n_samples=1, n_outputs=1
    )
    assert tampered.integrity.tampered == ("torch.cuda.Event",)
    for bad in (
        {"ok": False},
        {"ok": False, "error": 3},
        {"ok": False, "error": "e", "traceback": 1},
        {"ok": False, "error": "e", "error_type": None},
        {"ok": False, "error": "e", "tampered": "x"},
        {"ok": False, "error": "e", "threads": -1},
    ):
        with pytest.raises(ProtocolError):
            decode_reply(bad, [], Loaded)
    with pytest.raises(ProtocolError):
        decode_reply({"ok": False, "error": "e"}, [TENSOR_RAW], Called)


def test_the_ready_message_keeps_only_finite_calibration():
    ready = Ready.decode(
        {"ok": True, "ready": True, "pid": 7, "gap_ns": 1500.0, "window_gap_ns": {"held": 20.0, "opened": None}}, []
    )
    assert (ready.gap_ns, ready.window_gap_ns) == (1500.0, {"held": 20.0, "opened": None})
    odd = Ready.decode({"gap_ns": NAN, "window_gap_ns": {"held": INF, "opened": "x"}}, [])
    assert (odd.gap_ns, odd.window_gap_ns) == (0.0, {"held": None, "opened": None})
    assert Ready.decode({"window_gap_ns": [1]}, []).window_gap_ns == {"held": None, "opened": None}
    with pytest.raises(ProtocolError):
        Ready.decode({"gap_ns": 1.0}, [TENSOR_RAW])
    assert math.isfinite(ready.gap_ns)


def test_the_ready_message_keeps_only_the_known_start_up_steps_with_finite_non_negative_seconds():
    steps = {"isolate": 0.01, "cuda_context": 0.2, "sampler": NAN, "calibrate": -1.0, "task": "x", "evil": 5.0}
    ready = Ready.decode({"gap_ns": 1.0, "startup_s": steps}, [])
    assert ready.startup_s == {"isolate": 0.01, "cuda_context": 0.2}
    assert Ready.decode({"gap_ns": 1.0, "startup_s": [1, 2]}, []).startup_s == {}
    assert Ready.decode({"gap_ns": 1.0}, []).startup_s == {}


def test_a_timing_reply_keeps_only_the_known_steps_and_never_fails_for_them():
    header = GOOD[Timed][0]
    steps = {"heat": 0.02, "calls": 0.5, "touch": INF, "outputs": -1.0, "evil": 9.0}
    assert _decode(Timed, {**header, "steps_s": steps}).steps_s == {"heat": 0.02, "calls": 0.5}
    assert _decode(Timed, {**header, "steps_s": "x"}).steps_s == {}
    assert _decode(Timed, header).steps_s == {}


def test_the_parts_of_a_phase_are_not_counted_twice_in_the_total():
    from harness.engine.context import Phases

    phases = Phases()
    phases.add("worker_start", 1.0)
    phases.add("worker_start.cuda_context", 0.4)
    phases.add("timing", 2.0)
    assert phases.top_level_total() == 3.0
