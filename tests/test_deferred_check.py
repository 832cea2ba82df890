"""The deferred check (harness.engine.benchmark): in ranked runs the check of a chunk runs during the next
untimed request (the next chunk's lead-in, or its input generation; a case's last chunk, the next case's
first). A wrong output found there must end the run exactly as an immediate check did: that case fails
with its timed call named, no timed call follows, and the cases after it in the block are not run,
whatever the worker did meanwhile."""

from __future__ import annotations

import pytest

from harness.engine.blocks import shape_order
from harness.results import FAIL, NOT_RUN, PASS
from tests.helpers import cheat_with_correct_kernel, run

# The fixture's benchmark shapes are (m, n) = (8, 64) and (16, 32), and its tests use the same shapes. A
# shape's calls on the CPU with 3 blocks of 3 samples: its test, one warm-up call, then 3 timed calls, one
# a chunk: its fifth call is block 0's last chunk, the one whose check is deferred.
WRONG_LAST_CHUNK = """
_calls = {}


def custom_kernel(data):
    out = _correct_kernel(data)
    key = tuple(out.shape)
    _calls[key] = _calls.get(key, 0) + 1
    print("call", *key, _calls[key], flush=True)
    if key == (8, 64) and _calls[key] == 5:
        return out + 1.0  # wrong in the first shape's last chunk of block 0
    SECOND_SHAPE
    return out
"""
CRASH_SECOND_SHAPE = """if key == (16, 32) and _calls[key] >= 2:
        import os
        os._exit(3)  # the second shape's first benchmark call ends the worker"""


RAISE_SECOND_SHAPE = """if key == (16, 32) and _calls[key] >= 2:
        raise RuntimeError("the second shape's warm-up call fails")"""


def _secret(first_shape_position: int) -> str:
    """A secret whose block 0 times the wrong shape (index 0) at ``first_shape_position`` (0 or -1)."""
    return next(s for s in (f"defer-{i}" for i in range(100)) if shape_order(2, 0, s)[first_shape_position] == 0)


@pytest.mark.parametrize("position", [0, -1], ids=["wrong-shape-first", "wrong-shape-last"])
def test_a_wrong_output_found_by_a_deferred_check_ends_the_run_as_before(tmp_path, position):
    sub = cheat_with_correct_kernel(tmp_path, WRONG_LAST_CHUNK.replace("SECOND_SHAPE", ""))
    r = run(sub, secret=_secret(position), blocks=3, max_repeats=9)
    assert [len(b.samples) for b in r.blocks] == [2], r.blocks  # one block: it stopped there
    wrong, other = r.benchmark_cases()
    assert r.verdict == FAIL and wrong.verdict == FAIL, (r.verdict, r.message)
    assert wrong.message.startswith("timed call 3:"), wrong.message  # the block's third sample
    # first: the other shape never ran (its first timed inputs were ready when the check failed);
    # last: it ran before, and passed
    assert other.verdict == (NOT_RUN if position == 0 else PASS), (other.verdict, other.message)
    if position == 0:  # and it stopped before its timed calls: its test and warm-up calls only
        calls = [int(line.split()[3]) for line in r.stdout.splitlines() if line.startswith("call 16 32 ")]
        assert max(calls) == 2, r.stdout
    # block 0's first shape had its last check deferred into the second shape's input generation (first:
    # the wrong shape's, which failed there; last: the other's, which passed)
    assert r.phases_s.get("worker_generate.check", 0) > 0, r.phases_s


@pytest.mark.parametrize("meanwhile", [CRASH_SECOND_SHAPE, RAISE_SECOND_SHAPE], ids=["crash", "raise"])
def test_a_deferred_failure_outranks_what_the_next_case_did_meanwhile(tmp_path, meanwhile):
    """While the wrong shape's check still waits, the next case's first call (its warm-up) kills the
    worker, or raises: an immediate check would have failed the run before that call, so the verdict is
    the first shape's, and the next case was not run."""
    sub = cheat_with_correct_kernel(tmp_path, WRONG_LAST_CHUNK.replace("SECOND_SHAPE", meanwhile))
    r = run(sub, secret=_secret(0), blocks=3, max_repeats=9)
    wrong, other = r.benchmark_cases()
    assert r.verdict == FAIL and wrong.verdict == FAIL, (r.verdict, r.message)
    assert wrong.message.startswith("timed call 3:"), wrong.message
    assert other.verdict == NOT_RUN, (other.verdict, other.message)


def test_an_honest_ranked_run_overlaps_its_checks_with_the_next_inputs(tmp_path):
    sub = cheat_with_correct_kernel(tmp_path, "custom_kernel = _correct_kernel\n")
    r = run(sub, blocks=3)
    assert r.verdict == PASS, r.message
    # every block: the first case's last check overlapped the second case's generation, the second's
    # ran at the block's end
    assert r.phases_s["worker_generate.check"] > 0 and r.phases_s["check"] > 0, r.phases_s


# A wrong output in a case's first timed chunk, whose check waits for the next chunk of the same case;
# and the same with a lead-in before every chunk (forced here on the CPU; on a GPU it is the default).
# The kernel numbers the distinct inputs of its shape as they come, and says so: the test's (1), the
# warm-up input (2, also the lead-ins'), then the timed ones (3, ...: on the CPU one a chunk).
WRONG_FIRST_CHUNK = """
_seen = {}
_crash_next = []


def custom_kernel(data):
    if _crash_next:
        import os

        os._exit(3)
    out = _correct_kernel(data)
    key = tuple(out.shape)
    inputs = _seen.setdefault(key, [])
    digest = hash(data[0].view(torch.uint8).cpu().numpy().tobytes())
    if digest not in inputs:
        inputs.append(digest)
        print("call", *key, len(inputs), flush=True)
    nth = inputs.index(digest) + 1
    if key == (8, 64) and nth == 3:
        CRASH_LATER
        return out + 1.0
    return out
"""
CRASH_IN_THE_NEXT_LEAD_IN = "_crash_next.append(1)  # the next call, the next chunk's lead-in, ends the worker"


def _inputs_of_wrong_shape(stdout: str) -> list[int]:
    return [int(line.split()[3]) for line in stdout.splitlines() if line.startswith("call 8 64 ")]


@pytest.fixture
def lead_in_on_the_cpu(monkeypatch):
    from harness.engine.benchmark import BenchmarkLoop

    monkeypatch.setattr(BenchmarkLoop, "_lead_in_due", lambda self, first_chunk, first_case: True)


def _assert_failed_at_the_first_timed_call(r, chunk: int = 1) -> None:
    wrong, other = r.benchmark_cases()
    assert r.verdict == FAIL and wrong.verdict == FAIL, (r.verdict, r.message)
    assert wrong.message.startswith("timed call 1:"), wrong.message
    assert other.verdict == NOT_RUN, (other.verdict, other.message)
    assert max(_inputs_of_wrong_shape(r.stdout)) == 2 + chunk, r.stdout  # the second chunk was never timed


def test_a_wrong_output_in_a_middle_chunk_is_found_before_the_next_timed_call(tmp_path):
    sub = cheat_with_correct_kernel(tmp_path, WRONG_FIRST_CHUNK.replace("CRASH_LATER", "pass"))
    r = run(sub, secret=_secret(0), blocks=3, max_repeats=9)
    _assert_failed_at_the_first_timed_call(r)
    # the check ran while the worker generated the second chunk's inputs (an immediate one would not)
    assert r.phases_s.get("worker_generate.check", 0) > 0, r.phases_s


def test_with_a_lead_in_the_check_runs_during_the_next_chunks_warm_up(tmp_path, lead_in_on_the_cpu):
    sub = cheat_with_correct_kernel(tmp_path, "custom_kernel = _correct_kernel\n")
    r = run(sub, blocks=3, max_repeats=9)
    assert r.verdict == PASS, r.message
    assert r.phases_s.get("warmup.check", 0) > 0, r.phases_s


@pytest.mark.parametrize("meanwhile", ["pass", CRASH_IN_THE_NEXT_LEAD_IN], ids=["plain", "crash-meanwhile"])
def test_a_wrong_output_found_during_a_lead_in_fails_its_case(tmp_path, lead_in_on_the_cpu, meanwhile):
    """The check of the first timed chunk runs during the next chunk's lead-in and fails there; in the
    second variant the worker also dies meanwhile: the wrong output still decides."""
    sub = cheat_with_correct_kernel(tmp_path, WRONG_FIRST_CHUNK.replace("CRASH_LATER", meanwhile))
    r = run(sub, secret=_secret(0), blocks=3, max_repeats=9)
    _assert_failed_at_the_first_timed_call(r)
    assert r.phases_s.get("warmup.check", 0) > 0, r.phases_s


@pytest.mark.gpu
def test_on_a_gpu_a_wrong_output_is_found_during_the_next_chunks_lead_in(tmp_path):
    """The default lead-in on a GPU; chunks of 10 timed calls (two a case and block: the standard-error
    target is out of reach)."""
    sub = cheat_with_correct_kernel(tmp_path, WRONG_FIRST_CHUNK.replace("CRASH_LATER", "pass"))
    r = run(sub, device="cuda", secret=_secret(0), blocks=3, max_repeats=60, target_rel_err=1e-9)
    _assert_failed_at_the_first_timed_call(r, chunk=10)
    assert r.phases_s.get("warmup.check", 0) > 0, r.phases_s
