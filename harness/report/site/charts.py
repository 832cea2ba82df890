"""The site's plots, made by Plotly from the page model; each returns an HTML fragment (a div and the
script that draws it) for a template. The pages load ``plotly.min.js`` from the site's folder, written
there by the builder; nothing comes from the network.

Text that Plotly draws (trace names, hover text) is HTML-escaped first: Plotly reads a subset of HTML
in its labels, and a submission's name is the competitor's to choose.
"""

from __future__ import annotations

import html

import plotly.graph_objects as go
import plotly.io as pio
from plotly.colors import qualitative

from harness.analysis.ranking import Z_95
from harness.report.site.model import BoardSection

CONFIG = {"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": ["sendDataToCloud"]}
SOL_NAME = "speed of light (floor)"
BEST_NAME = "best so far (board)"


def _layout(fig: go.Figure, y_title: str, *, log: bool = False, x_title: str | None = None) -> go.Figure:
    fig.update_layout(
        template="plotly_white",
        height=440,
        margin=dict(l=70, r=20, t=20, b=70),
        legend=dict(orientation="v", yanchor="top", y=1, x=1.02, font=dict(size=12)),
        hovermode="closest",
    )
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(title_text=y_title, type="log" if log else "linear")
    if x_title:
        fig.update_xaxes(title_text=x_title)
    return fig


def _text(name: str) -> str:
    """A name as Plotly text: '<', '>' and '&' as the entities Plotly turns back into characters, so it
    never reads a tag in it (Plotly does not decode &quot;, and a quote outside a tag is harmless)."""
    return html.escape(name, quote=False)


def colors(section: BoardSection) -> dict[str, str]:
    """One colour per submission name, the same in every plot of a section (in ranking order, then history)."""
    names = list(dict.fromkeys([s.name for s in section.series] + [p.name for p in section.history]))
    palette = qualitative.Plotly + qualitative.D3
    return {n: palette[i % len(palette)] for i, n in enumerate(names)}


SYMBOLS = ("circle", "diamond", "square", "triangle-up", "x", "star")


def _symbols(section: BoardSection) -> list[str]:
    """A marker per series: entries that share a name (other content) share its colour, not its symbol."""
    seen: dict[str, int] = {}
    out = []
    for s in section.series:
        out.append(SYMBOLS[seen.get(s.name, 0) % len(SYMBOLS)])
        seen[s.name] = seen.get(s.name, 0) + 1
    return out


def _ci(stderr_us: float | None) -> float | None:
    return None if stderr_us is None else Z_95 * stderr_us


def shapes_figure(section: BoardSection) -> go.Figure:
    """Each ranked submission's mean per benchmark shape with its 95% interval; the speed of light as a floor."""
    fig, color = go.Figure(), colors(section)
    for s, symbol in zip(section.series, _symbols(section)):
        name = _text(s.label)
        fig.add_trace(
            go.Scatter(
                x=[p.label for p in s.points],
                y=[p.mean_us for p in s.points],
                mode="markers",
                name=name,
                marker=dict(size=10, color=color[s.name], symbol=symbol),
                error_y=dict(type="data", array=[_ci(p.stderr_us) for p in s.points], visible=True),
                hovertemplate=f"{name}<br>%{{x}}<br>%{{y:.4g}} us<extra></extra>",
            )
        )
    if section.sol_floor_us:
        labels = [s for s in section.shapes if s in section.sol_floor_us]
        fig.add_trace(
            go.Scatter(
                x=labels,
                y=[section.sol_floor_us[s] for s in labels],
                mode="markers",
                name=SOL_NAME,
                marker=dict(symbol="line-ew-open", size=40, color="#222", line=dict(width=3, color="#222")),
                hovertemplate="speed of light<br>%{x}<br>%{y:.4g} us<extra></extra>",
            )
        )
    fig.update_xaxes(categoryorder="array", categoryarray=section.shapes)
    return _layout(fig, "time per call (us, log scale)", log=True, x_title="benchmark shape")


def sol_percent_figure(section: BoardSection) -> go.Figure | None:
    """% of the speed of light per shape (100% = at the hardware limit); None when no shape has one."""
    if not section.sol_floor_us:
        return None
    fig, color = go.Figure(), colors(section)
    for s, symbol in zip(section.series, _symbols(section)):
        name = _text(s.label)
        points = [p for p in s.points if p.sol_percent is not None]
        fig.add_trace(
            go.Scatter(
                x=[p.label for p in points],
                y=[p.sol_percent for p in points],
                mode="markers",
                name=name,
                marker=dict(size=10, color=color[s.name], symbol=symbol),
                hovertemplate=f"{name}<br>%{{x}}<br>%{{y:.3g}}% of SOL<extra></extra>",
            )
        )
    fig.update_xaxes(categoryorder="array", categoryarray=section.shapes)
    fig.update_yaxes(rangemode="tozero", ticksuffix="%")
    return _layout(fig, "% of speed of light (higher is better)", x_title="benchmark shape")


def history_figure(section: BoardSection) -> go.Figure | None:
    """Every scored run's score over time, one trace per submission name, and the board's best-so-far line."""
    if not section.history:
        return None
    fig, color = go.Figure(), colors(section)
    names = list(dict.fromkeys(p.name for p in section.history))
    for n in names:
        pts = [p for p in section.history if p.name == n]
        name = _text(n)
        fig.add_trace(
            go.Scatter(
                x=[p.when for p in pts],
                y=[p.score_us for p in pts],
                mode="lines+markers",
                name=name,
                marker=dict(size=9, color=color[n]),
                line=dict(color=color[n]),
                error_y=dict(type="data", array=[_ci(p.stderr_us) for p in pts], visible=True),
                customdata=[[p.run_id, p.mode] for p in pts],
                hovertemplate=f"{name}<br>run %{{customdata[0]}} (%{{customdata[1]}})<br>%{{x}}<br>"
                "%{y:.4g} us<extra></extra>",
            )
        )
    best = section.best_so_far
    last = section.history[-1].when
    fig.add_trace(
        go.Scatter(
            x=[p.when for p in best] + ([last] if last != best[-1].when else []),
            y=[p.score_us for p in best] + ([best[-1].score_us] if last != best[-1].when else []),
            mode="lines",
            name=BEST_NAME,
            line=dict(shape="hv", dash="dash", color="#222"),
            hovertemplate="best so far<br>%{x}<br>%{y:.4g} us<extra></extra>",
        )
    )
    return _layout(fig, "score (us, log scale)", log=True, x_title="when the run finished (UTC)")


def to_div(fig: go.Figure | None, div_id: str) -> str:
    """The figure as a div and its drawing script (plotly.min.js must be loaded before it)."""
    if fig is None:
        return ""
    return pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=div_id, config=CONFIG, validate=True)
