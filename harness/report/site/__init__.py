"""The leaderboard as a static web site: page model (``model``), Plotly figures (``charts``), Jinja2
templates (``templates/``) and the writer (``builder``)."""

from harness.report.site.builder import SiteBuild, build_site

__all__ = ["SiteBuild", "build_site"]
