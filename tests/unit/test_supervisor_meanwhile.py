"""Supervisor.request's ``meanwhile``: the parent's own work runs after the request is sent and before the
reply is read, so it overlaps the worker's work on that request (the parent's copies of the inputs while
the worker generates its own)."""

from __future__ import annotations

import json
import multiprocessing
import pickle
import time

from harness.channel import FrameReader, write_frame
from harness.engine.supervisor import Supervisor
from harness.requests import Generate


class _Alive:
    exitcode = None

    def is_alive(self) -> bool:
        return True


def test_the_parents_own_work_runs_between_sending_the_request_and_reading_the_reply():
    parent, worker = multiprocessing.Pipe()
    sup = Supervisor.__new__(Supervisor)  # only what request() reads: the channel, the process, the sequence
    sup.conn, sup.proc, sup._seq, sup.poll_s, sup._frames = parent, _Alive(), 0, 0.05, FrameReader()
    seen = []

    def meanwhile():
        assert worker.poll(0), "the request is not sent yet"
        request = pickle.loads(worker.recv_bytes())
        seen.append(request["op"])
        write_frame(worker.fileno(), json.dumps({"ok": True, "tensors": 0, "seq": request["seq"]}).encode())
        assert parent.poll(0), "the reply must still be unread: it is read after this returns"

    deadline = time.monotonic() + 10  # a request that never got its reply fails here, not hangs
    header, payloads = sup.request(Generate(specs=[], keep=0), deadline, "generating", meanwhile=meanwhile)
    assert seen == ["generate"] and header["ok"] is True and payloads == []
