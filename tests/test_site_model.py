"""The leaderboard site's page model and builder, from a store filled by real runs of the example
submissions on the small task copies (CPU, tiny budgets; once for this module), plus bad data: an empty
store, a task with only failed runs, a name with HTML in it, figures that are NaN or missing."""

from __future__ import annotations

import importlib.util
import math
import re
import shutil
from pathlib import Path

import pytest

pytest.importorskip("plotly", reason="the site needs plotly (the test extra installs it)")

from harness.api import load_board, render_board
from harness.cli.main import main
from harness.report.site import build_site
from harness.report.site.model import build_model, run_href
from harness.results import PASS, Stats
from harness.store.database import open_store
from tests.site_store import GLUON, HTML_NAME, MX, NV, TORCH, TRITON, TWIN, best_run_of, fill_real_store, record_copy

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    d = str(tmp_path_factory.mktemp("site-store"))
    fill_real_store(d, mx_rounds=2)
    record_copy(d, best_run_of(d, MX, TORCH), TWIN)  # the same figures: a tie for certain
    with open_store(d) as st:  # killed before it stored a result
        real = st.result(best_run_of(d, MX, TORCH))
        real.submission.sha256 = "0" * 64
        st.begin_run("mxfp4_small", "test+benchmark", real.submission, display_name="killed", device=real.device)
    return d


@pytest.fixture(scope="module")
def model(store):
    with open_store(store) as st:
        return build_model(st, [MX, NV], results_dir=store)


def sections(model, task):
    return next(t for t in model.tasks if t.name == task).sections


def test_rows_are_the_shared_ranking(store, model):
    for task in (MX, NV):
        board, _ = load_board(task, results_dir=store)
        secs = sections(model, board.task)
        assert [s.device for s in secs] == [b.device for b in board.boards]
        for s, b in zip(secs, board.boards):
            assert [(r.rank_label, r.name, r.run_id) for r in s.ranked] == [
                (e.rank_label, e.name, e.run_id) for e in b.ranked
            ]
            assert [r.score_us for r in s.ranked] == sorted(r.score_us for r in s.ranked)
            for r in s.ranked:
                assert r.verdict == PASS and r.ci_low_us < r.score_us < r.ci_high_us
    (mx,) = sections(model, "mxfp4_small")
    assert {r.name for r in mx.ranked} == {TORCH, TRITON, TWIN}
    for r in mx.ranked:  # the text table's wording: "leader" for the leader's score, else "1.23x slower ..."
        assert (r.gap == "leader") == (r.score_us == mx.ranked[0].score_us)
        assert r.gap == "leader" or re.fullmatch(r"\d+\.\d\dx slower \(\+[\d.]+ us\)", r.gap)
    (nv,) = sections(model, "nvfp4_small")
    assert {r.name for r in nv.ranked} == {"torch nvfp4 (portable)", "triton_nvfp4"}


def test_ties_are_marked_as_the_text_table_marks_them(store, model):
    (mx,) = sections(model, "mxfp4_small")
    torch, twin = (next(r for r in mx.ranked if r.name == n) for n in (TORCH, TWIN))
    assert torch.tied and twin.tied and torch.rank_label == twin.rank_label and torch.rank_label.startswith("=")
    for r in mx.ranked:
        assert r.rank_label.startswith("=") == r.tied
    text = render_board(load_board(MX, results_dir=store)[0], "table")
    for r in mx.ranked:
        assert re.search(rf"^\s*{re.escape(r.rank_label)}\s+{re.escape(r.name)}\s", text, re.M), (r, text)


def test_unranked_reasons(model):
    (mx,) = sections(model, "mxfp4_small")
    reasons = {u.name: (u.verdict, u.reason) for u in mx.unranked}
    assert set(reasons) == {GLUON, "killed"}
    assert reasons[GLUON][0] == "error" and "needs a GPU" in reasons[GLUON][1]
    assert reasons["killed"][0] == "incomplete" and "has not finished" in reasons["killed"][1]


def test_history_points_and_best_so_far(store, model):
    (mx,) = sections(model, "mxfp4_small")
    per_name = {}
    for p in mx.history:
        per_name.setdefault(p.name, []).append(p)
    assert {n: len(ps) for n, ps in per_name.items()} == {TORCH: 2, TRITON: 2, TWIN: 1}  # two rounds, one copy
    assert [p.when for p in mx.history] == sorted(p.when for p in mx.history)
    running, expected = math.inf, []
    for p in mx.history:
        if p.score_us < running:
            running = p.score_us
            expected.append(p.run_id)
    assert [p.run_id for p in mx.best_so_far] == expected
    # the board pools every run of an entry (tests/test_ranking.py checks the pooled figures), not its best
    # draw: the history keeps each run's own score, the entry's differs from the better one
    torch = next(r for r in mx.ranked if r.name == TORCH)
    draws = [p.score_us for p in mx.history if p.run_id in torch.run_ids]
    assert len(draws) == 2 and draws[0] != draws[1] and torch.score_us != pytest.approx(min(draws), rel=1e-9)
    with open_store(store) as st:  # each point is a stored run's own score
        for p in mx.history:
            assert p.score_us == pytest.approx(st.runs(ids=[p.run_id])[0].score_us, rel=1e-9)


def test_per_shape_series_and_what_is_missing_on_a_cpu(model):
    (mx,) = sections(model, "mxfp4_small")
    assert mx.shapes == ["m=8 n=64 k=128", "m=16 n=32 k=256"]
    assert [s.run_id for s in mx.series] == [r.run_id for r in mx.ranked]
    for s in mx.series:
        assert [p.label for p in s.points] == mx.shapes and all(p.mean_us > 0 for p in s.points)
        assert all(p.sol_percent is None for p in s.points)
    assert mx.sol_floor_us == {}
    assert any("no speed of light for 2 of 2 shapes (no speed of light for CPU runs)" in n for n in mx.notes)


def test_run_pages(store, model):
    with open_store(store) as st:
        assert sorted(p.run_id for p in model.runs) == sorted(r.id for r in st.runs())
    pages = {p.run_id: p for p in model.runs}
    (mx,) = sections(model, "mxfp4_small")
    row = next(r for r in mx.ranked if r.name == TORCH)
    leader = pages[row.run_id]
    assert leader.board_place.startswith(f"ranked {row.rank_label} on {mx.device}")
    bench = [c for c in leader.cases if c.kind == "benchmark"]
    assert [c.label for c in bench] == mx.shapes
    assert all(c.mean_us > 0 and c.stderr_us is not None and c.runs >= 3 for c in bench)
    assert all(c.kernel_only_us is None and c.sol_us is None and c.sol_note for c in bench)
    assert leader.software.get("python") and leader.harness_version and len(leader.sha256) == 64
    assert len(leader.other_runs) == 1  # the other round of the same submission
    killed = next(p for p in model.runs if p.name == "killed")
    assert killed.cases == [] and "never stored a result" in killed.notes[0]


def hrefs(html: str) -> list[str]:
    return re.findall(r'href="([^"]+)"', html)


def test_site_files_and_links_both_ways(store, model, tmp_path):
    build = build_site(tmp_path / "site", [MX, NV], results_dir=store)
    index = build.index.read_text()
    assert (tmp_path / "site" / "assets" / "plotly.min.js").stat().st_size > 1_000_000
    assert not re.search(r'(src|href)="(https?:)?//', index) and "https://" not in index and "http://" not in index
    listed = [r.run_id for t in model.tasks for s in t.sections for r in [*s.ranked, *s.unranked]]
    for run_id in listed:
        assert f'href="{run_href(run_id)}"' in index
        page = (tmp_path / "site" / run_href(run_id)).read_text()
        assert f'href="../index.html#run-{run_id}"' in page and f'id="run-{run_id}"' in index
    for page in build.run_pages:
        for link in hrefs(page.read_text()):
            target = (page.parent / link.split("#")[0]).resolve()
            assert target.is_file(), (page, link)
    assert build.plots == 4  # per-shape and history for both tasks; no % of SOL view on a CPU


def test_cli_html_all_tasks_and_other_formats_unchanged(store, tmp_path, capsys):
    assert (
        main(["leaderboard", "--all-tasks", "--format", "html", "-o", str(tmp_path / "s"), "--results-dir", store]) == 0
    )
    assert "wrote" in capsys.readouterr().err
    assert 'id="mxfp4-small--cpu' in (tmp_path / "s" / "index.html").read_text()
    assert main(["leaderboard", "--task", MX, "--format", "html", "--results-dir", store]) == 2
    assert "pass -o DIR" in capsys.readouterr().err
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    assert (
        main(["leaderboard", "--task", MX, "--format", "html", "-o", str(tmp_path / "busy"), "--results-dir", store])
        == 2
    )
    assert "not empty" in capsys.readouterr().err and (tmp_path / "busy" / "notes.txt").read_text() == "mine"
    assert main(["leaderboard", "--task", MX, "--format", "markdown", "--results-dir", store]) == 0
    assert capsys.readouterr().out == render_board(load_board(MX, results_dir=store)[0], "markdown")
    assert main(["leaderboard", "--all-tasks", "--format", "json", "--results-dir", store]) == 2
    assert "pass --task T" in capsys.readouterr().err
    assert main(["leaderboard", "--all-tasks", "--results-dir", store]) == 0
    out = capsys.readouterr().out
    assert "mxfp4_small on CPU" in out and "nvfp4_small on CPU" in out and "not ranked:" in out


# --- bad data -------------------------------------------------------------------------------------


def test_empty_store(tmp_path):
    build = build_site(tmp_path / "site", None, results_dir=str(tmp_path / "empty"))
    index = build.index.read_text()
    assert 'id="empty-store"' in index and "No results in the store yet" in index and build.run_pages == []
    build = build_site(tmp_path / "site2", ["mxfp4_mm"], results_dir=str(tmp_path / "empty"))
    assert "No results for mxfp4_mm yet." in build.index.read_text()
    assert any("no results for task 'mxfp4_mm'" in w for w in build.warnings)


def test_task_with_only_failed_runs(store, tmp_path):
    gluon = next(u.run_id for u in load_board(MX, results_dir=store)[0].boards[0].unranked if u.name == GLUON)
    only_failed = str(tmp_path / "failed")
    with open_store(store) as src, open_store(only_failed) as dst:
        dst.record(src.result(gluon), display_name=GLUON)
    build = build_site(tmp_path / "site", None, results_dir=only_failed)
    index = build.index.read_text()
    assert "No complete passing run with timings yet." in index and "nothing to plot" in index
    assert "needs a GPU" in index and build.plots == 0 and len(build.run_pages) == 1
    assert "plotly.min.js" not in index


def test_html_in_a_name_is_escaped(store, tmp_path):
    d = str(tmp_path / "res")
    shutil.copytree(store, d)
    run_id = record_copy(d, best_run_of(d, MX, TRITON), HTML_NAME)
    build = build_site(tmp_path / "site", [MX], results_dir=d)
    index, page = build.index.read_text(), (tmp_path / "site" / run_href(run_id)).read_text()
    for text in (index, page):
        assert '<b id="injected">' not in text and "<script>document.title" not in text
        assert "&lt;b id=&#34;injected&#34;&gt;bold&lt;/b&gt;" in text
    # in the plots' JSON (inside a <script>) the name is HTML-escaped for Plotly, then JSON-escaped
    assert '&lt;b id=\\"injected\\"&gt;bold' in index


def nan_figures(result):
    bench = result.benchmark_cases()
    bench[0].stats = Stats.from_samples([bench[0].stats.mean])  # one sample: no standard error
    bench[-1].extra = {}
    result.score_us = float("nan")


def nan_mean(result):
    s = result.benchmark_cases()[0].stats
    s.mean = s.stderr = float("nan")


def test_nan_and_missing_figures(store, tmp_path):
    d = str(tmp_path / "res")
    shutil.copytree(store, d)
    torch = best_run_of(d, MX, TORCH)
    single = record_copy(d, torch, "single sample", nan_figures)
    broken = record_copy(d, torch, "nan mean", nan_mean)
    build = build_site(tmp_path / "site", [MX], results_dir=d)
    (mx,) = build.model.tasks[0].sections
    row = next(r for r in mx.ranked if r.name == "single sample")
    assert row.ci_low_us is None and row.ci_high_us is None
    assert any("no 95% interval" in n for n in mx.notes)
    assert "nan mean" in {u.name for u in mx.unranked}
    index = build.index.read_text()
    assert "unknown</span>" in index and "NaN" not in index and "nan" not in index.replace("nan mean", "")
    page = (tmp_path / "site" / run_href(broken)).read_text()
    assert "some passed benchmark cases have no mean time" in page
    single_page = (tmp_path / "site" / run_href(single)).read_text()
    assert "none (only a complete passing benchmark run has one)" in single_page and "NaN" not in single_page


def test_ci_script_writes_the_site(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("ci_leaderboard", ROOT / "scripts" / "ci_leaderboard.py")
    ci = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ci)
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(ROOT / "submissions" / "torch_mxfp4.py", subs)
    code = ci.main(
        ["--task", MX, "--submissions", str(subs), "--tests-only", "--device", "cpu", "--site", str(tmp_path / "site")]
    )
    err = capsys.readouterr().err
    assert code == 0, err
    index = (tmp_path / "site" / "index.html").read_text()
    assert "mxfp4_small" in index and TORCH in index and "no benchmark timings yet" in index
    assert len(list((tmp_path / "site" / "runs").glob("run-*.html"))) == 1
