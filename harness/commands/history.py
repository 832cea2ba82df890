"""``history``: the past runs of one submission (by file, content hash or name)."""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from harness.commands.leaderboard import add_results_dir_argument, format_rows, resolve_task, us
from harness.submission import display_name
from harness.errors import UsageError
from harness.store import RunRow, Store, open_store

NAME = "history"
HELP = "list the stored runs of one submission: date, mode, device, verdict, score, commit"
EXAMPLES = """  python -m harness history submissions/triton_mxfp4.py --task mxfp4_mm
  python -m harness history "Fast Kernel" --task mxfp4_mm --format json

A file matches the runs of the same path, the same content (sha256) or the same display name; a name
that is not a file matches display names, file stems and sha256 prefixes (8+ hex digits). The 'sha256'
column is marked '*' where the run's content equals the file as it is now; 'commit' is the git commit
of the checkout that held the submission when it ran."""


def add_arguments(parser) -> None:
    parser.add_argument("submission", metavar="FILE", help="submission file, or its name as shown on the leaderboard")
    parser.add_argument("--task", required=True, help="task name, e.g. mxfp4_mm")
    parser.add_argument("--format", choices=("table", "markdown", "json", "csv"), default="table")
    add_results_dir_argument(parser)


def _file_sha(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def find_runs(st: Store, task: str, ref: str) -> list[RunRow]:
    """Runs of ``task`` that belong to the submission ``ref`` (a file path or a name); oldest first."""
    runs = st.runs(task=task)
    path = Path(ref)
    if path.is_file():
        sha, resolved, name = _file_sha(path), path.resolve(), display_name(path)
        return [r for r in runs if r.submission_sha256 == sha or r.display_name == name
                or Path(r.submission_path).resolve() == resolved]
    ref_l = ref.lower()
    is_hex = len(ref) >= 8 and all(c in "0123456789abcdef" for c in ref_l)
    return [r for r in runs if r.display_name == ref or Path(r.submission_path).stem == ref
            or (is_hex and r.submission_sha256.startswith(ref_l))]


def no_runs_error(st: Store, task: str, ref: str) -> UsageError:
    names = sorted({r.display_name for r in st.runs(task=task)})
    known = ", ".join(repr(n) for n in names[:20]) or "none yet: run 'python -m harness run-all' first"
    return UsageError(f"no stored runs of {ref!r} for task {task!r}; submissions with runs: {known}")


def run(args) -> int:
    args.task = resolve_task(args.task)[0]
    with open_store(args.results_dir) as st:
        runs = find_runs(st, args.task, args.submission)
        if not runs:
            raise no_runs_error(st, args.task, args.submission)
    current = _file_sha(Path(args.submission))
    if args.format == "json":
        rows = [dict(vars(r), current=r.submission_sha256 == current) for r in runs]
        sys.stdout.write(json.dumps({"version": 1, "task": args.task, "submission": args.submission, "runs": rows},
                                    indent=2, sort_keys=True, allow_nan=False) + "\n")
        return 0
    headers = ["run", "date", "name", "mode", "device", "verdict", "score (us)", "sha256", "commit", "message"]
    rows = []
    for r in runs:
        verdict = r.verdict if r.complete or r.verdict == "incomplete" else f"{r.verdict} (interrupted)"
        sha = r.submission_sha256[:10] + ("*" if r.submission_sha256 == current else "")
        message = (r.message.splitlines() or [""])[0][:80]
        score = (repr(r.score_us) if r.score_us is not None else "") if args.format == "csv" else us(r.score_us)
        rows.append([r.id, r.started_at[:16].replace("T", " "), r.display_name, r.mode, r.device_name or "-",
                     verdict, score, sha, r.git_commit or "-", message])
    sys.stdout.write(format_rows(headers, rows, args.format, right=[0, 6]))
    return 0
