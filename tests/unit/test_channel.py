"""The worker-to-parent channel (harness.channel) and the worker's reused output memory
(harness.worker.staging): frames arrive whole and as written, a frame that stops part-way ends at the
deadline instead of blocking, an oversized length is refused before anything is read, and the staging
buffer is reused from reply to reply."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from harness.channel import ChannelError, FrameReader, ReplyStalled, host_buffer, write_frame
from harness.worker.staging import OutputStaging


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def test_frames_arrive_whole_even_when_larger_than_the_sockets_buffer(pair):
    writer, reader_end = pair
    big = torch.arange(3 << 20, dtype=torch.int32).view(torch.uint8)  # 12 MiB: many partial writes and reads
    frames = [b"", b"{}", big.numpy().data]
    sender = threading.Thread(target=lambda: [write_frame(writer.fileno(), f) for f in frames])
    sender.start()
    reader, deadline = FrameReader(), time.monotonic() + 30
    assert reader.raw(reader_end.fileno(), 1 << 20, deadline) == b""
    assert bytes(reader.raw(reader_end.fileno(), 1 << 20, deadline)) == b"{}"
    got = reader.tensor(reader_end.fileno(), 1 << 30, deadline)
    sender.join()
    assert got.dtype == torch.uint8 and torch.equal(got, big)
    assert got.data_ptr() != big.data_ptr()


def test_a_frame_that_stops_part_way_raises_at_the_deadline(pair):
    writer, reader_end = pair
    os.write(writer.fileno(), struct.pack("!Q", 100) + b"only ten b")
    t0 = time.monotonic()
    with pytest.raises(ReplyStalled):
        FrameReader().raw(reader_end.fileno(), 1 << 20, t0 + 0.3)
    assert 0.25 < time.monotonic() - t0 < 5


def test_an_oversized_length_is_refused_before_reading_its_bytes(pair):
    writer, reader_end = pair
    os.write(writer.fileno(), struct.pack("!Q", 1 << 62))
    with pytest.raises(ChannelError, match="at most 4096"):
        FrameReader().tensor(reader_end.fileno(), 4096, time.monotonic() + 5)


def test_a_closed_channel_mid_frame_is_the_end_of_the_worker(pair):
    writer, reader_end = pair
    os.write(writer.fileno(), struct.pack("!Q", 100) + b"partial")
    writer.close()
    with pytest.raises(EOFError):
        FrameReader().raw(reader_end.fileno(), 1 << 20, time.monotonic() + 5)


def test_host_buffers_say_whether_they_are_pinned():
    """Pinned where the system allows it (a GPU build with a device), else plain memory, and it says which."""
    for want in (True, False):
        buf, pinned = host_buffer(16, want)
        assert buf.dtype == torch.uint8 and buf.numel() == 16 and pinned == buf.is_pinned() and pinned <= want


def test_staged_outputs_hold_their_bytes_and_the_buffer_is_reused_from_reply_to_reply():
    staging = OutputStaging(torch.device("cpu"))
    outs = [torch.randn(64, 48).to(torch.bfloat16), torch.arange(10, dtype=torch.int64)[::2]]  # one not contiguous
    expected = [o.contiguous().view(torch.uint8).reshape(-1).clone() for o in outs]
    seen = []
    for _ in range(3):
        staging.begin()
        views = [staging.copy(o) for o in outs]
        for view, want in zip(views, expected):
            assert bytes(view) == want.numpy().tobytes()
        seen.append([view.obj.__array_interface__["data"][0] for view in views])
    # the first reply grew the buffer (its copies went to fresh memory); later replies share it, back to back
    assert seen[1] == seen[2] and seen[1][1] == seen[1][0] + expected[0].numel()


def test_the_output_path_benchmark_measures_every_path_for_every_shape(tmp_path):
    """bench/output_path.py's smoke run on the CPU: every benchmark shape of both tasks, every path, the
    outputs rebuilt (the script asserts their count), every step timed."""
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "output_path.json"
    cmd = [sys.executable, "bench/output_path.py", "--reps", "1", "--out", str(out)]
    subprocess.run(cmd, cwd=root, check=True, capture_output=True, timeout=300)
    tasks = json.loads(out.read_text())["tasks"]
    assert set(tasks) == {"mxfp4_mm", "nvfp4_gemm"}
    for task in tasks.values():
        rows = task["rows"]
        assert {r["path"] for r in rows} == {"shared", "channel", "pipe"} and len(rows) % 3 == 0
        assert all(r["total_ms"] > 0 and r["copy_ms"] > 0 and r["output_bytes"] > 0 for r in rows), rows
