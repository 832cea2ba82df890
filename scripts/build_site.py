#!/usr/bin/env python
"""Build the leaderboard site from stored results, or from RunResult JSON files, and optionally screenshot it.

    python scripts/build_site.py --from-runs results/h200_runs --out /tmp/h200-site \\
        --screenshot results/site_h200_index.png --run-screenshot /tmp/h200-site-run.png
    python scripts/build_site.py --results-dir harness-results --out site/

--from-runs DIR loads every ``*.json`` RunResult in DIR (``RunResult.from_json``) into a fresh temporary
store (display name: the submission's name; the submission file's header names it as it did when it
ran), then builds the site of every task in it. The screenshots need Debian's chromium and
chromium-driver and selenium (``pip install -e '.[test]'``). Exit status 0, or 2 for a usage error.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.errors import EXIT_OK, EXIT_USAGE, UsageError  # noqa: E402
from harness.optional import require_extra  # noqa: E402
from harness.results import RunResult  # noqa: E402
from harness.store.database import open_store  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--from-runs", metavar="DIR", help="a folder of RunResult JSON files")
    src.add_argument("--results-dir", metavar="DIR", help="an existing results store")
    p.add_argument("--out", required=True, metavar="DIR", help="the site's folder")
    p.add_argument("--screenshot", metavar="PNG", help="save a screenshot of the index here")
    p.add_argument("--run-screenshot", metavar="PNG", help="save a screenshot of the first ranked run's page here")
    return p.parse_args(argv)


def load_runs(folder: Path, results_dir: str) -> int:
    """Records every RunResult JSON file of ``folder`` into the store; returns how many."""
    files = sorted(folder.glob("*.json"))
    if not files:
        raise UsageError(f"no *.json run results in {folder}")
    with open_store(results_dir) as st:
        for f in files:
            try:
                result = RunResult.from_json(f.read_text(encoding="utf-8"))
            except (ValueError, TypeError, KeyError) as exc:
                raise UsageError(f"{f} is not a RunResult JSON file ({exc})") from exc
            st.record(result, display_name=result.submission.name)
    return len(files)


def first_ranked_run(build) -> int | None:
    for t in build.model.tasks:
        for s in t.sections:
            if s.ranked:
                return s.ranked[0].run_id
    return None


def shoot(build, index_png: str | None, run_png: str | None) -> None:
    from harness.report.site.browser import headless_chromium, screenshot

    with headless_chromium() as driver:
        if index_png:
            screenshot(driver, build.index, Path(index_png), max_height=3200)
            print(f"wrote {index_png}", file=sys.stderr)
        run_id = first_ranked_run(build)
        if run_png and run_id is not None:
            screenshot(driver, build.out_dir / "runs" / f"run-{run_id}.html", Path(run_png), max_height=2400)
            print(f"wrote {run_png}", file=sys.stderr)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        require_extra("site")  # Plotly and Jinja2: exit 2 naming the extra without them
        from harness.report.site import build_site

        with tempfile.TemporaryDirectory(prefix="site-store-") as tmp:
            results_dir = args.results_dir or tmp
            if args.from_runs:
                n = load_runs(Path(args.from_runs), results_dir)
                print(f"loaded {n} run results from {args.from_runs}", file=sys.stderr)
            build = build_site(args.out, None, results_dir=results_dir)
        for w in build.warnings:
            print(w, file=sys.stderr)
        print(f"wrote {build.index} ({len(build.run_pages)} run pages, {build.plots} plots)", file=sys.stderr)
        if args.screenshot or args.run_screenshot:
            shoot(build, args.screenshot, args.run_screenshot)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
