"""The between-run spread that consecutive blocks miss (harness.analysis.run_spread): looked up per device
and task, added to a run's interval and to the board's spreads, and measured from boards of identical
copies by bench/run_spread.py. On the H200, nvfp4_gemm's copies spread 2.3% between runs against their
blocks' 1.4%, and identical files were ranked apart in 4 of 10 boards (results/ranks/)."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

from harness.analysis import run_spread
from harness.analysis.blocks import interval_from_blocks
from harness.analysis.run_spread import Rerun, RunSpread, lookup, widen
from tests.test_ties import blocked_result

ROOT = Path(__file__).resolve().parent.parent


def _write(path: Path, rows: dict) -> Path:
    path.write_text(json.dumps({"version": 1, "devices": rows}))
    return path


def test_lookup_by_device_model_and_task(tmp_path, capsys):
    f = _write(tmp_path / "s.json", {"H200": {"nvfp4_gemm": {"sd_log": 0.02, "df": 20, "source": "boards"}}})
    assert lookup("NVIDIA H200", "nvfp4_gemm", f) == RunSpread(0.02, 20.0, "boards")
    assert lookup("NVIDIA H200", "mxfp4_mm", f) is None  # no row: the blocks alone
    assert lookup("NVIDIA B200", "nvfp4_gemm", f) == RunSpread(0.02, 20.0, "boards", borrowed_from="H200")
    assert lookup("cpu", "nvfp4_gemm", f) is None
    assert lookup("NVIDIA H200", "nvfp4_gemm", tmp_path / "none.json") is None
    assert capsys.readouterr().err == ""
    for row in ({"sd_log": "x", "df": 2, "source": ""}, {"df": 2, "source": ""}, {"sd_log": -1, "df": 2, "source": ""}):
        bad = _write(tmp_path / "bad.json", {"H200": {"nvfp4_gemm": row}})
        assert lookup("NVIDIA H200", "nvfp4_gemm", bad) is None
        assert "no between-run spread added" in capsys.readouterr().err
    (tmp_path / "broken.json").write_text("{")
    assert lookup("NVIDIA H200", "nvfp4_gemm", tmp_path / "broken.json") is None
    assert "unreadable" in capsys.readouterr().err


def test_a_model_without_a_row_borrows_the_tasks_widest_and_says_so(tmp_path, monkeypatch):
    """On an H100 with no row, boards ranked identical nvfp4 copies apart in 2 of 3: a model with no row of
    its own takes the task's widest nonzero row of another model; its own row, even a smaller one, wins."""
    from harness.report.board import interval_notes

    rows = {
        "H200": {
            "nvfp4_gemm": {"sd_log": 0.018, "df": 20, "source": "h200"},
            "mxfp4_mm": {"sd_log": 0.0, "df": 22, "source": "z"},
        },
        "H100": {"nvfp4_gemm": {"sd_log": 0.03, "df": 6, "source": "h100"}},
        "MI355X": {"nvfp4_gemm": {"sd_log": 0.001, "df": 9, "source": "mine"}},
    }
    f = _write(tmp_path / "rows.json", rows)
    assert lookup("NVIDIA B200", "nvfp4_gemm", f) == RunSpread(0.03, 6.0, "h100", borrowed_from="H100")
    assert lookup("NVIDIA H200", "nvfp4_gemm", f) == RunSpread(0.018, 20.0, "h200")  # its own row
    assert lookup("AMD Instinct MI355X", "nvfp4_gemm", f) == RunSpread(0.001, 9.0, "mine")
    assert lookup("NVIDIA B200", "mxfp4_mm", f) is None  # a zero row is not borrowed: nothing is known
    warning = run_spread.borrowed_warning(lookup("NVIDIA B200", "nvfp4_gemm", f), "nvfp4_gemm")
    assert warning and "adds the 3.00% measured on the H100" in warning, warning
    assert run_spread.borrowed_warning(lookup("NVIDIA H200", "nvfp4_gemm", f), "nvfp4_gemm") is None
    assert lookup("cpu", "nvfp4_gemm", f) is None

    monkeypatch.setattr(run_spread, "package_file", lambda: f)
    monkeypatch.setattr(run_spread, "user_file", lambda: tmp_path / "no-user-file.json")
    copies = _runs_with_a_run_level_effect(0)
    for r in copies:
        r.device = dataclasses.replace(r.device, name="NVIDIA B200")
    b = _board(tmp_path / "board", copies)
    assert (b.run_sd, b.run_sd_borrowed_from) == (0.03, "H100")
    assert any(
        "measured on the H100" in n and "no between-run spread is measured" in n for n in interval_notes(b.ranked, b)
    )


def test_the_user_data_folder_wins_over_the_package_for_the_rows_it_holds(tmp_path, monkeypatch):
    package = _write(tmp_path / "package.json", {"H200": {"nvfp4_gemm": {"sd_log": 0.02, "df": 20, "source": "p"}}})
    user = tmp_path / "xdg" / "fp4-harness" / "run_spread.json"
    monkeypatch.setattr(run_spread, "package_file", lambda: package)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    if run_spread.user_file() != user:
        pytest.skip("the user data folder is redirected through $XDG_DATA_HOME, a Linux convention")
    assert lookup("NVIDIA H200", "nvfp4_gemm") == RunSpread(0.02, 20.0, "p")  # no user file yet
    user.parent.mkdir(parents=True)
    _write(user, {"H200": {"nvfp4_gemm": {"sd_log": 0.005, "df": 12, "source": "mine"}}})
    assert lookup("NVIDIA H200", "nvfp4_gemm") == RunSpread(0.005, 12.0, "mine")
    assert lookup("NVIDIA H200", "mxfp4_mm") is None


def test_widen_adds_the_variance_over_the_runs_with_satterthwaite_df():
    assert widen(1e-4, 9.0, None) == (1e-4, 9.0)
    assert widen(1e-4, 9.0, RunSpread(0.0, 20, "")) == (1e-4, 9.0)
    var, df = widen(1e-4, 9.0, RunSpread(0.02, 20, ""))
    assert var == pytest.approx(1e-4 + 4e-4) and 9 < df < 29
    var2, _ = widen(1e-4, 9.0, RunSpread(0.02, 20, ""), runs=4)  # a pooled entry of 4 runs: a quarter
    assert var2 == pytest.approx(1e-4 + 1e-4)


def test_a_runs_interval_adds_the_measured_spread():
    blocks = [10.0 * math.exp(0.004 * z) for z in (-1.5, -0.5, 0.5, 1.5, -1, 1, 0, 0.2, -0.2, 0.1)]
    alone = interval_from_blocks(10.0, blocks)
    wider = interval_from_blocks(10.0, blocks, between_runs=RunSpread(0.02, 20, "boards"))
    assert alone is not None and wider is not None
    assert (alone.method, alone.run_sd, alone.rule_version) == ("blocks-t", 0.0, 2)
    assert (wider.method, wider.run_sd) == ("blocks-t+run", 0.02)
    assert wider.se_log == pytest.approx(math.sqrt(alone.se_log**2 + 0.02**2))
    assert wider.half_width_rel > 3 * alone.half_width_rel


def _runs_with_a_run_level_effect(seed: int) -> list:
    """Three identical copies whose blocks agree within 0.5% but whose runs differ by a 2.5% sd (what the
    H200's nvfp4 boards showed): each copy's blocks share one factor, as consecutive blocks share a drift."""
    rng = random.Random(seed)
    copies = []
    for i in range(3):
        r = blocked_result(f"copy{i}", 10.0 * math.exp(rng.gauss(0.0, 0.025)), rng, between=0.005)
        r.task = "nvfp4_gemm"
        copies.append(r)
    return copies


def _board(tmp_path, results):
    from harness.report.board import load_board
    from harness.store.database import open_store

    d = str(tmp_path / "res")
    with open_store(d) as st:
        for r in results:
            st.record(r)
    lb, _ = load_board("nvfp4_gemm", results_dir=d)
    return lb.boards[0]


def test_a_measured_run_spread_ties_copies_that_blocks_alone_split(tmp_path, monkeypatch):
    rows = tmp_path / "rows.json"
    monkeypatch.setattr(run_spread, "package_file", lambda: rows)
    monkeypatch.setattr(run_spread, "user_file", lambda: tmp_path / "no-user-file.json")
    tied = {"without": 0, "with": 0}
    for seed in range(10):
        copies = _runs_with_a_run_level_effect(seed)
        for name, row in (("without", {}), ("with", {"nvfp4_gemm": {"sd_log": 0.025, "df": 20, "source": "t"}})):
            _write(rows, {"H200": row})
            b = _board(tmp_path / f"{name}{seed}", copies)
            tied[name] += [e.rank_label for e in b.ranked] == ["=1", "=1", "=1"]
    assert tied["without"] <= 5 and tied["with"] >= 9, tied


def _boards_file(path: Path, rng: random.Random, run_sd: float, boards: int = 12) -> Path:
    """A ranks.py boards file of identical copies whose blocks give a 1% standard error (10 blocks) and whose
    runs differ by ``run_sd`` more, in the older format (half-widths only, rule 1)."""
    from harness.analysis.compare import t_quantile

    t9 = t_quantile(0.95, 9)
    out = []
    for _ in range(boards):
        scores = {f"copy{i}": 20.0 * math.exp(rng.gauss(0.0, math.sqrt(0.01**2 + run_sd**2))) for i in range(3)}
        out.append({"scores_us": scores, "half_width_rel": [0.01 * t9] * 3, "blocks": [10] * 3, "all_tied": True})
    path.write_text(json.dumps({"device": "NVIDIA H200", "tasks": [{"task": "nvfp4_gemm", "boards": out}]}))
    return path


def test_the_script_measures_the_spread_beyond_the_blocks_and_keeps_only_a_significant_one(tmp_path):
    script = [sys.executable, "bench/run_spread.py", "--out", str(tmp_path / "out.json"), "--boards"]
    rng = random.Random(7)
    with_extra = _boards_file(tmp_path / "ranks-extra.json", rng, 0.02, boards=40)
    subprocess.run([*script, str(with_extra)], cwd=ROOT, check=True, capture_output=True, timeout=120)
    row = json.loads((tmp_path / "out.json").read_text())["devices"]["H200"]["nvfp4_gemm"]
    assert row["df"] == 80 and row["boards"] == 40 and row["p_value"] < 0.05
    assert 0.012 < row["sd_log"] < 0.028, row
    none = _boards_file(tmp_path / "ranks-none.json", rng, 0.0, boards=40)
    subprocess.run([*script, str(none)], cwd=ROOT, check=True, capture_output=True, timeout=120)
    row = json.loads((tmp_path / "out.json").read_text())["devices"]["H200"]["nvfp4_gemm"]
    assert row["sd_log_estimate"] == 0.0 and row["p_value"] >= 0.05, row  # no spread beyond the blocks
    # three copies make three pairs, so even exact intervals leave some boards untied: at most the little
    # that brings 9 boards in 10 to a tie is added (bench/run_spread.py's tie floor)
    assert row["boards_all_tied_with_it"] >= 36 and row["sd_log"] < 0.01, row
    assert row["tie_floor"]["raised"] == (row["sd_log"] > 0), row


def test_the_row_takes_the_noisiest_file_so_a_quiet_campaign_cannot_dilute_a_noisy_one(tmp_path):
    """The spread depends on the lease's host: a row must hold on the noisier hosts, so it is the largest
    of the files' spreads; the pool of both files (smaller here) is kept beside it."""
    rng = random.Random(11)
    noisy = _boards_file(tmp_path / "ranks-noisy-boards.json", rng, 0.02, boards=40)
    quiet = _boards_file(tmp_path / "ranks-quiet-boards.json", rng, 0.0, boards=40)
    out = tmp_path / "out.json"
    cmd = [sys.executable, "bench/run_spread.py", "--out", str(out), "--boards", str(quiet), str(noisy)]
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, timeout=120)
    row = json.loads(out.read_text())["devices"]["H200"]["nvfp4_gemm"]
    assert row["source"].endswith("ranks-noisy-boards.json") and row["boards"] == 80, row
    assert 0.012 < row["sd_log"] < 0.028 and row["df"] == 80, row
    assert row["pooled"]["sd_log"] < row["sd_log"] and row["pooled"]["df"] == 160, row
    assert [f["sd_log"] == 0.0 for f in row["files"].values()].count(True) == 1, row["files"]


def test_the_row_is_raised_until_nine_boards_in_ten_tie_where_the_spread_has_a_heavy_tail(tmp_path):
    """An H100's nvfp4 copies once differed by 15% in a board where the estimate was 2.95%: a normal
    estimate misses a heavy tail. Here 10 of 12 boards are quiet and 2 have a copy 12% slower; the row is
    raised to the smallest spread at which 11 of the 12 (9 in 10) tie, and with fewer than 10 boards it
    is not."""
    from harness.analysis.compare import t_quantile

    half = 0.01 * t_quantile(0.95, 9)

    def board(slow: float) -> dict:
        scores = {"copy0": 20.0, "copy1": 20.05, "copy2": 20.0 * (1 + slow)}
        return {"scores_us": scores, "half_width_rel": [half] * 3, "blocks": [10] * 3, "all_tied": slow == 0}

    def row_for(boards: list[dict]) -> dict:
        path = tmp_path / "ranks-tail-boards.json"
        path.write_text(json.dumps({"device": "NVIDIA H200", "tasks": [{"task": "nvfp4_gemm", "boards": boards}]}))
        out = tmp_path / "out.json"
        cmd = [sys.executable, "bench/run_spread.py", "--out", str(out), "--boards", str(path)]
        subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, timeout=120)
        return json.loads(out.read_text())["devices"]["H200"]["nvfp4_gemm"]

    row = row_for([board(0.0)] * 10 + [board(0.12), board(0.14)])
    assert row["tie_floor"] == {"target": 0.9, "boards_needed": 11, "raised": True}, row
    assert row["sd_log"] > row["sd_log_estimate"] and row["boards_all_tied_with_it"] == 11, row
    few = row_for([board(0.0)] * 7 + [board(0.12), board(0.14)])
    assert few["tie_floor"]["raised"] is False and few["sd_log"] == few["sd_log_estimate"], few
    assert few["boards_all_tied_with_it"] < 9, few  # the estimate alone, as the boards are


def test_the_run_text_and_the_site_say_where_the_interval_comes_from():
    from harness.report.site.model import _interval_method
    from harness.results import ScoreInterval
    from tests.helpers import make_result

    r = make_result("a", task="nvfp4_gemm")
    r.score_us, r.score_ci_us = 10.0, [9.5, 10.5]
    r.score_interval = ScoreInterval(9.5, 10.5, "blocks-t+run", 10, 0.95, 28.4, 0.023, 0.04, 2, 0.0184)
    assert "10 blocks and the 1.84% between-run spread" in _interval_method(r)
    r.score_interval = ScoreInterval(9.5, 10.5, "blocks-t", 10, 0.95, 9.0, 0.01, 0.03, 2, 0.0)
    assert _interval_method(r) == "95% interval from 10 blocks (t, 9 degrees of freedom, blocks spread 3.00%)"


def test_a_gpu_board_says_whether_its_intervals_add_a_measured_between_run_spread(tmp_path, monkeypatch):
    from harness.report.board import interval_notes

    rows = tmp_path / "rows.json"
    monkeypatch.setattr(run_spread, "package_file", lambda: rows)
    monkeypatch.setattr(run_spread, "user_file", lambda: tmp_path / "no-user-file.json")
    copies = _runs_with_a_run_level_effect(0)
    _write(rows, {"H200": {"nvfp4_gemm": {"sd_log": 0.025, "df": 20, "source": "t"}}})
    b = _board(tmp_path / "with", copies)
    assert b.run_sd == 0.025
    assert any("add the 2.50% between-run spread" in n for n in interval_notes(b.ranked, b))
    _write(rows, {"H200": {}})
    b = _board(tmp_path / "without", copies)
    assert b.run_sd is None
    assert any("no between-run spread is measured" in n for n in interval_notes(b.ranked, b))
    b.device_kind = "cpu"  # a CPU board's blocks are the warning's business (spread_warning), not this note's
    assert not any("between-run spread" in n for n in interval_notes(b.ranked, b))


def test_an_entry_whose_blocks_are_its_runs_scores_adds_no_between_run_spread():
    """Runs of one block each, pooled: each run's score is one block, so their spread already is a rerun's."""
    from harness.analysis.ranking import RankRule, pool_runs
    from tests.helpers import make_result

    runs = [make_result("a", (10.0, 20.0), started_at=f"2026-11-0{i}T10:00:00+00:00") for i in (1, 2, 3)]
    for r, f in zip(runs, (1.0, 1.02, 0.99)):
        r.id = runs.index(r) + 1
        for c in r.cases:
            if c.stats is not None:
                c.stats = type(c.stats).from_samples([x * f for x in c.stats.samples_ns])
    pooled = pool_runs(runs, {r.id: r.cases for r in runs}, RankRule.GEOM)
    assert pooled is not None and pooled.blocks_are_runs and len(pooled.block_scores) == 3
    spread = RunSpread(0.02, 20, "t")
    assert pooled.spread(spread) == pooled.spread(None)
    with_blocks = pool_runs(runs, {r.id: r.cases for r in runs}, RankRule.GEOM, {1: [10.0, 10.2], 2: [10.1, 9.9]})
    assert with_blocks is not None and not with_blocks.blocks_are_runs
    assert with_blocks.spread(spread).se_log > with_blocks.spread(None).se_log


def _reruns(rng: random.Random, run_sd: float, files: int = 4, runs: int = 4) -> list:
    """``files`` files, each run ``runs`` times (one content each): every run's blocks agree within 0.5%,
    and the runs of a file differ by ``run_sd`` more."""
    out = []
    for f in range(files):
        sha = f"{f:064x}"
        for _ in range(runs):
            r = blocked_result(f"rerun{f}", 12.0 * math.exp(rng.gauss(0.0, run_sd)), rng, between=0.005)
            r.task, r.submission.sha256 = "nvfp4_gemm", sha
            out.append(r)
    return out


def test_a_stores_own_reruns_widen_its_board_where_they_drift_beyond_their_blocks(tmp_path, monkeypatch):
    """No row for the device: the board learns the between-run spread from the files run more than once
    in its store. Two files 4% apart, each with tight blocks, are ranked apart beside reruns that agree
    with their blocks, and tied beside reruns that drift by 3% between runs."""
    from harness.report.board import interval_notes

    monkeypatch.setattr(run_spread, "package_file", lambda: tmp_path / "no-rows.json")
    monkeypatch.setattr(run_spread, "user_file", lambda: tmp_path / "no-user-file.json")
    rng = random.Random(3)
    pair = [blocked_result(name, base, rng, between=0.005) for name, base in (("a", 10.0), ("b", 10.4))]
    for r in pair:
        r.task = "nvfp4_gemm"

    steady = _board(tmp_path / "steady", [*_reruns(rng, 0.0), *pair])
    assert steady.run_sd == 0.0 and steady.run_sd_from_store, (steady.run_sd, steady.run_sd_source)
    ranks = {e.name: e.rank_label for e in steady.ranked}
    assert (ranks["a"], ranks["b"]) == ("1", "2"), ranks
    assert any("spread no more than their blocks" in n for n in interval_notes(steady.ranked, steady))

    drifting = _board(tmp_path / "drifting", [*_reruns(rng, 0.03), *pair])
    assert drifting.run_sd_from_store and 0.015 < (drifting.run_sd or 0) < 0.05, drifting.run_sd
    assert drifting.run_sd_source == "16 runs of 4 files run more than once in this store"
    ranks = {e.name: e.rank_label for e in drifting.ranked}
    assert ranks["a"] == ranks["b"] == "=1", ranks
    assert any("this store's reruns show" in n for n in interval_notes(drifting.ranked, drifting))


def test_the_wider_of_the_devices_row_and_the_stores_reruns_counts(tmp_path, monkeypatch):
    rows = _write(tmp_path / "rows.json", {"H200": {"nvfp4_gemm": {"sd_log": 0.06, "df": 20, "source": "boards"}}})
    monkeypatch.setattr(run_spread, "package_file", lambda: rows)
    monkeypatch.setattr(run_spread, "user_file", lambda: tmp_path / "no-user-file.json")
    b = _board(tmp_path / "row", _reruns(random.Random(5), 0.03))
    assert (b.run_sd, b.run_sd_from_store, b.run_sd_source) == (0.06, False, "boards")
    assert run_spread.wider(None, None) is None
    low, high = RunSpread(0.01, 20, "x"), RunSpread(0.02, 5, "y", from_store=True)
    assert run_spread.wider(low, high) is high and run_spread.wider(high, low) is high
    assert run_spread.wider(low, None) is low and run_spread.wider(None, high) is high


def test_compare_adds_the_spread_the_board_of_its_device_adds(tmp_path, monkeypatch, capsys):
    from harness.cli.main import main
    from harness.store.database import open_store

    monkeypatch.setattr(run_spread, "package_file", lambda: tmp_path / "no-rows.json")
    monkeypatch.setattr(run_spread, "user_file", lambda: tmp_path / "no-user-file.json")
    rng = random.Random(3)
    pair = [blocked_result(name, base, rng, between=0.005) for name, base in (("a", 10.0), ("b", 10.4))]
    calls = {}
    for label, run_sd in (("steady", 0.0), ("drifting", 0.03)):
        d = str(tmp_path / label)
        with open_store(d) as st:
            for r in [*_reruns(rng, run_sd), *pair]:
                r.task = "nvfp4_gemm"
                st.record(r)
        assert main(["compare", "a", "b", "--task", "nvfp4_gemm", "--results-dir", d, "--format", "json"]) == 0
        out = json.loads(capsys.readouterr().out)
        calls[label] = (out["decision"]["call"], out["between_runs"]["sd_log"])
    assert calls["steady"] == ("faster", 0.0), calls
    assert calls["drifting"][0] == "tied" and calls["drifting"][1] > 0.015, calls


def _as_reruns(results: list) -> list[Rerun]:
    from harness.analysis.ranking import rerun_from_blocks

    out = [rerun_from_blocks([b.score_us for b in r.blocks if b.score_us]) for r in results]
    return [x for x in out if x is not None]


def test_a_file_made_to_run_differently_each_time_cannot_widen_everyones_interval(tmp_path, monkeypatch):
    """A submitter reruns a file whose speed changes from run to run (20%), to make the store's between-run
    spread large and every entry tie: the file is left out of the estimate, named, and the two files 4%
    apart stay ranked apart."""
    monkeypatch.setattr(run_spread, "package_file", lambda: tmp_path / "no-rows.json")
    monkeypatch.setattr(run_spread, "user_file", lambda: tmp_path / "no-user-file.json")
    rng = random.Random(11)
    pair = [blocked_result(name, base, rng, between=0.005) for name, base in (("a", 10.0), ("b", 10.4))]
    wobbly = _reruns(rng, 0.20, files=1, runs=6)
    for r in [*pair, *wobbly]:
        r.task = "nvfp4_gemm"
    for r in wobbly:
        r.submission.sha256, r.submission.name = "f" * 64, "wobbly"

    steady_one = _reruns(rng, 0.0, files=1)
    unguarded = run_spread.estimate([_as_reruns(wobbly), _as_reruns(steady_one)])
    assert unguarded is not None and unguarded.sd_log > 0.05, "the attack should fire where nothing judges it"
    alone = _board(tmp_path / "alone", [*wobbly, *pair, *steady_one])  # two rerun files: neither can be judged
    assert alone.run_sd is None, (alone.run_sd, alone.run_sd_source)

    b = _board(tmp_path / "judged", [*wobbly, *pair, *_reruns(rng, 0.0)])
    assert b.run_sd is not None and b.run_sd < 0.005, (b.run_sd, b.run_sd_source)  # the steady files' own
    assert b.run_sd_source is not None and "left out" in b.run_sd_source and "wobbly" in b.run_sd_source
    ranks = {e.name: e.rank_label for e in b.ranked}
    assert (ranks["a"], ranks["b"]) == ("1", "2"), ranks


def test_outliers_leave_an_ordinary_spread_alone():
    rng = random.Random(2)
    flagged = 0
    for _ in range(40):
        groups = [
            [run_spread.Rerun(rng.gauss(0.0, 0.02), 0.01, 10) for _ in range(4)]  # all alike: 2% between runs
            for _ in range(5)
        ]
        flagged += len(run_spread.outliers(groups))
    assert flagged <= 2  # 200 ordinary files tested at p < 0.001: 0.2 expected
    groups.append([run_spread.Rerun(rng.gauss(0.0, 0.3), 0.01, 10) for _ in range(4)])
    assert run_spread.outliers(groups) == [5]
    assert run_spread.outliers(groups[4:]) == []  # two files: neither can be judged against the rest
