"""A lean core install: each extra of pyproject.toml is named in harness.optional, a command that needs a
missing extra says which one to install (exit 2), and the core dependencies leave the extras out."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.errors import EXIT_USAGE, UsageError
from harness.optional import EXTRAS, import_optional, require_extra

tomllib = pytest.importorskip("tomllib")  # Python 3.11+
ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _names(requirements: list[str]) -> set[str]:
    return {r.split(">")[0].split("<")[0].split("=")[0].split("[")[0].strip().lower() for r in requirements}


def test_the_extras_match_pyproject():
    declared = PROJECT["optional-dependencies"]
    assert set(EXTRAS) <= set(declared)
    assert _names(declared["site"]) == {"plotly", "jinja2"}
    own = next(r for r in declared["test"] if r.startswith(PROJECT["name"] + "["))
    included = set(own[own.index("[") + 1 : own.index("]")].split(","))
    assert included == set(EXTRAS) - {"nvml"}  # the test extra installs every extra but NVML's (GPU only)


def test_the_core_leaves_the_extras_out():
    core = _names(PROJECT["dependencies"])
    assert core.isdisjoint({"plotly", "jinja2", "kernelguard", "ray", "psycopg", "nvidia-ml-py"})


def test_a_missing_module_names_its_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "jinja2", None)  # import jinja2 now raises ImportError
    with pytest.raises(
        UsageError, match=r"needs the 'site' extra.*no module 'jinja2'.*pip install -e '\.\[site\]'"
    ) as exc:
        require_extra("site")
    assert exc.value.exit_code == EXIT_USAGE


def test_an_installed_extra_imports():
    pytest.importorskip("plotly")
    assert import_optional("plotly", "site").__name__ == "plotly"


def test_a_module_outside_the_extra_is_a_bug_not_a_usage_error():
    with pytest.raises(ValueError, match="not a module of the extra"):
        import_optional("numpy", "site")


def test_leaderboard_html_without_the_site_extra_exits_2(monkeypatch, tmp_path, capsys):
    from harness.cli.main import main
    from harness.store.database import open_store
    from tests.helpers import make_result

    results = str(tmp_path / "res")
    with open_store(results) as st:
        st.record(make_result("fast", (10.0, 20.0)))
    monkeypatch.setitem(sys.modules, "plotly", None)
    code = main(
        [
            "leaderboard",
            "--task",
            "mxfp4_mm",
            "--results-dir",
            results,
            "--format",
            "html",
            "-o",
            str(tmp_path / "site"),
        ]
    )
    err = capsys.readouterr().err
    assert code == EXIT_USAGE
    assert "'site' extra" in err and "Traceback" not in err
    assert not (tmp_path / "site").exists()


def test_scan_reject_without_kernelguard_exits_2_before_running(monkeypatch):
    from harness.engine.options import RunOptions

    monkeypatch.setitem(sys.modules, "kernelguard", None)
    with pytest.raises(UsageError, match="'scan' extra"):
        RunOptions(scan_policy="reject").validate()
    RunOptions(scan_policy="warn").validate()  # warn: the run goes on and says the scan was skipped
