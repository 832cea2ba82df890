"""Two checks of harness/ that ruff, mypy and import-linter do not make; scripts/check.sh runs both.

  python scripts/check_code.py complexity [--max 15] [PATH ...]   functions above the cyclomatic limit
  python scripts/check_code.py cycles [--package harness]          import cycles between modules

Each prints one line per finding and exits 1 when there is one (0 when clean, 2 on bad usage).
Complexity is radon's count (``radon cc -j``: every branch, loop, except and boolean operator adds one);
cycles come from grimp's import graph (what import-linter builds: function-level imports count too).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parent.parent
MAX_COMPLEXITY = 15


@dataclass(frozen=True)
class Offender:
    path: str
    line: int
    name: str
    complexity: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.name} has cyclomatic complexity {self.complexity}"


def _blocks(items: Iterable[dict[str, Any]], owner: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every function, method and closure in radon's JSON (classes are skipped: their methods count)."""
    for item in items:
        classname = item.get("classname")
        name = f"{owner}{classname}.{item['name']}" if classname else f"{owner}{item['name']}"
        if item["type"] != "class":
            yield name, item
        yield from _blocks(item.get("closures", []), owner=f"{name}.")


def complexity_offenders(radon_json: dict[str, Any], limit: int) -> list[Offender]:
    """Functions above ``limit`` in the output of ``radon cc -j`` (a file radon could not parse is one too)."""
    out = []
    for path, items in sorted(radon_json.items()):
        if isinstance(items, dict):  # radon reports {"error": ...} for a file it cannot parse
            out.append(Offender(path, 0, f"(radon: {items.get('error', 'unreadable')})", -1))
            continue
        for name, item in _blocks(items):
            if item["complexity"] > limit:
                out.append(Offender(path, item["lineno"], name, item["complexity"]))
    return out


class ImportGraph(Protocol):
    """The part of grimp's graph the cycle check reads (a test builds one by hand)."""

    @property
    def modules(self) -> set[str]: ...

    def find_modules_directly_imported_by(self, module: str) -> set[str]: ...

    def find_shortest_chain(self, importer: str, imported: str) -> tuple[str, ...] | None: ...


def import_cycles(graph: ImportGraph) -> list[tuple[str, ...]]:
    """One shortest cycle through each module that is on a cycle, each cycle once (as a -> b -> ... -> a)."""
    seen: set[frozenset[str]] = set()
    cycles = []
    for module in sorted(graph.modules):
        best: tuple[str, ...] | None = None
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if back is not None and (best is None or len(back) + 1 < len(best)):
                best = (module, *back)
        if best is not None and frozenset(best) not in seen:
            seen.add(frozenset(best))
            cycles.append(best)
    return cycles


def _complexity(args: argparse.Namespace) -> int:
    paths = [
        str(Path(p).resolve().relative_to(ROOT)) if Path(p).resolve().is_relative_to(ROOT) else p for p in args.paths
    ]
    run = subprocess.run([sys.executable, "-m", "radon", "cc", "-j", *paths], capture_output=True, text=True, cwd=ROOT)
    if run.returncode != 0:
        print(f"check_code: radon failed: {run.stderr.strip()}", file=sys.stderr)
        return 2
    offenders = complexity_offenders(json.loads(run.stdout), args.max)
    for offender in offenders:
        print(offender)
    if offenders:
        print(f"{len(offenders)} function(s) above cyclomatic complexity {args.max}: split them into named steps")
    return 1 if offenders else 0


def _cycles(args: argparse.Namespace) -> int:
    import grimp

    sys.path.insert(0, str(ROOT))  # this checkout's package, not an installed copy
    graph = grimp.build_graph(args.package, include_external_packages=False, cache_dir=None)
    cycles = import_cycles(graph)
    for cycle in cycles:
        print("import cycle: " + " -> ".join(cycle))
    if cycles:
        print(f"{len(cycles)} import cycle(s) in {args.package}: move what both sides need into a third module")
    return 1 if cycles else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="check", required=True)
    cc = sub.add_parser("complexity", help="functions above the cyclomatic-complexity limit (radon)")
    cc.add_argument("--max", type=int, default=MAX_COMPLEXITY, help="the largest complexity allowed (default 15)")
    cc.add_argument("paths", nargs="*", default=[str(ROOT / "harness")], help="files or folders (default: harness)")
    cy = sub.add_parser("cycles", help="import cycles between the modules of a package (grimp)")
    cy.add_argument("--package", default="harness", help="the package to check (default: harness)")
    args = parser.parse_args(argv)
    return _complexity(args) if args.check == "complexity" else _cycles(args)


if __name__ == "__main__":
    sys.exit(main())
