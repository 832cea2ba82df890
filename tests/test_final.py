"""The final scoring: rounds, paired ranking, adding rounds while undecided, storing, resuming after an
interruption, and its place on the board. The blocks are fake (no worker process): each returns a run
whose score is the entry's speed times the round's shared condition."""

from __future__ import annotations

import hashlib
import math
import random

import pytest

from harness.analysis.compare import t_quantile
from harness.analysis.final import BoardPlace, FinalEntry, needs_more_rounds, outlook, rank_final, rounds_to_settle
from harness.analysis.plausibility import ESCAPED_WORK
from harness.analysis.ties import paired
from harness.engine.blocks import REMEASURED
from harness.engine.final import FinalPlan, run_final
from harness.report.board import load_board, render_board
from harness.results import RunResult
from harness.store.database import open_store
from harness.store.finals import blocks, latest_final
from tests.helpers import make_result

ENTRIES = [
    ("a" * 64, "orig", "/subs/orig.py"),
    ("b" * 64, "copy", "/subs/copy.py"),
    ("c" * 64, "slow", "/subs/slow.py"),
]
SPEED = {"/subs/orig.py": 10.0, "/subs/copy.py": 10.0, "/subs/slow.py": 10.3}  # slow: 3% slower


class FakeBlocks:
    """A block runner: round r's GPU condition (shared by the round's entries) varies by 4%, each block's
    own noise is 0.3%; ``stop_after`` raises KeyboardInterrupt (a killed final) before that many blocks."""

    def __init__(self, seed: int = 0, stop_after: int | None = None, fail: str | None = None, redrawn: str = ""):
        self.rng, self.stop_after, self.fail, self.calls = random.Random(seed), stop_after, fail, []
        self.rounds: dict[int, float] = {}
        self.redrawn = redrawn  # this path's every block was measured again after the escaped-work check

    def __call__(self, path: str, r: int, secret: str, redraws: int) -> RunResult:
        if self.stop_after is not None and len(self.calls) >= self.stop_after:
            raise KeyboardInterrupt
        self.calls.append((path, r))
        cond = self.rounds.setdefault(r, math.exp(self.rng.gauss(0, 0.04)))
        result = make_result(path.rsplit("/", 1)[-1][:-3])
        if path == self.fail:
            result.verdict, result.message = "fail", "wrong output at [0, 0]"
            return result
        if path == self.redrawn and redraws == 0:  # as TimedBlocks does with RunOptions.remeasure_limit 0
            result.verdict, result.message = (
                "rejected",
                f"the device was still busy 30.0 us per call after the end event: {ESCAPED_WORK}",
            )
            return result
        result.score_us = SPEED[path] * cond * math.exp(self.rng.gauss(0, 0.003))
        if path == self.redrawn:
            result.warnings.append(
                f"block 1 {REMEASURED}: the device was still busy 30.0 us per call after the end event"
            )
        return result


def plan(**kw) -> FinalPlan:
    return FinalPlan("mxfp4_mm", "NVIDIA H200", ENTRIES, **{"min_rounds": 3, "max_rounds": 12, **kw})


def test_the_final_ranks_a_3_percent_slower_entry_last_and_ties_identical_ones(tmp_path):
    with open_store(str(tmp_path)) as st:
        _final, ranking, resumed = run_final(st, plan(), "s", FakeBlocks(seed=1))
    assert not resumed
    labels = {p.name: p.rank_label for p in ranking.places}
    assert labels == {"orig": "=1", "copy": "=1", "slow": "3"}, labels
    assert not ranking.undecided


def test_an_interrupted_final_keeps_its_blocks_and_a_rerun_continues(tmp_path):
    d = str(tmp_path)
    first = FakeBlocks(seed=2, stop_after=4)  # killed in round 2
    with open_store(d) as st, pytest.raises(KeyboardInterrupt):
        run_final(st, plan(), "s", first)
    with open_store(d) as st:
        kept = [(b.round, b.sha256) for b in blocks(st, 1)]
        assert len(kept) == 4 and latest_final(st, "mxfp4_mm") is None  # stored, not finished
        second = FakeBlocks(seed=3)
        final, ranking, resumed = run_final(st, plan(), "s", second)
        assert resumed and final.id == 1
        # nothing measured twice: round 2's one finished block is not run again
        done_before = {(p, r) for p, r in first.calls}
        assert not done_before & set(second.calls)
        assert ranking.rounds >= 3 and len(blocks(st, 1)) == 3 * ranking.rounds
        assert latest_final(st, "mxfp4_mm") is not None


def test_a_failed_block_takes_the_entry_out(tmp_path):
    with open_store(str(tmp_path)) as st:
        _f, ranking, _ = run_final(st, plan(), "s", FakeBlocks(seed=4, fail="/subs/copy.py"))
    failed = [p for p in ranking.places if p.failed]
    assert [p.name for p in failed] == ["copy"] and "wrong output" in (failed[0].failed or "")
    assert {p.name for p in ranking.places if not p.failed} == {"orig", "slow"}


def test_an_entry_whose_blocks_are_redrawn_in_more_than_a_third_of_the_rounds_leaves_the_final(tmp_path):
    """A file can trip the escaped-work check on purpose to have a slow block measured again; over a
    final, an entry may have that in a third of its rounds (max_rounds 12: 4), not in every round: each
    round's run is told how many it has left, and with none left the check rejects. The count survives
    an interruption: it is stored with each block."""
    d = str(tmp_path)
    first = FakeBlocks(seed=5, stop_after=6, redrawn="/subs/copy.py")  # killed in round 2 or 3
    with open_store(d) as st, pytest.raises(KeyboardInterrupt):
        run_final(st, plan(min_rounds=8), "s", first)
    with open_store(d) as st:
        _f, ranking, resumed = run_final(st, plan(min_rounds=8), "s", FakeBlocks(seed=6, redrawn="/subs/copy.py"))
    assert resumed
    [out] = [p for p in ranking.places if p.failed]
    assert out.name == "copy" and (out.failed or "").startswith("round 5: rejected: ") and ESCAPED_WORK in out.failed
    assert {p.name for p in ranking.places if not p.failed} == {"orig", "slow"}


def test_rounds_are_added_while_a_pair_is_undecided():
    e1 = FinalEntry("a", "a", "a", {0: 10.0, 1: 10.5, 2: 9.8})
    e2 = FinalEntry("b", "b", "b", {0: 10.2, 1: 10.3, 2: 10.1})  # noisy paired differences: undecided
    ranking = rank_final([e1, e2])
    assert ranking.undecided and needs_more_rounds(ranking, 3, 10)
    assert not needs_more_rounds(ranking, 3, 3)  # the budget is spent


def _entries(diffs: list[float]) -> tuple[FinalEntry, FinalEntry]:
    """Two entries whose per-round log differences (A over B) are ``diffs``."""
    return (
        FinalEntry("a", "a", "a", {r: 10.0 * math.exp(d) for r, d in enumerate(diffs)}),
        FinalEntry("b", "b", "b", {r: 10.0 for r in range(len(diffs))}),
    )


@pytest.mark.parametrize("mean", [0.06, -0.06, 0.002])
def test_rounds_to_settle_is_where_the_same_mean_and_spread_would_settle(mean):
    """A 6% difference with a 10% spread a round, undecided after 10 rounds (nvfp4 on an H100 did that),
    and two equal entries with a tight spread: the estimate is where the rule would settle such rounds."""
    sd = 0.12 if abs(mean) > 0.01 else 0.02
    diffs = [mean + sd * z for z in (1, -1, 0.5, -0.5, 1.2, -1.2, 0.3, -0.3, 0.8, -0.8)]
    a, b = _entries(diffs)
    assert not paired(list(a.scores.values()), list(b.scores.values())).settled
    n = rounds_to_settle(a, b)
    assert n is not None and n > len(diffs)
    s = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1))
    room = abs(mean) if abs(mean) > math.log1p(0.01) else math.log1p(0.01) - abs(mean)
    settled = lambda k: t_quantile(0.95, k - 1) * s / math.sqrt(k) < room  # noqa: E731
    assert settled(n) and not settled(int(n / 1.06) - 1)  # within the estimate's 5% steps


def test_rounds_to_settle_gives_none_where_no_number_of_rounds_would():
    assert rounds_to_settle(*_entries([0.05])) is None  # one round: no spread yet
    # just inside the margin: an equivalence would need the interval narrower than 0.01% (> 10,000 rounds)
    near_the_margin = [math.log1p(0.01) - 1e-4 + 0.03 * z for z in (1, -1, 1, -1)]
    assert rounds_to_settle(*_entries(near_the_margin)) is None


def test_a_final_that_runs_out_of_rounds_says_how_many_would_settle_its_pairs(tmp_path):
    lines: list[str] = []
    with open_store(str(tmp_path)) as st:
        _f, ranking, _ = run_final(st, plan(max_rounds=3), "s", FakeBlocks(seed=7), progress=lines.append)
    assert ranking.rounds == 3 and ranking.undecided
    assert len(ranking.rounds_to_settle) == len(ranking.undecided)
    assert ranking.to_dict()["rounds_to_settle"] == ranking.rounds_to_settle
    [last] = [line for line in lines if "--max-rounds 3 reached" in line]
    for (a, b), n in zip(ranking.undecided, ranking.rounds_to_settle):
        assert f"{a} / {b} (about {n} rounds in all would settle it)" in last


def _store_with_a_final(tmp_path, **kw) -> str:
    """A results folder holding ENTRIES' runs and one finished final scoring of them (``kw``: the plan's)."""
    d = str(tmp_path / "res")
    with open_store(d) as st:
        for sha, name, path in ENTRIES:
            r = make_result(name, sha=sha)
            r.submission.path = path
            st.record(r)
        run_final(st, plan(**kw), "s", FakeBlocks(seed=7 if kw else 1))
    return d


def test_the_board_and_the_site_say_how_many_rounds_would_settle_an_undecided_pair(tmp_path):
    from harness.report.site import build_site

    d = _store_with_a_final(tmp_path, max_rounds=3)  # seed 7: copy / orig undecided after 3 rounds
    board, _ = load_board("mxfp4_mm", results_dir=d)
    final = board.boards[0].final
    assert final is not None and final["undecided"] and final["rounds_to_settle"][0]
    wanted = f"copy / orig (about {final['rounds_to_settle'][0]} rounds in all would settle it)"
    assert wanted in render_board(board, "table")
    build_site(tmp_path / "site", ["mxfp4_mm"], results_dir=d)
    assert wanted in (tmp_path / "site" / "index.html").read_text()


def test_the_board_shows_the_latest_final(tmp_path):
    d = _store_with_a_final(tmp_path)
    board, _ = load_board("mxfp4_mm", results_dir=d)
    (section,) = board.boards
    assert section.final is not None and section.final["places"][0]["rank_label"] == "=1"
    text = render_board(board, "table")
    assert "final scoring 1:" in text and "slow" in text.split("final scoring 1:")[1]
    assert board.to_dict()["devices"][0]["final"]["version"] == 2


def test_the_site_shows_the_latest_final(tmp_path):
    from harness.report.site import build_site

    d = _store_with_a_final(tmp_path)
    build = build_site(tmp_path / "site", ["mxfp4_mm"], results_dir=d)
    (section,) = build.model.tasks[0].sections
    assert section.final is not None and [r.rank_label for r in section.final.rows] == ["=1", "=1", "3"]
    html = (tmp_path / "site" / "index.html").read_text()
    assert "Final scoring 1" in html and "No complete passing run" not in html


def test_the_final_command_refuses_what_it_cannot_score(tmp_path, capsys):
    from harness.cli.main import main

    d = str(tmp_path / "res")
    with open_store(d) as st:
        st.record(make_result("alone", sha="a" * 64))
    argv = ["final", "--task", "mxfp4_mm", "--top", "3", "--device", "cpu", "--board-device", "NVIDIA H200"]
    assert main([*argv, "--results-dir", d]) == 2
    assert "needs two or more" in capsys.readouterr().err
    with open_store(d) as st:
        st.record(make_result("other", sha="b" * 64))  # its file /subs/other.py does not exist
    assert main([*argv, "--results-dir", d]) == 2
    err = capsys.readouterr().err
    assert "is gone" in err and "restore it" in err
    assert main([*argv, "--min-rounds", "5", "--max-rounds", "2", "--results-dir", d]) == 2
    assert "--max-rounds" in capsys.readouterr().err


def test_the_outlook_says_which_neighbours_a_final_can_tell_apart_and_in_about_how_many_rounds():
    """From the board: a gap within the margin can only end tied; a wider one needs the rounds at which a
    paired t interval (the two entries' block spreads combined) would exclude it; no blocks, no estimate."""
    se = 0.009  # each entry's standard error of its log score, from 10 blocks
    places = [
        BoardPlace("a", 10.0, 10.0 * se, "blocks", 10),
        BoardPlace("b", 10.05, 10.05 * se, "blocks", 10),  # 0.5% behind a
        BoardPlace("c", 10.5, 10.5 * se, "blocks", 10),  # 4.5% behind b
        BoardPlace("d", 11.0, 0.01, "samples", 1),  # one process: no spread between blocks
    ]
    lines = outlook(places, margin=0.01)
    assert len(lines) == 3
    assert lines[0].startswith("a / b: 0.5% apart") and "within the 1.0% margin" in lines[0]
    sd = math.hypot(*[se * math.sqrt(10)] * 2)  # one round's difference
    gap = math.log(10.5 / 10.05)
    wanted = next(n for n in range(2, 1000) if t_quantile(0.95, n - 1) * sd / math.sqrt(n) < gap)
    assert f"about {wanted} rounds would tell them apart" in lines[1] and lines[1].startswith("b / c: 4.5% apart")
    assert f"spreading about {sd:.1%}" in lines[1]
    assert lines[2].startswith("c / d: 4.8% apart") and "no spread between blocks" in lines[2]


def test_the_final_command_says_what_the_board_says_before_its_first_round(tmp_path, capsys, monkeypatch):
    import harness.engine.final as engine_final
    from harness.cli.main import main

    d = str(tmp_path / "res")
    with open_store(d) as st:
        for name in ("one", "two"):
            path = tmp_path / f"{name}.py"
            path.write_text(f"# {name}\n")
            r = make_result(name, sha=hashlib.sha256(path.read_bytes()).hexdigest())
            r.submission.path = str(path)
            st.record(r)

    def no_rounds(*_args, **_kw):
        raise KeyboardInterrupt  # stop before the first block: only what was said before it matters

    monkeypatch.setattr(engine_final, "run_final", no_rounds)
    argv = ["final", "--task", "mxfp4_mm", "--top", "2", "--device", "cpu", "--board-device", "NVIDIA H200"]
    main([*argv, "--results-dir", d])
    err = capsys.readouterr().err
    assert "what the board says (this final runs 3 rounds at least, --max-rounds 10 at most)" in err
    assert "apart on the board" in err and ("one / two" in err or "two / one" in err)
