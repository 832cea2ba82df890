"""The tie rule, the block interval and the blocks' plumbing, on fake timings (no process started).

The fake runs have what a GPU shows between reruns (issue #50): samples within a block agree to 0.1%,
while blocks (fresh worker, fresh inputs) spread by 2%. One process's standard error then says nothing
about a rerun; the blocks' spread does.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import random

import pytest

from harness.analysis import ties
from harness.analysis.blocks import combine, interval_from_blocks, spread_warning
from harness.analysis.ranking import RankRule, ShapeTime, build_leaderboard, entry_spread, score
from harness.cli.main import main
from harness.engine.blocks import default_blocks, merge_cases, shape_order
from harness.engine.stop_rule import StopRule
from harness.report.board import load_board
from harness.results import PASS, BlockRecord, CaseResult, RunResult, Stats
from harness.store.database import open_store
from tests.helpers import make_result

WITHIN, BETWEEN, BLOCKS, N = 0.001, 0.02, 10, 20


def blocked_result(
    name: str, base_us: float, rng: random.Random, blocks: int = BLOCKS, between: float = BETWEEN
) -> RunResult:
    """A ranked run of ``blocks`` blocks: per-shape means ``base_us`` and twice that, each block off by a
    factor drawn with a 2% sd, its samples within 0.1% of the block's mean."""
    means = (base_us, 2 * base_us)
    factors = [math.exp(rng.gauss(0.0, between)) for _ in range(blocks)]
    r = make_result(name, means, sha=hashlib.sha256(f"{name}-{rng.random()}".encode()).hexdigest())
    bench = [c for c in r.cases if c.kind == "benchmark"]
    per_block: list[list[float]] = [[] for _ in range(blocks)]
    for case, mean in zip(bench, means):
        samples = []
        for b, f in enumerate(factors):
            xs = [mean * f * 1e3 * (1 + WITHIN * rng.gauss(0.0, 1.0)) for _ in range(N)]
            per_block[b].append(sum(xs) / len(xs) / 1e3)
            samples += xs
        case.stats = Stats.from_samples(samples)
    r.blocks = [
        BlockRecord(b, b, [0, 1], list(m), [N, N], combine(m, "geom"), {"note": "fake"}, {"note": "fake"})
        for b, m in enumerate(per_block)
    ]
    return r


def board(tmp_path, results, margin=ties.DEFAULT_MARGIN):
    d = str(tmp_path / "res")
    with open_store(d) as st:
        for r in results:
            st.record(r)
    lb, _ = load_board("mxfp4_mm", results_dir=d, margin=margin)
    (b,) = lb.boards
    return b


def test_identical_files_tie_and_a_5_percent_difference_is_decided(tmp_path):
    all_tied, decided = 0, 0
    for seed in range(10):
        rng = random.Random(seed)
        copies = [blocked_result(f"copy{i}", 10.0, rng) for i in range(3)]
        slower = blocked_result("slower", 10.5, rng)
        b = board(tmp_path / str(seed), [*copies, slower])
        labels = {e.name: e.rank_label for e in b.ranked}
        all_tied += labels["copy0"] == labels["copy1"] == labels["copy2"] == "=1"
        decided += labels["slower"] == "4"
        assert all(e.interval_source == "blocks" and e.blocks == BLOCKS for e in b.ranked)
    assert all_tied >= 9 and decided >= 9, (all_tied, decided)


def test_one_process_errors_would_rank_the_same_copies_apart(tmp_path):
    """The control: with 5% between blocks (beyond the margin's help), the samples' standard error
    (0.1% / sqrt(200)) splits the copies in nearly every board. The blocks' rule splits a board only by its
    5% false-positive rate per comparison (two comparisons with the fastest copy: about 10-15% of boards)."""
    tied_blocks, tied_samples = 0, 0
    for seed in range(10):
        rng = random.Random(100 + seed)
        copies = [blocked_result(f"copy{i}", 10.0, rng, between=0.05) for i in range(3)]
        with_blocks = board(tmp_path / f"a{seed}", copies)
        tied_blocks += [e.rank_label for e in with_blocks.ranked] == ["=1", "=1", "=1"]
        for r in copies:
            r.blocks = []
        without = board(tmp_path / f"b{seed}", copies)
        assert all(e.interval_source == "samples" for e in without.ranked)
        tied_samples += [e.rank_label for e in without.ranked] == ["=1", "=1", "=1"]
    assert tied_blocks >= 8 and tied_samples <= 2, (tied_blocks, tied_samples)


def test_a_run_whose_blocks_shared_one_worker_counts_as_one_process_on_the_board(tmp_path):
    """--same-worker renews inputs and order but not the process: its blocks spread less than a rerun
    differs (0.37% against 0.73% on the H200), so the board does not take them for independent runs."""
    rng = random.Random(7)
    fresh, shared = blocked_result("fresh", 10.0, rng), blocked_result("shared", 10.0, rng)
    for b in shared.blocks[1:]:
        b.fresh_worker = False
    labels = {e.name: (e.interval_source, e.blocks) for e in board(tmp_path, [fresh, shared]).ranked}
    assert labels == {"fresh": ("blocks", BLOCKS), "shared": ("samples", 1)}


def test_identical_content_is_one_entry(tmp_path):
    rng = random.Random(7)
    a = blocked_result("a", 10.0, rng)
    b = blocked_result("b", 10.2, rng)
    b.submission.sha256 = a.submission.sha256
    (entry,) = board(tmp_path, [a, b]).ranked
    assert entry.name == "b" and entry.aliases == ["a"]  # the name it was last submitted under
    assert len(entry.run_ids) == 2 and entry.blocks == 2 * BLOCKS  # both runs' blocks


def test_decide_log_cases():
    m = math.log1p(0.01)
    assert ties.decide_log(-0.05, 0.005, 20).call is ties.Call.FASTER
    assert ties.decide_log(0.05, 0.005, 20).call is ties.Call.SLOWER
    small = ties.decide_log(0.005, 0.001, 20)  # significant but inside the 1% margin
    assert small.call is ties.Call.TIED and small.settled
    wide = ties.decide_log(0.02, 0.05, 5)
    assert wide.call is ties.Call.TIED and not wide.settled
    assert ties.decide_log(0.0, 0.001, 30).settled  # interval within +-margin: equivalent
    assert ties.decide_log(m * 0.5, math.nan, math.nan).call is ties.Call.TIED
    with pytest.raises(ValueError, match="margin"):
        ties.decide_log(0.0, 0.01, 5, margin=-1)


def test_paired_rounds_decide_what_independent_entries_cannot():
    """Round effects shared by both sides cancel in the paired differences."""
    rng = random.Random(11)
    rounds = [math.exp(rng.gauss(0, 0.05)) for _ in range(8)]  # 5% between rounds, shared
    a = [10.0 * f * (1 + 0.002 * rng.gauss(0, 1)) for f in rounds]
    b = [10.3 * f * (1 + 0.002 * rng.gauss(0, 1)) for f in rounds]  # 3% slower
    assert ties.paired(a, b).call is ties.Call.FASTER
    sa, sb = ties.spread_from_blocks(10.0, a), ties.spread_from_blocks(10.3, b)
    assert sa is not None and sb is not None
    assert ties.welch(sa, sb).call is ties.Call.TIED
    with pytest.raises(ValueError):
        ties.paired([1.0], [1.0, 2.0])


def test_block_interval():
    scores = [10.0, 10.2, 9.9, 10.1, 10.0]
    iv = interval_from_blocks(10.04, scores)
    assert iv is not None and iv.blocks == 5 and iv.df == 4
    logs = [math.log(s) for s in scores]
    mean = sum(logs) / 5
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 4)
    assert iv.high_us == pytest.approx(10.04 * math.exp(2.776445 * sd / math.sqrt(5)), rel=1e-5)
    assert iv.low_us < 10.04 < iv.high_us
    assert interval_from_blocks(10.0, [10.0]) is None
    assert spread_warning(iv) is None
    wide = interval_from_blocks(10.0, [5.0, 20.0, 10.0])
    warning = spread_warning(wide)
    assert warning is not None and "spread by" in warning


def test_stop_rule_splits_its_budget_across_blocks():
    rule = StopRule(min_samples=3, target_rel_err=0.001, max_measured_ns=30e9, wall_cap_s=120.0, max_samples=100)
    part = rule.for_blocks(10)
    assert part.max_samples == 10 and part.max_measured_ns == pytest.approx(3e9) and part.wall_cap_s == 12.0
    assert part.target_rel_err == pytest.approx(0.001 * math.sqrt(10))
    assert rule.for_blocks(1) is rule
    assert rule.for_blocks(100).max_samples == 3  # never below min_samples


def test_block_defaults_and_shape_orders():
    assert default_blocks(None, ranked=True, gpu=True) == 10
    assert default_blocks(None, ranked=False, gpu=True) == 1
    assert default_blocks(4, ranked=False, gpu=False) == 4
    assert shape_order(5, 0, None) == [0, 1, 2, 3, 4]
    orders = [shape_order(6, b, "secret") for b in range(8)]
    assert all(sorted(o) == list(range(6)) for o in orders) and len({tuple(o) for o in orders}) > 1
    assert shape_order(6, 3, "secret") == orders[3]  # reproducible from the secret
    assert [shape_order(6, b, "other") for b in range(8)] != orders  # and different for another secret


def test_merge_cases_pools_samples_and_keeps_the_worst_verdict():
    a = CaseResult("leaderboard", {"m": 1}, PASS, stats=Stats.from_samples([1.0, 2.0, 3.0]))
    b = CaseResult("leaderboard", {"m": 1}, PASS, stats=Stats.from_samples([4.0, 5.0, 6.0]), warnings=["w"])
    merged = merge_cases([a, b])
    assert merged.stats is not None and merged.stats.runs == 6 and merged.stats.mean == 3.5
    assert merged.verdict == PASS and merged.warnings == ["w"]
    bad = CaseResult("leaderboard", {"m": 1}, "fail", "wrong at [0]")
    merged = merge_cases([a, bad])
    assert merged.verdict == "fail" and merged.message == "wrong at [0]"


def test_ranking_is_pure_and_takes_block_scores_as_plain_data():
    import harness.analysis.ranking as ranking

    source = open(ranking.__file__).read().splitlines()
    assert not [line for line in source if line.startswith(("from harness.store", "import harness.store"))]
    shapes = [ShapeTime("a", 10.0, 0.001)]
    s = score(shapes, RankRule.GEOM)
    spread = entry_spread(s, [9.0, 10.0, 11.0])
    assert spread.source == "blocks" and spread.df == 2
    assert entry_spread(s, []).source == "samples"
    lb = build_leaderboard("t", RankRule.GEOM, [], {})
    assert lb.boards == [] and lb.to_dict()["tie_rule"]["version"] == ties.TIE_RULE_VERSION


def test_schema_2_round_trips_blocks_and_the_interval_and_reads_version_1():
    import json

    from harness.results import SCHEMA_VERSION, RunResult, ScoreInterval

    r = blocked_result("a", 10.0, random.Random(5))
    r.score_interval = ScoreInterval(9.9, 10.1, "blocks-t", BLOCKS, 0.95, 9.0, 0.004, 0.013, 1)
    back = RunResult.from_json(r.to_json())
    assert back.blocks == r.blocks and back.score_interval == r.score_interval
    assert SCHEMA_VERSION == 2 and back.schema_version == 2
    old = json.loads(r.to_json())
    old["schema_version"] = 1
    del old["blocks"], old["score_interval"]
    legacy = RunResult.from_dict(old)
    assert legacy.blocks == [] and legacy.score_interval is None
    with pytest.raises(ValueError, match="schema_version 99"):
        RunResult.from_dict(dict(old, schema_version=99))


def _old_and_newer_setting(tmp_path, rng: random.Random, **setting):
    """A store with a run "old" and a later run "new" whose blocks were measured with ``setting``;
    (the store's folder, "new", the board's only section, its warnings)."""
    old, new = blocked_result("old", 10.0, rng), blocked_result("new", 10.0, rng)
    new.started_at = new.finished_at = "2026-11-02T10:00:00+00:00"
    for b in new.blocks:
        for key, value in setting.items():
            setattr(b, key, value)
    d = str(tmp_path / "res")
    with open_store(d) as st:
        for r in (old, new):
            st.record(r)
    lb, warnings = load_board("mxfp4_mm", results_dir=d)
    (section,) = lb.boards
    return d, new, section, warnings


def test_a_board_does_not_rank_runs_of_different_lead_ins_together(tmp_path):
    """A run whose chunks got the lead-in less often (RunOptions.lead_in) is a different warm-up setting:
    the board ranks the latest run's, and its note names the setting it left out."""
    _d, _new, section, warnings = _old_and_newer_setting(tmp_path, random.Random(12), lead_in="case")
    assert [e.name for e in section.ranked] == ["new"]
    note = [w for w in warnings if "left out 1 run(s)" in w]
    assert note and "--warmup-chunks 0 and lead-in case (the latest run's)" in note[0], warnings
    assert "measured with --warmup-chunks 0 (old)" in note[0], note


def test_a_board_ranks_runs_of_one_warm_up_and_says_which_it_left_out(tmp_path):
    """Runs measured with different --warmup-chunks are not compared: the board ranks the latest run's
    setting, and its note names the runs it left out; compare takes the same runs."""
    rng = random.Random(11)
    d, new, section, warnings = _old_and_newer_setting(tmp_path, rng, warmup_chunks=2)
    assert [e.name for e in section.ranked] == ["new"]
    assert any("--warmup-chunks 2" in w and "left out 1 run(s)" in w and "(old)" in w for w in warnings), warnings
    other, new_before = blocked_result("other", 10.0, rng), blocked_result("new", 10.0, rng)
    other.started_at = other.finished_at = "2026-11-03T10:00:00+00:00"
    for b in other.blocks:
        b.warmup_chunks = 2
    new_before.submission.sha256 = new.submission.sha256  # an earlier run of "new", without the warm-up
    with open_store(d) as st:
        st.record(other)
        st.record(new_before)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()) as err:
        code = main(["compare", "other", "new", "--task", "mxfp4_mm", "--results-dir", d, "--format", "json"])
    assert code == 0 and "left out 1 run(s)" in err.getvalue()
    assert len(json.loads(out.getvalue())["b"]["run_ids"]) == 1
    with contextlib.redirect_stderr(io.StringIO()) as err:
        assert main(["compare", "other", "old", "--task", "mxfp4_mm", "--results-dir", d]) == 2
    assert "that the board would rank" in err.getvalue()
