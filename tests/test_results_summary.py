"""The results tables in README.md and results/README.md are what scripts/results_summary.py prints
from the results files (nobody types a measurement in), and the shapes read in the task's m n k l order."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("results_summary", ROOT / "scripts" / "results_summary.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _block(path: Path, form: str) -> str:
    m = re.search(
        rf"<!-- results_summary {form}: begin -->\n(.*?)<!-- results_summary {form}: end -->", path.read_text(), re.S
    )
    assert m, f"{path} lost its generated {form} block"
    return m.group(1)


def test_readme_tables_are_the_scripts_output():
    mod = _script()
    results = ROOT / "results"
    short, long = mod.short_form(results), mod.long_form(results)
    assert "| mxfp4_mm" in short and "GPU tests" in short  # the files were found and read
    assert "identical copies" in short and "ranked verdict" in short  # issue #50's boards, #49's verdict times
    assert "| measured " in short and re.search(r"\| 20\d\d-\d\d-\d\d +\|", short)  # each check row's day
    assert _block(ROOT / "README.md", "short") == short, "run: python scripts/results_summary.py --update"
    assert _block(ROOT / "results" / "README.md", "long") == long, "run: python scripts/results_summary.py --update"


def test_shapes_are_labelled_m_n_k_l():
    long = _script().long_form(ROOT / "results")
    assert "m=4 n=2880 k=512" in long
    assert "m=128 n=7168 k=16384 l=1" in long and "k=512 m=4" not in long


def test_update_replaces_only_the_marked_block(tmp_path):
    mod = _script()
    doc = tmp_path / "doc.md"
    doc.write_text("before\n<!-- results_summary short: begin -->\nold\n<!-- results_summary short: end -->\nafter\n")
    mod.update(doc, "new\n", "short")
    assert doc.read_text() == (
        "before\n<!-- results_summary short: begin -->\nnew\n<!-- results_summary short: end -->\nafter\n"
    )
