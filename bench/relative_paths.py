"""Repository-relative paths in results files: no committed file names the folders of the machine that wrote it.

As a library (the bench scripts): ``repo_relative(path)`` is the path relative to this repository's root when
the file lies below it, else the path as given.

As a script: rewrites absolute paths in the given text files (default: every file under results/ but images),
in place, and prints one line per changed file on stderr:

- a path into a checkout of this repository (a folder prefix followed by one of its top-level entries, e.g.
  ``<prefix>/submissions/x.py``) loses that prefix; the prefixes found in any of the files are stripped from
  all of them (a copy folder beside the checkout, such as ``<prefix>/rank18/x.py``, becomes ``rank18/x.py``);
- a temporary folder's ``/tmp/`` becomes ``$TMPDIR/``; a home folder (``/root/``, ``/home/<user>/``) ``~/``.

    python bench/relative_paths.py                    # every results file
    python bench/relative_paths.py results/h200_gpu_tests_core.xml
    python bench/relative_paths.py --check            # list the files that still hold one; exit 1 if any

``find_machine_paths(text)`` is what tests/test_results_paths.py checks every tracked results file with.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the top-level entries of this repository that results files point into
ENTRIES = ("bench", "docs", "fp4_reference", "harness", "results", "scripts", "submissions", "tasks", "tests")
# an absolute path of the machine: one of these system folders at the start of a path (not inside a word, a URL
# or a relative path such as results/x)
MACHINE_PATH = re.compile(r"(?<![\w.~$/:])/(?:root|home|tmp|work|opt|usr)/[^\s\"'<>)\],;]*")
_ROOT_PREFIX = re.compile(r"(?<![\w.~$/:])((?:/[\w.+-]+)+/)(?=(?:" + "|".join(ENTRIES) + r")/)")
_HOME = re.compile(r"(?<![\w.~$/:])/(?:root|home/[\w.-]+)/")
_TMP = re.compile(r"(?<![\w.~$/:])/tmp/")
BINARY = {".png", ".gz", ".jpg", ".jpeg", ".gif", ".pdf"}


def repo_relative(path: str | Path) -> str:
    """``path`` relative to the repository's root when it lies below it, else as given."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def find_machine_paths(text: str) -> list[str]:
    """Every absolute path of a machine folder in ``text`` (empty: none)."""
    return MACHINE_PATH.findall(text)


def checkout_prefixes(texts: list[str]) -> set[str]:
    """The folder prefixes that lead into a checkout of this repository in any of ``texts``."""
    return {m.group(1) for text in texts for m in _ROOT_PREFIX.finditer(text)}


def rewrite(text: str, prefixes: set[str]) -> str:
    """``text`` with the checkout prefixes stripped, temporary folders as $TMPDIR and home folders as ~."""
    for prefix in sorted(prefixes, key=len, reverse=True):  # the longest first: a nested checkout stays whole
        text = re.sub(r"(?<![\w.~$/:])" + re.escape(prefix), "", text)
    return _HOME.sub("~/", _TMP.sub("$TMPDIR/", text))


def results_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix not in BINARY)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("files", nargs="*", type=Path, help="text files to rewrite (default: every file under results/)")
    ap.add_argument("--check", action="store_true", help="only list the files that hold a machine path")
    args = ap.parse_args(argv)
    files = args.files or results_files(ROOT / "results")
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        print(f"relative_paths: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    texts = {f: f.read_text(encoding="utf-8", errors="surrogateescape") for f in files}
    if args.check:
        found = {f: find_machine_paths(t) for f, t in texts.items()}
        for f, paths in found.items():
            if paths:
                print(f"{repo_relative(f)}: {', '.join(sorted(set(paths))[:3])}", file=sys.stderr)
        return 1 if any(found.values()) else 0
    prefixes = checkout_prefixes(list(texts.values()))
    for f, text in texts.items():
        new = rewrite(text, prefixes)
        if new != text:
            f.write_text(new, encoding="utf-8", errors="surrogateescape")
            print(f"relative_paths: rewrote {repo_relative(f)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
