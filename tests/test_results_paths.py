"""results/ is a record: every file in it is named in results/README.md's table of files (with the script and
command that wrote it), every file named there exists, and no results file holds an absolute path of the
machine that wrote it (bench/relative_paths.py rewrites such paths)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
LIMIT = 60  # issue #48: results/ holds at most this many files


def _relative_paths():
    spec = importlib.util.spec_from_file_location("relative_paths", ROOT / "bench" / "relative_paths.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _results_files() -> list[str]:
    """The files under results/, relative to it: git's tracked ones in a checkout, else what is on disk."""
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "--", "results"], capture_output=True, text=True, check=True
        ).stdout
        tracked = [line.removeprefix("results/") for line in out.splitlines() if line]
    except (OSError, subprocess.CalledProcessError):
        tracked = []
    return tracked or sorted(str(p.relative_to(RESULTS)) for p in RESULTS.rglob("*") if p.is_file())


def _named_in_readme() -> list[str]:
    """The first cell of every row of the README's files table (one backquoted file name each)."""
    text = (RESULTS / "README.md").read_text()
    table = text[text.index("\n## Files\n") :]
    return re.findall(r"^\| `([^`]+)` \|", table, re.M)


def test_every_results_file_is_named_in_the_readme_and_every_name_exists():
    files, named = set(_results_files()), _named_in_readme()
    assert len(files) >= 10 and len(named) >= 10  # both lists were found
    assert len(named) == len(set(named)), "a file is named twice in results/README.md"
    unnamed = sorted(files - set(named))
    assert not unnamed, f"add a row for each to results/README.md's files table (script and command): {unnamed}"
    missing = sorted(n for n in named if not (RESULTS / n).is_file())
    assert not missing, f"results/README.md names files that do not exist: {missing}"


def test_results_holds_at_most_the_limit():
    files = _results_files()
    assert 0 < len(files) <= LIMIT, f"results/ holds {len(files)} files; keep it a record of at most {LIMIT}"


def test_no_results_file_holds_an_absolute_machine_path():
    rp = _relative_paths()
    found = {}
    for name in _results_files():
        path = RESULTS / name
        if path.suffix in rp.BINARY:
            continue
        hits = rp.find_machine_paths(path.read_text(encoding="utf-8", errors="replace"))
        if hits:
            found[name] = sorted(set(hits))[:3]
    assert not found, f"absolute paths of the machine that wrote them (run: python bench/relative_paths.py): {found}"


def test_the_check_finds_machine_paths_and_leaves_relative_ones():
    rp = _relative_paths()
    text = (
        '{"path": "/work/main/submissions/x.py", "tmp": "PosixPath(\'/tmp/pytest-of-root/p0\')", '
        '"home": "/home/ann/out.json", "out": "/root/out/a.json", "lib": "/usr/local/cuda/bin/nvcc", '
        '"opt": "/opt/gcc/lib", "id": "test_x[torch_mxfp4.py-/work/main/tests/fixtures/task.yml]"}'
    )
    assert len(rp.find_machine_paths(text)) == 7  # the last one after a pytest id's '-' separator
    for clean in ("results/h200_runs/x.json", "submissions/x.py", "https://example.org/work/x", "us/call", "$TMPDIR/a"):
        assert rp.find_machine_paths(clean) == [], clean


def test_rewrite_makes_checkout_paths_repository_relative(tmp_path):
    rp = _relative_paths()
    a = tmp_path / "a.json"
    b = tmp_path / "b.xml"
    a.write_text('{"path": "/srv/ci/checkout/submissions/x.py", "copy": "/srv/ci/checkout/rank18/y.py"}\n')
    b.write_text("<t name=\"t[x.py-/srv/ci/checkout/tests/fixtures/task.yml]\">PosixPath('/tmp/pytest-0/t0')</t>\n")
    assert rp.main([str(a), str(b)]) == 0
    assert a.read_text() == '{"path": "submissions/x.py", "copy": "rank18/y.py"}\n'
    assert b.read_text() == "<t name=\"t[x.py-tests/fixtures/task.yml]\">PosixPath('$TMPDIR/pytest-0/t0')</t>\n"
    assert rp.main(["--check", str(a), str(b)]) == 0
    assert rp.main(["--check", str(tmp_path / "missing.json")]) == 2


def test_a_run_records_the_submission_path_relative_to_the_working_folder(tmp_path, monkeypatch):
    from harness.engine.submission import submission_info

    (tmp_path / "subs").mkdir()
    (tmp_path / "subs" / "mine.py").write_text("def custom_kernel(data):\n    return data\n")
    (tmp_path / "elsewhere.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path / "subs")
    assert submission_info(tmp_path / "subs" / "mine.py").path == "mine.py"  # absolute in, relative out
    assert submission_info("mine.py").path == "mine.py"
    assert submission_info("../elsewhere.py").path == "../elsewhere.py"  # outside the working folder: as given
