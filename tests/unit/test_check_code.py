"""scripts/check_code.py: the complexity gate and the import-cycle check find what they must, and the
harness itself has no import cycle."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

grimp = pytest.importorskip("grimp", reason="the code checks need grimp (the dev extra installs it)")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def check_code():
    spec = importlib.util.spec_from_file_location("check_code", ROOT / "scripts" / "check_code.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["check_code"] = mod  # its dataclass looks its module up
    spec.loader.exec_module(mod)
    return mod


def _graph(*imports: tuple[str, str]) -> grimp.ImportGraph:
    graph = grimp.ImportGraph()
    for importer, imported in imports:
        graph.add_import(importer=importer, imported=imported)
    return graph


def test_a_cycle_of_three_modules_is_found_once(check_code):
    graph = _graph(("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d"))
    assert check_code.import_cycles(graph) == [("p.a", "p.b", "p.c", "p.a")]


def test_no_cycle_no_finding(check_code):
    assert check_code.import_cycles(_graph(("p.a", "p.b"), ("p.b", "p.c"), ("p.a", "p.c"))) == []


def test_the_harness_has_no_import_cycle(check_code):
    graph = grimp.build_graph("harness", include_external_packages=False, cache_dir=None)
    assert "harness.worker.sampler" in graph.modules  # the graph is this package's, not an empty one
    assert check_code.import_cycles(graph) == []


def test_complexity_offenders_include_methods_and_closures(check_code):
    radon = {
        "harness/x.py": [
            {"type": "function", "name": "small", "lineno": 1, "complexity": 15, "closures": []},
            {"type": "class", "name": "Box", "lineno": 5, "complexity": 30, "methods": []},
            {"type": "method", "name": "big", "classname": "Box", "lineno": 6, "complexity": 16, "closures": []},
            {
                "type": "function",
                "name": "outer",
                "lineno": 20,
                "complexity": 2,
                "closures": [{"type": "function", "name": "inner", "lineno": 21, "complexity": 17, "closures": []}],
            },
        ],
        "harness/broken.py": {"error": "invalid syntax"},
    }
    found = [(o.path, o.name, o.complexity) for o in check_code.complexity_offenders(radon, 15)]
    assert found == [
        ("harness/broken.py", "(radon: invalid syntax)", -1),
        ("harness/x.py", "Box.big", 16),
        ("harness/x.py", "outer.inner", 17),
    ]


def test_the_complexity_gate_fails_on_a_complex_function(check_code, tmp_path, capsys):
    branches = "\n".join(f"    if x == {i}:\n        return {i}" for i in range(16))
    (tmp_path / "busy.py").write_text(f"def busy(x):\n{branches}\n    return -1\n")
    (tmp_path / "calm.py").write_text("def calm(x):\n    return x\n")
    assert check_code.main(["complexity", str(tmp_path / "calm.py")]) == 0
    assert check_code.main(["complexity", str(tmp_path / "busy.py")]) == 1
    assert "busy has cyclomatic complexity 17" in capsys.readouterr().out
