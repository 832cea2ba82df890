"""Writes the leaderboard site: ``index.html``, one ``runs/run-N.html`` per stored run, and
``assets/`` (the style sheet, and Plotly's own ``plotly.min.js`` copied from the installed Python
package at build time). The pages link to each other with relative paths, so the folder opens from
the file system or any static host.

A folder that already holds files must be a site this builder wrote (it leaves a ``.harness-site``
marker); the old run pages are then replaced, and nothing else in the folder is touched.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

import harness
from harness.errors import UsageError
from harness.report.site import charts
from harness.report.site.model import RUNS_DIR, SiteModel, build_model, run_href
from harness.report.tables import us
from harness.store.database import open_store

MARKER = ".harness-site"


@dataclass
class SiteBuild:
    out_dir: Path
    index: Path
    run_pages: list[Path] = field(default_factory=list)
    plots: int = 0
    warnings: list[str] = field(default_factory=list)
    model: SiteModel | None = None


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("harness.report.site", "templates"),
        autoescape=select_autoescape(["html"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["us"] = us
    return env


def _prepare(out_dir: Path) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"{out_dir} is a file; pass a folder to -o/--output")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not (out_dir / MARKER).is_file():
        raise UsageError(
            f"{out_dir} is not empty and holds no site written by this command; "
            "pass a new or empty folder to -o/--output"
        )
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        if (out_dir / RUNS_DIR).is_dir():
            shutil.rmtree(out_dir / RUNS_DIR)
        (out_dir / RUNS_DIR).mkdir()
        (out_dir / "assets").mkdir(exist_ok=True)
        (out_dir / MARKER).write_text("written by python -m harness leaderboard --format html\n")
    except OSError as exc:
        raise UsageError(f"cannot write the site into {out_dir}: {exc}; choose another -o/--output") from exc


def _write_assets(out_dir: Path) -> None:
    from plotly.offline import get_plotlyjs

    (out_dir / "assets" / "plotly.min.js").write_text(get_plotlyjs(), encoding="utf-8")
    css = resources.files("harness.report.site").joinpath("templates").joinpath("site.css").read_text(encoding="utf-8")
    (out_dir / "assets" / "site.css").write_text(css, encoding="utf-8")


def _plots(model: SiteModel) -> tuple[dict[str, dict[str, Markup]], int]:
    plots, count = {}, 0
    for t in model.tasks:
        for s in t.sections:
            p = {
                "shapes": charts.to_div(charts.shapes_figure(s), f"plot-shapes-{s.anchor}") if s.series else "",
                "sol": charts.to_div(charts.sol_percent_figure(s), f"plot-sol-{s.anchor}"),
                "history": charts.to_div(charts.history_figure(s), f"plot-history-{s.anchor}"),
            }
            count += sum(bool(v) for v in p.values())
            plots[s.anchor] = {k: Markup(v) for k, v in p.items()}  # Plotly's own output; names escaped in charts
    return plots, count


def build_site(
    out_dir: str | Path,
    tasks: list[str] | None = None,
    *,
    results_dir: str | None = None,
    device: str | None = None,
    rule: str | None = None,
    mode: str | None = None,
) -> SiteBuild:
    """Writes the site for ``tasks`` (None: every task in the store) into ``out_dir``."""
    out_dir = Path(out_dir)
    with open_store(results_dir) as st:
        names = st.tasks() if tasks is None else list(tasks)
        model = build_model(st, names, results_dir=results_dir, device=device, rule=rule, mode=mode)
    _prepare(out_dir)
    _write_assets(out_dir)
    env = _environment()
    common = {
        "built_at": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "harness_version": harness.__version__,
        "run_href": run_href,
    }
    plots, count = _plots(model)
    index = out_dir / "index.html"
    index.write_text(
        env.get_template("index.html").render(
            title="Leaderboard",
            root="",
            with_plots=count > 0,
            tasks=model.tasks,
            plots=plots,
            warnings=model.warnings,
            **common,
        ),
        encoding="utf-8",
    )
    build = SiteBuild(out_dir=out_dir, index=index, plots=count, warnings=list(model.warnings), model=model)
    listed = {r.run_id for t in model.tasks for s in t.sections for r in s.ranked} | {
        u.run_id for t in model.tasks for s in t.sections for u in s.unranked
    }
    template = env.get_template("run.html")
    for page in model.runs:
        back = f"run-{page.run_id}" if page.run_id in listed else page.board_anchor
        path = out_dir / run_href(page.run_id)
        path.write_text(
            template.render(
                title=f"Run {page.run_id}: {page.name}",
                root="../",
                with_plots=False,
                run=page,
                back_anchor=back,
                **common,
            ),
            encoding="utf-8",
        )
        build.run_pages.append(path)
    return build
