"""The region the parent shares with its worker for a reply's outputs (harness.shared_outputs): sealed,
bounds-checked, read once into a copy of the parent's own; replies place their outputs there instead of
sending their bytes through the channel, and a run works the same without it."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
import torch

from harness import protocol
from harness.api import RunOptions, run_submission
from harness.channel import FrameReader
from harness.protocol import ProtocolError
from harness.results import PASS
from harness.shared_outputs import SharedOutputs

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures" / "tasks"
CPU = torch.device("cpu")


@pytest.fixture
def region():
    r = SharedOutputs.create(1 << 20, CPU)
    if r is None:
        pytest.skip("this system cannot make a memfd")
    yield r
    r.close()


def test_the_region_cannot_shrink_or_grow(region):
    import os

    for size in (0, region.nbytes // 2, region.nbytes * 2):
        with pytest.raises(PermissionError):
            os.ftruncate(region.fd, size)


def test_a_gpu_uses_the_region_only_page_locked(region):
    assert not region.pinned  # a CPU mapping
    assert region.worth_using(CPU)
    assert not region.worth_using(torch.device("cuda"))  # plain memory is slower there than the channel's


def test_a_read_is_a_copy_of_its_own_and_stays_inside_the_region(region):
    region.tensor[:8] = torch.arange(8, dtype=torch.uint8)
    got = region.read(2, 4, CPU)
    region.tensor[:8] = 0  # the worker writes again after the parent read
    assert got.tolist() == [2, 3, 4, 5]
    for offset, n in ((region.nbytes - 3, 4), (-1, 2), (0, region.nbytes + 1)):
        with pytest.raises(ValueError, match="shared region"):
            region.read(offset, n, CPU)


def _reply(region: SharedOutputs | None, header: dict, payloads: list) -> tuple[dict, list]:
    """``header`` and ``payloads`` sent the worker's way and received the parent's way."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        protocol.send(theirs, header, payloads)  # a socket has fileno() like a Connection
        reader = FrameReader()
        reader.shared = region
        return protocol.receive(ours, reader)  # type: ignore[arg-type]


def test_a_reply_mixes_shared_outputs_and_frames_in_order(region):
    region.tensor[100:104] = torch.tensor([9, 8, 7, 6], dtype=torch.uint8)
    header, payloads = _reply(region, {"ok": True}, [(100, 4), memoryview(b"ab"), (101, 2)])
    assert header["tensors"] == 1 and header["shared"] == [[100, 4], None, [101, 2]]
    assert [p.tolist() for p in payloads] == [[9, 8, 7, 6], [97, 98], [8, 7]]
    header, payloads = _reply(region, {"ok": True}, [memoryview(b"xyz")])
    assert "shared" not in header and [p.tolist() for p in payloads] == [[120, 121, 122]]


@pytest.mark.parametrize(
    "shared, why",
    [
        ([[0, 4]], "a shared region the harness did not give"),
        ([[(1 << 20) - 2, 4]], "shared region"),
        ([[0, -1]], "malformed shared output place"),
        ([[0, True]], "malformed shared output place"),
        ([None], "announced 0 frames but placed 1"),
        ("x", "malformed list of shared outputs"),
    ],
)
def test_a_forged_place_is_a_protocol_error(region, shared, why):
    ours, theirs = socket.socketpair()
    with ours, theirs:
        protocol.write_frame(
            theirs.fileno(), protocol.json.dumps({"ok": True, "tensors": 0, "shared": shared}).encode()
        )
        reader = FrameReader()
        reader.shared = None if "did not give" in why else region
        with pytest.raises(ProtocolError, match=why):
            protocol.receive(ours, reader)  # type: ignore[arg-type]


def _ranked(sub: Path, task: str) -> object:
    return run_submission(
        str(sub), str(FIX / task / "task.yml"), "leaderboard", RunOptions(device="cpu", secret="s", max_repeats=4)
    )


@pytest.mark.parametrize("task, sub", [("mxfp4_small", "torch_mxfp4.py"), ("nvfp4_small", "torch_nvfp4.py")])
def test_a_ranked_run_brings_every_output_through_the_region(monkeypatch, task, sub):
    if SharedOutputs.create(4096, CPU) is None:
        pytest.skip("this system cannot make a memfd")

    def no_frames(*args, **kwargs):
        raise AssertionError("an output came through the channel")

    monkeypatch.setattr(FrameReader, "tensor", no_frames)
    r = _ranked(ROOT / "submissions" / sub, task)
    assert r.verdict == PASS, r.message
    assert r.score_us is not None and len(r.blocks) == 3


def test_without_a_region_the_outputs_come_as_frames(monkeypatch):
    monkeypatch.setattr(SharedOutputs, "create", classmethod(lambda cls, nbytes, device: None))
    r = _ranked(ROOT / "submissions" / "torch_mxfp4.py", "mxfp4_small")
    assert r.verdict == PASS, r.message


TRUNCATES_THE_REGION = """
import fcntl, os

found, refused = 0, 0
for fd in range(3, 1024):
    try:
        fcntl.fcntl(fd, fcntl.F_GET_SEALS)  # a memfd: the harness's output region
    except OSError:
        continue
    found += 1
    try:
        os.ftruncate(fd, 0)
    except PermissionError:
        refused += 1
print(f"memfds found: {found}, truncation refused: {refused}")
"""


def test_a_submission_cannot_truncate_the_region_under_the_parent(tmp_path):
    sub = tmp_path / "truncates.py"
    sub.write_text(TRUNCATES_THE_REGION + (ROOT / "submissions" / "torch_mxfp4.py").read_text())
    r = _ranked(sub, "mxfp4_small")
    tries = re.findall(r"memfds found: (\d+), truncation refused: (\d+)", r.stdout)
    assert len(tries) == 3 and all(int(found) >= 1 for found, _ in tries), r.stdout  # the attack ran, each block
    assert all(found == refused for found, refused in tries), r.stdout
    assert r.verdict == PASS, r.message
