"""docs/results-json.md stays the schema of what the harness writes: it names every field of a run, a case,
a block and the score's interval, the current version of each JSON document, and one history entry per
version of the run schema (the history in harness/results.py's docstring)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from harness import results
from harness.analysis.blocks import BLOCK_RULE_VERSION
from harness.analysis.final import FINAL_JSON_VERSION
from harness.analysis.ranking import LEADERBOARD_JSON_VERSION
from harness.analysis.ties import TIE_RULE_VERSION
from harness.cli.compare import COMPARE_JSON_VERSION
from harness.cli.export import EXPORT_JSON_VERSION
from tests.docs_commands import ROOT

PAGE = (ROOT / "docs" / "results-json.md").read_text()


def _section(title_start: str) -> str:
    """The text of the ``## `` section whose title starts with ``title_start``."""
    parts = re.split(r"^## ", PAGE, flags=re.M)
    found = [p for p in parts if p.startswith(title_start)]
    assert found, f"docs/results-json.md has no section '## {title_start}...'"
    return found[0]


@pytest.mark.parametrize(
    "cls", [results.RunResult, results.CaseResult, results.BlockRecord, results.ScoreInterval, results.Stats]
)
def test_the_page_names_every_field_of_a_run(cls):
    run = _section("A run")
    missing = [f.name for f in dataclasses.fields(cls) if f"`{f.name}`" not in run]
    assert not missing, f"docs/results-json.md does not describe {cls.__name__} fields {missing}"


def test_the_page_states_each_documents_current_version():
    run = _section("A run")
    assert f"`SCHEMA_VERSION` = {results.SCHEMA_VERSION})" in run
    assert f"| `schema_version` | {results.SCHEMA_VERSION} |" in run
    assert f"`LEADERBOARD_JSON_VERSION` = {LEADERBOARD_JSON_VERSION})" in _section("A board")
    assert f"| `version` | {LEADERBOARD_JSON_VERSION} " in _section("A board")
    assert f"(version {COMPARE_JSON_VERSION})" in _section("A comparison")
    assert f"`FINAL_JSON_VERSION` = {FINAL_JSON_VERSION})" in _section("A final scoring")
    assert f"(version {EXPORT_JSON_VERSION} each)" in _section("Exports")
    # the rules' versions are named by their constants, whose values the JSON carries
    assert TIE_RULE_VERSION >= 1 and "TIE_RULE_VERSION" in PAGE
    assert BLOCK_RULE_VERSION >= 1 and "BLOCK_RULE_VERSION" in PAGE


def test_the_run_schemas_history_matches_the_code():
    """One entry per version in both places, and the readable versions named on the page."""
    code = re.findall(r"^\s{2}(\d+) - ", results.__doc__ or "", flags=re.M)
    page = re.findall(r"^- (\d+)[: ]", _section("A run"), flags=re.M)
    assert code == [str(v) for v in range(1, results.SCHEMA_VERSION + 1)], "harness/results.py's history"
    assert page == code, f"docs/results-json.md's history lists versions {page}, the code {code}"
    readable = " and ".join(str(v) for v in results.READABLE_VERSIONS)
    assert f"({readable})" in _section("A run"), f"the page must name the readable versions ({readable})"
