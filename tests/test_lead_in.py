"""The lead-in before a chunk of timed calls on a GPU (the submission's warm-up calls, then the harness's
heat): before every chunk by default, or only before a case's, or a block's, first chunk
(``RunOptions.lead_in``, measured against each other by bench/lead_in.py)."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path

import pytest

from harness.api import RunOptions, run_submission
from harness.engine.benchmark import lead_in_due
from harness.engine.options import lead_in_ms
from harness.errors import UsageError
from harness.results import PASS, RunResult
from tests.helpers import MXFP4_SMALL, NVFP4_SMALL, ROOT, cli

BLOCKS = 2


def test_which_chunks_get_the_lead_in():
    due = {
        (policy, first_chunk, first_case): lead_in_due(policy, first_chunk, first_case)
        for policy, first_chunk, first_case in itertools.product(
            ("chunk", "short", "case", "block"), (True, False), (True, False)
        )
    }
    assert all(due[(every, a, b)] for every in ("chunk", "short") for a in (True, False) for b in (True, False))
    assert [due[("case", True, b)] for b in (True, False)] == [True, True]
    assert [due[("case", False, b)] for b in (True, False)] == [False, False]
    assert [due[("block", a, b)] for a, b in itertools.product((True, False), (True, False))] == [
        True,
        False,
        False,
        False,
    ]


def test_the_short_lead_in_is_a_quarter_of_the_default():
    assert (lead_in_ms("short"), lead_in_ms("chunk"), lead_in_ms("case")) == (5, 20, 20)


def test_an_unknown_setting_is_a_usage_error_naming_the_choices():
    with pytest.raises(UsageError, match="lead_in must be one of chunk, short, case, block; got 'never'"):
        RunOptions(lead_in="never").validate()


def test_each_block_records_its_setting_and_the_json_keeps_it():
    r = run_submission(
        ROOT / "submissions" / "torch_mxfp4.py",
        MXFP4_SMALL,
        "leaderboard",
        RunOptions(device="cpu", secret="s", blocks=BLOCKS, max_repeats=3, lead_in="case"),
    )
    assert r.verdict == PASS, r.message
    assert [b.lead_in for b in r.blocks] == ["case"] * BLOCKS
    assert [b.lead_in for b in RunResult.from_dict(r.to_dict()).blocks] == ["case"] * BLOCKS


# the portable nvfp4 example, saying which input each call got (40 bits of a hash of its bytes): the
# first two calls of a run of calls on one input, in short lines, so that a run's 400 timed calls and the
# warm-ups' hundreds stay below the harness's cap on a submission's output (16 KiB kept)
SAYS_ITS_INPUTS = (
    (ROOT / "submissions" / "torch_nvfp4.py").read_text()
    + """

_inner = custom_kernel
_last = [None, 0]


def custom_kernel(data):
    h = hash(data[0].view(torch.uint8).cpu().numpy().tobytes())
    _last[:] = [h, _last[1] + 1 if h == _last[0] else 0]
    if _last[1] < 2:
        print(f"input {h & 0xFFFFFFFFFF:x}", flush=True)
    return _inner(data)
"""
)


def _warm_up_runs(tmp_path: Path, policy: str) -> tuple[int, int]:
    """(the runs of calls on a warm-up input between timed calls, the timed cases of all blocks) of a
    ranked batched run with ``policy``: a warm-up input is called again and again, a timed one once."""
    sub = tmp_path / f"says_{policy}.py"
    sub.write_text(SAYS_ITS_INPUTS)
    options = RunOptions(
        device="cuda", secret="s", blocks=BLOCKS, max_repeats=4, lead_in=policy, kernel_only=False, min_runs=4
    )
    r = run_submission(str(sub), NVFP4_SMALL, "leaderboard", options)
    assert r.verdict == PASS, r.message
    assert r.stdout_cut_bytes == 0  # else the calls of the last chunks are not in it
    seen = [line.split()[1] for line in r.stdout.splitlines() if line.startswith("input ")]
    counts = Counter(seen)
    kinds = "".join("W" if counts[h] > 1 else "T" for h in seen)
    return sum(1 for k, _ in itertools.groupby(kinds) if k == "W"), len(r.benchmark_cases()) * BLOCKS


@pytest.mark.gpu
def test_on_a_gpu_the_case_setting_warms_up_before_each_cases_first_chunk_only(tmp_path):
    every, cases = _warm_up_runs(tmp_path, "chunk")
    first, cases_again = _warm_up_runs(tmp_path, "case")
    assert cases == cases_again and first >= cases  # each case's own warm-up, with its first chunk's lead-in
    assert every - first == cases * 3  # 4 chunks of one sample each: 3 more lead-ins a case and block


def test_the_default_is_the_short_lead_in_before_every_chunk():
    """The default since three H100 leases found no score it moved (docs/measurement.md): before every
    chunk, 5 ms of the submission's calls and 5 ms of heat."""
    policy = RunOptions().lead_in
    assert policy == "short" and lead_in_ms(policy) == 5
    assert all(lead_in_due(policy, a, b) for a in (True, False) for b in (True, False))


def test_the_cli_takes_the_lead_in_and_each_block_records_it(tmp_path):
    """`--lead-in chunk` keeps the setting runs were stored with before `short` became the default (a board
    ranks runs of one setting only); the run's JSON says which it used."""
    out = tmp_path / "r.json"
    sub = str(ROOT / "submissions" / "torch_mxfp4.py")
    args = ["run", sub, "--task", MXFP4_SMALL, "--mode", "leaderboard", "--device", "cpu", "--max-repeats", "3"]
    done = cli([*args, "--blocks", "2", "--lead-in", "chunk", "--json", str(out), "--quiet"])
    assert done.returncode == 0, done.stderr[-2000:]
    assert [b["lead_in"] for b in json.loads(out.read_text())["blocks"]] == ["chunk", "chunk"]


@pytest.mark.parametrize("command", ["run", "run-all", "final"])
def test_an_unknown_cli_lead_in_names_the_choices(command):
    done = cli([command, "--help"])
    assert done.returncode == 0 and "--lead-in {chunk,short,case,block}" in done.stdout, done.stdout[-500:]
    bad = cli([command, str(ROOT / "submissions"), "--task", MXFP4_SMALL, "--lead-in", "never"])
    assert bad.returncode == 2 and "--lead-in: invalid choice: 'never'" in bad.stderr, bad.stderr[-500:]
