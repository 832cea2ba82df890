"""The parent's requests to the worker: typed, encoded once, decoded and checked once in the worker."""

from __future__ import annotations

import pickle
from multiprocessing import Pipe

import pytest

from harness import protocol
from harness.protocol import ProtocolError
from harness.requests import (
    REQUESTS,
    Call,
    Exit,
    Generate,
    Load,
    MeasureKernelOnly,
    Proceed,
    Profile,
    ShareOutputs,
    Time,
    Warmup,
    decode_request,
)

EXAMPLES = [
    Load(),
    Exit(),
    Proceed(),
    Generate(specs=[{"m": 4, "n": 8, "k": 64, "seed": 3}], keep=1),
    Call(data=2),
    Warmup(data=0, min_calls=3, min_ms=100),
    Time(protocol="batched", inputs=[1, 2, 3], returned=[2], heat_ms=20, touch=True),
    Profile(data=1),
    MeasureKernelOnly(inputs=[1], n=20, replays=7, profiler=True, calls=10),
    ShareOutputs(nbytes=16 << 20),
]


def test_every_request_has_an_example():
    assert {type(r) for r in EXAMPLES} == set(REQUESTS.values())


@pytest.mark.parametrize("request_", EXAMPLES, ids=lambda r: r.OP)
def test_round_trip_through_the_pipe(request_):
    parent, child = Pipe()
    protocol.send_to_worker(parent, request_, seq=7)
    msg = protocol.receive_from_parent(child)
    assert msg["seq"] == 7 and protocol._last_seq == 7
    assert decode_request(msg) == request_


def test_the_defaults_live_in_the_request():
    assert decode_request({"op": "warmup", "data": 0}) == Warmup(data=0, min_calls=1, min_ms=0, max_calls=1000)
    assert decode_request({"op": "time", "protocol": "per_call", "inputs": [0]}).returned == ()


@pytest.mark.parametrize(
    ("msg", "why"),
    [
        ({"op": "format_disk"}, "unknown request 'format_disk'"),
        ("call", "not a dict"),
        ({"op": "call"}, "without a required field"),
        ({"op": "call", "data": 0, "return": [0]}, "unknown field"),
        ({"op": "call", "data": -1}, "malformed 'data'"),
        ({"op": "call", "data": True}, "malformed 'data'"),
        ({"op": "time", "protocol": "per_sample", "inputs": [0]}, "malformed 'protocol'"),
        ({"op": "time", "protocol": "batched", "inputs": [0, "1"]}, "malformed 'inputs'"),
        ({"op": "warmup", "data": 0, "min_ms": float("nan")}, "malformed 'min_ms'"),
        ({"op": "warmup", "data": 0, "max_calls": 0}, "malformed 'max_calls'"),
        ({"op": "generate", "specs": [{1: 2}]}, "malformed 'specs'"),
        ({"op": "kernel_only", "inputs": [0], "profiler": 1}, "malformed 'profiler'"),
        ({"op": "share_outputs", "nbytes": 0}, "malformed 'nbytes'"),
    ],
)
def test_a_malformed_request_is_refused(msg, why):
    with pytest.raises(ProtocolError, match=why):
        decode_request(msg)


def test_the_parent_cannot_build_a_malformed_request():
    with pytest.raises(ProtocolError, match="malformed 'protocol'"):
        Time(protocol="per-call", inputs=[0])


def test_a_non_dict_from_the_parent_is_a_protocol_error():
    parent, child = Pipe()
    parent.send_bytes(pickle.dumps(["op", "call"]))
    with pytest.raises(ProtocolError, match="not a dict"):
        protocol.receive_from_parent(child)


def test_the_worker_answers_a_bad_request_with_an_error_and_keeps_serving(monkeypatch):
    from harness.worker.main import Worker

    parent, child = Pipe()
    worker = object.__new__(Worker)  # no sampler or submission needed to refuse a request
    worker.conn = child
    monkeypatch.setattr(Worker, "_integrity", lambda self: {"tampered": [], "threads": 1})
    assert worker.handle({"op": "call", "data": "zero", "seq": 1}) is True
    header, payloads = protocol.receive(parent)
    assert header["ok"] is False and header["error_type"] == "BadRequest" and payloads == []
    assert "malformed 'data'" in header["error"]
    assert worker.handle({"op": "exit", "seq": 2}) is False
