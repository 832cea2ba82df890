"""--warmup-chunks: untimed chunks of fresh inputs before each case's timed ones, in every block of a ranked
run (what a submission does the first time it meets new inputs then happens before the timed chunks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.api import RunOptions, run_submission
from harness.errors import UsageError
from harness.results import PASS

ROOT = Path(__file__).resolve().parent.parent
MXFP4_SMALL = str(ROOT / "tests" / "fixtures" / "tasks" / "mxfp4_small" / "task.yml")
BLOCKS = 2

# the portable example, saying which input each call got (a hash of its bytes)
SEES_ITS_INPUTS = (
    (ROOT / "submissions" / "torch_mxfp4.py").read_text()
    + """

_inner = custom_kernel


def custom_kernel(data):
    print("input", hash(data[0].contiguous().view(-1).view(torch.uint8).numpy().tobytes()), flush=True)
    return _inner(data)
"""
)


def _distinct_inputs(tmp_path: Path, chunks: int):
    sub = tmp_path / f"sees_{chunks}.py"
    sub.write_text(SEES_ITS_INPUTS)
    options = RunOptions(device="cpu", max_repeats=3, blocks=BLOCKS, warmup_chunks=chunks, secret="s")
    r = run_submission(str(sub), MXFP4_SMALL, "leaderboard", options)
    assert r.verdict == PASS, r.message
    seen = {line.split()[1] for line in r.stdout.splitlines() if line.startswith("input ")}
    return r, len(seen)


@pytest.mark.parametrize("chunks", [0, 2])
def test_each_case_of_each_block_meets_that_many_chunks_of_fresh_inputs_before_its_timed_ones(tmp_path, chunks):
    r, seen = _distinct_inputs(tmp_path, chunks)
    tests = sum(c.kind == "test" for c in r.cases)
    timed = r.benchmark_cases()
    samples = sum(c.stats.runs for c in timed if c.stats)
    cases_x_blocks = len(timed) * BLOCKS
    # per_call on the CPU: a chunk is one input; every block's case also has its one warm-up input
    assert seen == tests + cases_x_blocks + samples + chunks * cases_x_blocks
    assert [b.warmup_chunks for b in r.blocks] == [chunks] * BLOCKS


def test_a_bad_count_is_a_usage_error():
    for bad in (-1, 11, 1.5):
        with pytest.raises(UsageError, match="--warmup-chunks"):
            RunOptions(warmup_chunks=bad).validate()  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "command", [["run", "submissions/torch_mxfp4.py"], ["run-all", "submissions"], ["final", "--top", "2"]]
)
def test_every_command_that_measures_takes_it_and_refuses_a_bad_count(command, capsys, tmp_path):
    from harness.cli.main import main

    code = main([*command, "--task", "mxfp4_mm:small", "--warmup-chunks", "11", "--results-dir", str(tmp_path)])
    assert code == 2 and "--warmup-chunks must be at most 10" in capsys.readouterr().err
