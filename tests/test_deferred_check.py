"""The deferred check (harness.engine.benchmark): in ranked blocks the check of a case's last chunk runs
while the worker generates the next case's first timed inputs. A wrong output found there must end the
run exactly as an immediate check did: that case fails with its timed call named, and the cases after it
in the block are not run, whatever the next case did meanwhile."""

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
