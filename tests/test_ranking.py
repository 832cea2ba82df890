"""Ranking: rules, failed runs listed not scored, per-device sections, best run, ties."""

from __future__ import annotations

import math

import pytest

from harness.analysis.ranking import RankRule, ShapeTime, build_leaderboard, score
from harness.analysis.ties import Spread, rank_groups
from harness.store.database import open_store
from tests.helpers import make_result


def board_of(tmp_path, results, rule=RankRule.GEOM, device=None, incomplete=()):
    with open_store(str(tmp_path)) as st:
        for r in results:
            st.record(r)
        for r in incomplete:
            st.begin_run(r.task, r.mode, r.submission)
        runs = st.runs(task="mxfp4_mm")
        return build_leaderboard("mxfp4_mm", rule, runs, st.cases(x.id for x in runs), device=device)


def test_rules():
    shapes = [ShapeTime("a", 10.0, 0.1), ShapeTime("b", 40.0, 0.4)]
    g = score(shapes, RankRule.GEOM)
    assert g.value_us == pytest.approx(20.0)
    # delta method on log: var(log G) = sum((se/m)^2) / n^2 = 2 * 0.01^2 / 4
    assert g.stderr_us == pytest.approx(20.0 * math.sqrt(2 * 1e-4 / 4))
    m = score(shapes, RankRule.MEAN)
    assert (m.value_us, m.stderr_us) == pytest.approx((25.0, math.sqrt(0.01 + 0.16) / 2))
    assert score(shapes, RankRule.LAST).value_us == 40.0


def test_geomean_ranking_excludes_and_lists_failures(tmp_path):
    results = [
        make_result("slow", (20.0, 40.0)),
        make_result("fast", (10.0, 20.0)),
        make_result("broken", verdict="fail", message="mismatch at [0, 3]: 1.5 vs 2.0"),
        make_result("crashy", verdict="error", message="ImportError: no module named foo"),
    ]
    lb = board_of(tmp_path, results, incomplete=[make_result("killed")])
    boards = {b.device: b for b in lb.boards}
    b = boards["NVIDIA H200"]
    assert [(e.rank_label, e.name) for e in b.ranked] == [("1", "fast"), ("2", "slow")]
    assert b.ranked[0].score_us == pytest.approx(math.sqrt(10 * 20))
    assert b.ranked[1].gap_x == pytest.approx(2.0)
    assert b.ranked[1].gap_us == pytest.approx(math.sqrt(800) - math.sqrt(200))
    assert {u.name: u.verdict for u in b.unranked} == {"broken": "fail", "crashy": "error"}
    assert "mismatch" in next(u.reason for u in b.unranked if u.name == "broken")
    # an interrupted run never learned its device: it gets its own section, listed as incomplete
    (killed,) = boards["(unknown device)"].unranked
    assert killed.name == "killed" and killed.verdict == "incomplete" and "interrupted" in killed.reason


def test_devices_are_never_mixed(tmp_path):
    results = [
        make_result("a", (10.0, 10.0)),
        make_result("b", (1000.0, 1000.0), device="cpu", kind="cpu"),
        make_result("a", (500.0, 500.0), device="cpu", kind="cpu"),
    ]
    lb = board_of(tmp_path, results)
    names = {b.device: [e.name for e in b.ranked] for b in lb.boards}
    assert names == {"NVIDIA H200": ["a"], "cpu": ["a", "b"]}
    only = board_of(tmp_path / "2", results, device="cpu")
    assert [b.device for b in only.boards] == ["cpu"]


def test_every_complete_passing_run_counts_pooled_not_the_best_one(tmp_path):
    sha = "f" * 64
    results = [
        make_result("k", (12.0, 12.0), sha=sha, started_at="2026-11-01T00:00:00+00:00"),
        make_result("k", (10.0, 10.0), sha=sha, started_at="2026-11-02T00:00:00+00:00"),
        make_result("k", (5.0, 5.0), sha=sha, complete=False, started_at="2026-11-03T00:00:00+00:00"),
        make_result("k", sha=sha, verdict="fail", started_at="2026-11-04T00:00:00+00:00"),
        make_result("k", (11.0, 11.0), sha=sha, mode="test", started_at="2026-11-05T00:00:00+00:00"),
    ]
    results[-1].cases = results[-1].cases[:1]  # a test-only run has no timings
    (b,) = board_of(tmp_path, results).boards
    (e,) = b.ranked
    # the two complete, passing runs with timings, their samples together: 11, not the best draw's 10
    assert e.score_us == pytest.approx(11.0) and e.date.startswith("2026-11-02") and not b.unranked
    assert len(e.run_ids) == 2 and e.run_id == e.run_ids[-1]
    # runs of one process each: each run is one block, so the interval is the spread between the runs
    assert e.interval_source == "blocks" and e.blocks == 2 and e.low_us < 10.0 and e.high_us > 12.0


def test_resubmitting_one_file_does_not_move_its_entry_down_by_selection(tmp_path):
    """Five draws around 10 us: the best would be 9.5; the pooled entry stays at the draws' centre."""
    sha = "e" * 64
    draws = (10.5, 9.5, 10.0, 10.2, 9.8)
    results = [
        make_result("lucky", (m, m), sha=sha, started_at=f"2026-11-0{i + 1}T00:00:00+00:00")
        for i, m in enumerate(draws)
    ]
    (b,) = board_of(tmp_path, results).boards
    (e,) = b.ranked
    assert e.score_us == pytest.approx(sum(draws) / len(draws)) and e.blocks == len(draws)


def test_other_content_is_another_submission(tmp_path):
    """Two contents under one name are two entries; the board tells them apart by their content's hash."""
    results = [make_result("k", (10.0, 10.0), sha="a" * 64), make_result("k", (20.0, 20.0), sha="b" * 64)]
    results.append(make_result("other", (30.0, 30.0), sha="c" * 64))
    (b,) = board_of(tmp_path, results).boards
    assert [e.score_us for e in b.ranked] == pytest.approx([10.0, 20.0, 30.0])
    assert [e.name for e in b.ranked] == ["k #aaaaaaa", "k #bbbbbbb", "other"]
    assert b.ranked[1].vs_leader["leader"] == "k #aaaaaaa"


def test_test_only_submission_is_listed_with_reason(tmp_path):
    r = make_result("tested", mode="test")
    r.cases = r.cases[:1]
    (b,) = board_of(tmp_path, [r]).boards
    assert not b.ranked and "no benchmark timings" in b.unranked[0].reason


def test_ties_within_error_share_a_rank(tmp_path):
    # 1% noise, 20 samples: se is about 0.22% of the mean; 10.00 vs 10.01 overlaps, 10.5 does not
    results = [
        make_result("a", (10.0, 10.0)),
        make_result("b", (10.01, 10.01)),
        make_result("c", (10.5, 10.5)),
        make_result("d", (10.502, 10.502)),
    ]
    (b,) = board_of(tmp_path, results).boards
    assert [(e.name, e.rank_label) for e in b.ranked] == [("a", "=1"), ("b", "=1"), ("c", "=3"), ("d", "=3")]


def test_ties_are_not_chained():
    # 2% apart each, se 1% each: a~b, b~c (the difference is not significant), but not a~c (4%, significant)
    scores = [Spread(10.0, 0.01, 20), Spread(10.2, 0.01, 20), Spread(10.4, 0.01, 20)]
    assert rank_groups(scores) == [(1, True), (1, True), (3, False)]
    nan = math.nan
    # no uncertainty known: equal scores tie, and so do different ones (cannot tell them apart)
    assert rank_groups([Spread(1.0, nan, nan), Spread(1.0, nan, nan), Spread(2.0, nan, nan)]) == [
        (1, True),
        (1, True),
        (1, True),
    ]
