#!/usr/bin/env python
"""How long a ranked verdict takes, whole process: ``python -m harness run FILE --mode leaderboard``
with a fresh secret each time, and ``run-all`` of N byte-different copies of one example.

For each example it runs ``--repeats`` verdicts in fresh processes: the first with an empty compile
cache (a file seen for the first time), the rest with the cache the first one filled. Each verdict's
wall time (outside, around the process), the run's own phases (``phases_s`` from its JSON), verdict
and score go into the results file, with the device, the versions, the commit and the date. Then one
``run-all`` of ``--copies`` copies of the first example (a comment appended to each, so each is a
distinct job and a distinct compile-cache entry), timed as a whole; each stored run's wall time and phases
are kept (``jobs``), and the stored runs of copies that did not pass whole (one honest file: each is a
false verdict). --run-all-rounds R runs R such run-alls, each of copies with bytes of their own (each new
to the compile cache), one after another: ``run_alls`` lists them.

Issue 49's targets on the H200: triton_mxfp4 at most 10 s a verdict, triton_nvfp4 at most 20 s, and
run-all of 10 distinct mxfp4 files at most 80 s.

The results file is written after every verdict and after the run-all, ``"complete": false`` until the
last; with --budget-s it starts no verdict or run-all that its estimate (the verdicts' wall times so far;
the run-all: --copies times the copied example's slowest verdict) says would end past the budget, and exits 0.

With --baseline-tree DIR (a copy of this repository at another commit: ``git worktree add DIR COMMIT``),
every verdict is run twice, once from each tree, in an order swapped each round and with one fresh secret
shared by the round's two (the same inputs and shape orders): the A/B of a harness change. Each tree has
its own compile cache. The file then gives, per example, each tree's median score and median wall time
(filled cache) and the paired log difference of the scores (this tree over the baseline) with its 95% t
interval. With --repeats 0 and --copies N instead, it compares run-alls: --run-all-rounds rounds of one
run-all from each tree (the order swapped each round, the same copies), each tree's median wall time and
the paired log difference of the walls. --resume adds rounds to an A/B file of the same two commits (a device lease is short, and hosts
differ from lease to lease: pairs are made within a round, rounds pooled over leases): each call's
environment goes into ``sessions`` and each row names its session; a call's first round runs with empty
caches. --merge adds the rounds of run-all A/B files that calls wrote each to a file of their own to
--out's, measuring nothing.

With --option-ab "OPTIONS" (harness run options, e.g. "--compile-ahead off"), the verdicts are an A/B of
those options on a file seen for the first time: each of --repeats rounds runs two verdicts with a fresh,
empty compile cache each, one with OPTIONS and one without (the order swapped each round, one fresh
secret shared), then the run-all as usual (without OPTIONS). The file gives, per example, each side's
median wall time and the paired log difference of the scores and of the wall times (without over with).

With --server, a verdict server (``python -m harness serve --detach``) is started first, in the same
environment, and every verdict's ``harness run`` goes through it (what a competitor rehearsing with
one sees); the results file records the server's start time and how many runs it served.

Without a GPU, or with --quick, it runs the small CPU fixture tasks with the torch examples (a smoke
test of the script, not a measurement).

Examples:
  python bench/verdict_time.py --examples triton_mxfp4,triton_nvfp4 --copies 0 --out results/h200_verdicts/verdict_time.json
  python bench/verdict_time.py --examples triton_mxfp4 --repeats 0 --copies 10 --out results/h200_verdicts/run_all_mxfp4.json
  python bench/verdict_time.py --examples triton_mxfp4 --repeats 0 --copies 10 --run-all-rounds 3 --out /tmp/run_alls.json
  python bench/verdict_time.py --examples triton_mxfp4 --copies 0 --server --out results/h200_verdicts/verdict_time_server.json
  python bench/verdict_time.py --examples triton_nvfp4 --repeats 4 --copies 0 --baseline-tree ../base --out /tmp/ab.json
  python bench/verdict_time.py --examples triton_nvfp4 --repeats 3 --copies 0 --baseline-tree ../base --resume --out /tmp/ab.json
  python bench/verdict_time.py --examples triton_mxfp4 --repeats 0 --copies 10 --baseline-tree ../base --run-all-rounds 2 --out /tmp/ab.json
  python bench/verdict_time.py --merge /tmp/ab2.json /tmp/ab3.json --out /tmp/ab.json
  python bench/verdict_time.py --examples triton_mxfp4,triton_nvfp4 --repeats 3 --option-ab "--compile-ahead off" --out /tmp/ab.json
  python bench/verdict_time.py --quick --out /tmp/verdict_time.json           # CPU smoke test
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from _common import ROOT, ResultsFile, doc_parser, git_commit, median, paired_log_diff, utc_now, write_results

from harness.cli.options import add_warmup_chunks_argument  # after _common, which puts the root on sys.path

VERSION = 7  # 1 - first version; 2 - each verdict's message; 3 - --server; 4 - A/B sessions; 5 - --option-ab;
# 6 - run-all A/B (--baseline-tree with --copies), compile rounds; 7 - run_alls, a list (--run-all-rounds
# run-alls of one tree), in place of run_all
GPU_EXAMPLES = [("submissions/triton_mxfp4.py", "mxfp4_mm"), ("submissions/triton_nvfp4.py", "nvfp4_gemm")]
CPU_EXAMPLES = [
    ("submissions/torch_mxfp4.py", "tests/fixtures/tasks/mxfp4_small/task.yml"),
    ("submissions/torch_nvfp4.py", "tests/fixtures/tasks/nvfp4_small/task.yml"),
]


def _env(root: Path, secret: str | None = None) -> dict[str, str]:
    """The environment of a harness process run from ``root``: a fresh secret unless ``secret`` is given."""
    env = dict(os.environ, HARNESS_SECRET_SEED=secret or secrets.token_hex(16))
    env["PYTHONPATH"] = str(root) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _extra(quick: bool, warmup_chunks: int = 0) -> list[str]:
    """The options every harness command here gets: the CPU smoke test's, and --warmup-chunks."""
    return (["--device", "cpu", "--max-repeats", "3"] if quick else []) + (
        ["--warmup-chunks", str(warmup_chunks)] if warmup_chunks else []
    )


def one_verdict(
    sub: str, task: str, cache: Path, work: Path, extra: list[str], root: Path = ROOT, secret: str | None = None
) -> dict:
    """One whole-process ranked verdict of the harness in ``root``: wall time outside, and what the run's
    JSON says."""
    out = work / f"verdict-{time.monotonic_ns()}.json"
    command = [sys.executable, "-m", "harness", "run", sub, "--task", task, "--mode", "leaderboard"]
    command += ["--json", str(out), "--quiet", "--triton-cache-dir", str(cache), *extra]
    t0 = time.perf_counter()
    p = subprocess.run(command, cwd=root, env=_env(root, secret), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    record: dict = {"wall_s": wall, "exit_code": p.returncode}
    try:
        doc = json.loads(out.read_text())
    except (OSError, ValueError):
        record["error"] = p.stderr[-2000:]
        return record
    for key in ("verdict", "message", "score_us", "score_ci_us", "phases_s", "wall_s", "warnings", "harness_version"):
        record["run_" + key if key == "wall_s" else key] = doc.get(key)
    record["started_by"] = (doc.get("sandbox") or {}).get("started_by")
    return record


def run_all(sub: str, task: str, copies: int, work: Path, extra: list[str], root: Path = ROOT, tag: str = "") -> dict:
    """``run-all`` of ``copies`` byte-different copies of ``sub`` from the tree ``root`` (in folders of
    ``work`` named by ``tag``): total wall time and the verdicts stored."""
    folder, store = work / f"copies{tag}", work / f"store{tag}"
    folder.mkdir()
    source = (ROOT / sub).read_text()
    # bytes of this run-all's own (this call's work folder, and the tag of an A/B's run): where 'nobody'
    # cannot enter the XDG cache below, the compile cache is a root shared by the machine
    # (compile_cache.SHARED_ROOT_FOR_NOBODY), and a run-all of the same bytes found them compiled there
    for i in range(copies):
        mark = f"{i} {work.name}{tag}"
        (folder / f"copy_{i:02d}_{Path(sub).name}").write_text(source + f"\n# verdict_time copy {mark}\n")
    command = [sys.executable, "-m", "harness", "run-all", str(folder), "--task", task, "--mode", "leaderboard"]
    command += ["--results-dir", str(store), "--all", *extra]
    env = _env(root)
    env["XDG_CACHE_HOME"] = str(work / f"xdg-cache{tag}")  # an empty compile cache: every copy compiles
    t0 = time.perf_counter()
    p = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    board = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "leaderboard",
            "--task",
            task,
            "--results-dir",
            str(store),
            "--format",
            "json",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    try:
        ranked = json.loads(board.stdout)
    except ValueError:
        ranked = {"error": board.stderr[-2000:]}
    return {
        "files": copies,
        "wall_s": wall,
        "exit_code": p.returncode,
        "stderr_tail": p.stderr[-3000:],
        "compile_rounds": [line for line in p.stderr.splitlines() if "between jobs" in line],  # what run-all said
        "leaderboard": ranked,
        **stored_runs(task, store, root, env),
    }


def stored_runs(task: str, store: Path, root: Path, env: dict[str, str]) -> dict[str, list[dict]]:
    """What a run-all stored (``harness export``): ``jobs``, each run's file, verdict, wall time and phases
    (where a job's time went), and ``runs_not_passed``, the runs that did not pass, whole: the copies are
    one honest file, so each is a false verdict of the harness or the host, and its blocks and warnings
    (which blocks were measured again, and why) are what it is read from."""
    out = store / "export.json"
    command = [sys.executable, "-m", "harness", "export", "--task", task, "--format", "json"]
    done = subprocess.run(
        [*command, "--results-dir", str(store), "-o", str(out)], cwd=root, env=env, capture_output=True, text=True
    )
    try:
        rows = json.loads(out.read_text())["runs"]
        runs = [row.get("result") or {} for row in rows]
    except (OSError, ValueError, KeyError, TypeError) as e:
        return {"jobs": [], "runs_not_passed": [{"error": f"harness export: {e!r}: {done.stderr[-1000:]}"}]}
    jobs = [
        {
            "file": Path((r.get("submission") or {}).get("path") or "?").name,
            "verdict": r.get("verdict"),
            "wall_s": r.get("wall_s"),
            "phases_s": r.get("phases_s"),
        }
        for r in runs
    ]
    return {"jobs": jobs, "runs_not_passed": [row for row, r in zip(rows, runs) if r.get("verdict") != "pass"]}


def _environment(gpu: bool) -> dict:
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return {
        "device": torch.cuda.get_device_name(0) if gpu else "cpu",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "triton": triton_version,
        "cpu_count": os.cpu_count(),
        # what a look for stray processes cost before process_tree (bench/stray_scan.py) grew with this
        "processes_on_machine": len(psutil.pids()),
        "commit": git_commit(),
        "date": utc_now(),
    }


def start_server(work: Path, quick: bool) -> dict:
    """A verdict server for the verdicts' environment (its socket beneath ``work``): how long its start
    took, as ``serve --detach`` waits until it answers."""
    runtime = work / "run"
    runtime.mkdir(mode=0o700)
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)  # _env() copies it into every verdict's environment
    command = [sys.executable, "-m", "harness", "serve", "--detach", "--idle-exit", "900"]
    command += ["--device", "cpu"] if quick else []
    t0 = time.perf_counter()
    p = subprocess.run(command, cwd=ROOT, env=_env(ROOT), capture_output=True, text=True)
    return {"start_s": time.perf_counter() - t0, "exit_code": p.returncode, "stderr_tail": p.stderr[-1000:]}


def stop_server(record: dict) -> None:
    """How many runs the server served (every verdict, when all went through it), then stops it."""
    status = subprocess.run(
        [sys.executable, "-m", "harness", "serve", "--status"], cwd=ROOT, env=_env(ROOT), capture_output=True, text=True
    )
    try:
        record["runs_served"] = json.loads(status.stdout)["runs"]
    except (ValueError, KeyError, TypeError):
        record["runs_served"] = None
    subprocess.run([sys.executable, "-m", "harness", "serve", "--stop"], cwd=ROOT, env=_env(ROOT), capture_output=True)


def _measure_ab(
    examples: list[tuple[str, str]], args: argparse.Namespace, gpu: bool, work: Path, rf: ResultsFile
) -> None:
    """--baseline-tree: each round, one verdict from each tree (the order swapped each round, one secret
    shared), then each example's comparison (:func:`compare_trees`)."""
    trees = {"this": ROOT, "baseline": Path(args.baseline_tree).resolve()}
    session = len(rf.doc["sessions"]) - 1
    for sub, task in examples:
        rows = rf.doc["verdicts"].setdefault(sub, [])  # --resume: the rounds of earlier sessions stay
        first = 1 + max((r["round"] for r in rows), default=-1)
        for i in range(args.repeats):
            secret, n = secrets.token_hex(16), first + i
            order = list(trees) if n % 2 == 0 else list(trees)[::-1]
            for tree in order:
                kind = "verdict-" + ("empty" if i == 0 else "filled")
                if not rf.allows(f"{sub}: verdict {i + 1}/{args.repeats} ({tree})", kind):
                    return
                cache = work / f"cache-{Path(sub).stem}-{tree}"  # empty before each tree's first verdict
                row = one_verdict(sub, task, cache, work, _extra(not gpu, args.warmup_chunks), trees[tree], secret)
                row.update(cache="empty" if i == 0 else "filled", tree=tree, round=n, session=session)
                rows.append(row)
                rf.doc["comparison"] = {s: compare_trees(rs) for s, rs in rf.doc["verdicts"].items()}
                rf.done(kind, row["wall_s"])
                print(f"{sub} ({tree}): {row.get('verdict')} in {row['wall_s']:.1f} s", file=sys.stderr)


def _measure_run_all_ab(
    examples: list[tuple[str, str]], args: argparse.Namespace, gpu: bool, work: Path, rf: ResultsFile
) -> None:
    """--baseline-tree with --copies: --run-all-rounds rounds of one run-all from each tree (the order
    swapped each round), every copy new to a compile cache of its own; then the comparison."""
    trees = {"this": ROOT, "baseline": Path(args.baseline_tree).resolve()}
    sub, task = examples[0]
    ab = rf.doc.setdefault("run_all_ab", {"submission": sub, "task": task, "files": args.copies, "rows": []})
    first = 1 + max((r["round"] for r in ab["rows"]), default=-1)
    session = len(rf.doc["sessions"]) - 1
    for n in range(first, first + args.run_all_rounds):
        for tree in list(trees) if n % 2 == 0 else list(trees)[::-1]:
            walls = [r["wall_s"] for r in ab["rows"]]
            if not rf.allows(
                f"run-all of {args.copies} copies ({tree}, round {n})", "run-all", max(walls, default=None)
            ):
                return
            record = run_all(
                sub, task, args.copies, work, _extra(not gpu, args.warmup_chunks), trees[tree], f"-{n}-{tree}"
            )
            record["leaderboard"] = _board(record["leaderboard"])
            record.update(tree=tree, round=n, session=session)
            ab["rows"].append(record)
            ab["comparison"] = compare_run_alls(ab["rows"])
            rf.done("run-all", record["wall_s"])
            print(f"run-all of {args.copies} copies ({tree}): {record['wall_s']:.1f} s", file=sys.stderr)


def _board(board: dict) -> list | dict:
    """A stored board, short: each ranked entry's name, score and rank label (the board itself otherwise)."""
    try:
        return [[e["name"], e["score_us"], e["rank_label"]] for d in board["devices"] for e in d["ranked"]]
    except (KeyError, TypeError):
        return board


def compare_run_alls(rows: list[dict]) -> dict:
    """Each tree's median run-all wall time and the paired log difference of the walls (this tree over
    the baseline) over the rounds both trees ran."""
    walls = {t: {r["round"]: r["wall_s"] for r in rows if r["tree"] == t} for t in ("this", "baseline")}
    rounds = sorted(set(walls["this"]) & set(walls["baseline"]))
    out: dict = {t: {"median_wall_s": median(list(w.values())), "walls_s": list(w.values())} for t, w in walls.items()}
    out["paired_wall_this_over_baseline"] = paired_log_diff(
        [walls["baseline"][k] for k in rounds], [walls["this"][k] for k in rounds]
    )
    return out


def half_width_pct(row: dict) -> float | None:
    """A verdict's 95% half-width as a percentage of its score (from ``score_ci_us``), or None."""
    ci, score = row.get("score_ci_us"), row.get("score_us")
    if not ci or not score:
        return None
    return 100.0 * (ci[1] - ci[0]) / (2 * score)


def compare_trees(rows: list[dict]) -> dict:
    """Each tree's median score, median wall time (filled cache) and median half-width (what the tree
    does to the blocks' spread), and the paired log difference of the scores, this tree over the
    baseline, over the rounds both passed."""
    out: dict = {}
    scores: dict[str, dict[int, float]] = {}
    for tree in ("this", "baseline"):
        mine = [r for r in rows if r.get("tree") == tree]
        passed = [r for r in mine if r.get("verdict") == "pass"]
        scores[tree] = {r["round"]: r["score_us"] for r in passed}
        widths = [w for w in map(half_width_pct, passed) if w is not None]
        out[tree] = {
            "median_score_us": median(list(scores[tree].values())),
            "median_wall_s": median([r["wall_s"] for r in mine if r.get("cache") == "filled"]),
            "median_half_width_pct": median(widths),
            "half_widths_pct": widths,
        }
    rounds = sorted(set(scores["this"]) & set(scores["baseline"]))
    out["paired_this_over_baseline"] = paired_log_diff(
        [scores["baseline"][k] for k in rounds], [scores["this"][k] for k in rounds]
    )
    return out


def _measure_option_ab(
    examples: list[tuple[str, str]], args: argparse.Namespace, gpu: bool, work: Path, rf: ResultsFile
) -> None:
    """--option-ab: each round, two first verdicts (empty caches), with and without the options (the order
    swapped each round, one secret shared), then each example's comparison; then the run-all."""
    options = args.option_ab.split()
    for sub, task in examples:
        rows = rf.doc["verdicts"][sub] = []
        for n in range(args.repeats):
            secret = secrets.token_hex(16)
            for side in ("without", "with") if n % 2 == 0 else ("with", "without"):
                if not rf.allows(f"{sub}: round {n + 1}/{args.repeats} ({side} {args.option_ab})", "verdict-empty"):
                    return
                cache = work / f"cache-{Path(sub).stem}-{n}-{side}"  # empty: a file seen for the first time
                extra = _extra(not gpu, args.warmup_chunks) + (options if side == "with" else [])
                row = one_verdict(sub, task, cache, work, extra, secret=secret)
                row.update(cache="empty", side=side, round=n)
                rows.append(row)
                rf.doc["comparison"] = {x: compare_option(r) for x, r in rf.doc["verdicts"].items()}
                rf.done("verdict-empty", row["wall_s"])
                print(
                    f"{sub} ({side} {args.option_ab}): {row.get('verdict')} in {row['wall_s']:.1f} s", file=sys.stderr
                )
    _run_all_step(examples, args, gpu, work, rf)


def compare_option(rows: list[dict]) -> dict:
    """Each side's median score and wall time, and the paired log differences (without over with) of the
    scores and the wall times over the rounds both passed."""
    out: dict = {}
    by_side: dict[str, dict[int, dict]] = {}
    for side in ("with", "without"):
        by_side[side] = {r["round"]: r for r in rows if r.get("side") == side and r.get("verdict") == "pass"}
        mine = list(by_side[side].values())
        out[side] = {
            "median_score_us": median([r["score_us"] for r in mine]),
            "median_wall_s": median([r["wall_s"] for r in mine]),
        }
    rounds = sorted(set(by_side["with"]) & set(by_side["without"]))
    for key in ("score_us", "wall_s"):
        out[f"paired_{key}_without_over_with"] = paired_log_diff(
            [by_side["with"][k][key] for k in rounds], [by_side["without"][k][key] for k in rounds]
        )
    return out


def _measure(examples: list[tuple[str, str]], args: argparse.Namespace, gpu: bool, work: Path, rf: ResultsFile) -> None:
    """Every verdict, then the run-all: each a unit, the results file written after it, while the budget
    allows (``rf``)."""
    doc = rf.doc
    for sub, task in examples:
        cache = work / f"cache-{Path(sub).stem}"  # empty before the first verdict of each example
        rows = doc["verdicts"][sub] = []
        for i in range(args.repeats):
            kind = "verdict-" + ("empty" if i == 0 else "filled")
            if not rf.allows(f"{sub}: verdict {i + 1}/{args.repeats}", kind):
                return
            row = one_verdict(sub, task, cache, work, _extra(not gpu, args.warmup_chunks))
            row["cache"] = "empty" if i == 0 else "filled"
            rows.append(row)
            rf.done(kind, row["wall_s"])
            print(f"{sub}: {row.get('verdict')} in {row['wall_s']:.1f} s ({row['cache']} cache)", file=sys.stderr)
    _run_all_step(examples, args, gpu, work, rf)


def run_all_estimate(copies: int, copied: list[dict[str, Any]], every_wall: list[float]) -> float | None:
    """The run-all's seconds, guessed: every copy is new to the compile cache, so as slow as the copied
    example's slowest verdict (``copied``: its rows), else the slowest of any example; None: nothing yet."""
    walls = [row["wall_s"] for row in copied] or every_wall
    return copies * max(walls) if walls else None


def _run_all_step(
    examples: list[tuple[str, str]], args: argparse.Namespace, gpu: bool, work: Path, rf: ResultsFile
) -> None:
    """--run-all-rounds run-alls of --copies copies of the first example, each of copies new to the
    compile cache, while the budget allows (a round after the first is guessed from the ones before)."""
    doc = rf.doc
    if args.copies <= 0:
        return
    sub, task = examples[0]
    extra = _extra(not gpu, args.warmup_chunks)
    done: list[dict] = []
    for k in range(args.run_all_rounds):
        guess = None
        if not done:
            guess = run_all_estimate(
                args.copies, doc["verdicts"].get(sub, []), [w for ws in rf.walls.values() for w in ws]
            )
        if not rf.allows(f"run-all {k + 1}/{args.run_all_rounds} of {args.copies} copies", "run-all", guess):
            return
        done.append(
            dict(run_all(sub, task, args.copies, work, extra, tag=f"-{k}" if k else ""), submission=sub, task=task)
        )
        doc["run_alls"] = done
        rf.done("run-all", done[-1]["wall_s"])
        print(f"run-all of {args.copies} copies: {done[-1]['wall_s']:.1f} s", file=sys.stderr)


def _resumed(out: Path, doc: dict, p: argparse.ArgumentParser) -> dict:
    """The A/B file ``out`` with this call's environment added to its sessions; exit 2 where it is not an
    A/B file of this version comparing the same two commits."""
    try:
        earlier = json.loads(out.read_text())
        mine = (earlier["version"], earlier["environment"]["commit"], earlier["baseline"]["commit"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        p.error(f"--resume: {out} is not an A/B file of this script ({e!r}); choose another --out")
    wanted = (doc["version"], doc["environment"]["commit"], doc["baseline"]["commit"])
    if mine != wanted:
        p.error(
            f"--resume: {out} compares other trees (version, this commit, baseline commit = {mine}; this call: "
            f"{wanted}); give the same two commits or another --out"
        )
    earlier["sessions"] = [*earlier.get("sessions", [earlier["environment"]]), doc["environment"]]
    return earlier


def _ab_key(doc: dict) -> tuple:
    """What two run-all A/B files must share to be pooled: this script's version, both commits, the copied
    example and the number of copies."""
    ab = doc["run_all_ab"]
    return doc["version"], doc["environment"]["commit"], doc["baseline"]["commit"], ab["submission"], ab["files"]


def merge(out: Path, others: list[Path], p: argparse.ArgumentParser) -> int:
    """Adds the run-all A/B rounds and sessions of ``others`` to ``out``'s, as --resume would have (calls
    that each wrote a file of their own); nothing is measured. Their rounds are numbered after ``out``'s
    and each row keeps its session; a file's rounds swap the trees' order only among themselves (each
    file's first round ran this tree first). The file's ``merged`` lists what was added."""
    try:
        doc = json.loads(out.read_text())
        extra = [(q, json.loads(q.read_text())) for q in others]
        mine = _ab_key(doc)
        for q, prev in extra:
            if _ab_key(prev) != mine:
                p.error(f"--merge: {q} compares other trees or copies ({_ab_key(prev)}, not {mine})")
    except (OSError, ValueError, KeyError, TypeError) as e:
        p.error(f"--merge: {e!r}; give --out and --merge run-all A/B files of this script")
    rows = doc["run_all_ab"]["rows"]
    for q, prev in extra:
        sessions = doc.get("sessions") or [doc["environment"]]
        first = 1 + max((r["round"] for r in rows), default=-1)
        rows += [
            r | {"round": r["round"] + first, "session": r["session"] + len(sessions)}
            for r in prev["run_all_ab"]["rows"]
        ]
        doc["sessions"] = sessions + (prev.get("sessions") or [prev["environment"]])
        doc["units_done"] = doc.get("units_done", 0) + prev.get("units_done", 0)
        doc["elapsed_s"] = doc.get("elapsed_s", 0.0) + prev.get("elapsed_s", 0.0)
        doc["stopped"], doc["complete"] = prev.get("stopped"), prev.get("complete", False)
        date = prev["environment"].get("date", "?")
        doc.setdefault("merged", []).append(f"{q.name} (a call of {date}): rounds from {first} on, added by --merge")
    doc["run_all_ab"]["comparison"] = compare_run_alls(rows)
    write_results(out, doc)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = doc_parser(__doc__)
    p.add_argument("--out", required=True, help="the results file (JSON)")
    p.add_argument("--quick", action="store_true", help="the CPU fixture tasks (a smoke test, not a measurement)")
    p.add_argument("--repeats", type=int, default=3, help="verdicts per example (the first with an empty cache)")
    p.add_argument("--copies", type=int, default=10, help="files in the run-all (0: no run-all)")
    p.add_argument(
        "--examples", help="comma-separated file stems to run (default: all; the run-all copies the first one)"
    )
    p.add_argument("--budget-s", type=float, default=None, help="start no verdict or run-all past this many seconds")
    p.add_argument("--server", action="store_true", help="every verdict through a verdict server started first")
    p.add_argument(
        "--baseline-tree", metavar="DIR", help="a copy of the repository at another commit: A/B each verdict"
    )
    p.add_argument(
        "--baseline-commit",
        metavar="SHA",
        help="that copy's commit, for the file (default: its own git checkout's, if it is one)",
    )
    p.add_argument("--resume", action="store_true", help="with --baseline-tree: add rounds to the --out A/B file")
    p.add_argument(
        "--run-all-rounds",
        type=int,
        default=1,
        help="run-alls of new copies (with --baseline-tree and --repeats 0: rounds of one run-all from each tree)",
    )
    p.add_argument(
        "--option-ab",
        metavar="OPTIONS",
        help='A/B of harness run options on first verdicts, e.g. "--compile-ahead off"',
    )
    p.add_argument(
        "--merge",
        nargs="+",
        metavar="FILE",
        help="add these run-all A/B files' rounds to --out's (measures nothing)",
    )
    add_warmup_chunks_argument(p)
    args = p.parse_args(argv)
    if args.merge:
        return merge(Path(args.out), [Path(m) for m in args.merge], p)
    if args.baseline_tree and (args.server or (args.copies and args.repeats)):
        p.error(
            "--baseline-tree compares whole-process verdicts (--copies 0) or run-alls (--repeats 0), without --server"
        )
    if args.option_ab and (args.baseline_tree or args.server):
        p.error("--option-ab: give no --baseline-tree and no --server (one tree, whole-process verdicts)")
    if args.resume and not args.baseline_tree:
        p.error("--resume adds rounds to an A/B file: give --baseline-tree too")
    if args.baseline_tree and not (Path(args.baseline_tree) / "harness" / "__main__.py").is_file():
        p.error(f"--baseline-tree {args.baseline_tree}: not a copy of this repository (no harness/__main__.py)")
    import torch

    gpu = torch.cuda.is_available() and not args.quick
    available = GPU_EXAMPLES if gpu else CPU_EXAMPLES
    examples = available
    if args.examples:
        wanted = args.examples.split(",")
        examples = [e for e in available if Path(e[0]).stem in wanted]
        if not examples:
            p.error(f"--examples {args.examples}: none of {', '.join(Path(e[0]).stem for e in available)}")
    work = Path(tempfile.mkdtemp(prefix="verdict-time-"))
    work.chmod(0o711)  # a worker that runs as 'nobody' must reach its compile-cache entry beneath it
    doc: dict = {
        "version": VERSION,
        "quick": not gpu,
        "warmup_chunks": args.warmup_chunks,
        "option_ab": args.option_ab,
        "environment": _environment(gpu),
        "verdicts": {},
    }
    if args.baseline_tree:
        doc["baseline"] = {
            "tree": args.baseline_tree,
            "commit": args.baseline_commit or git_commit(Path(args.baseline_tree)),
        }
        doc["sessions"] = [doc["environment"]]
        if args.resume and Path(args.out).exists():
            doc = _resumed(Path(args.out), doc, p)
    rf = ResultsFile(Path(args.out), doc, args.budget_s, doc.get("elapsed_s") or 0.0, doc.get("units_done") or 0)
    try:
        if args.server:
            doc["server"] = start_server(work, not gpu)
            print(f"verdict server started in {doc['server']['start_s']:.1f} s", file=sys.stderr)
        if args.baseline_tree:
            measure = _measure_run_all_ab if args.copies else _measure_ab
        else:
            measure = _measure_option_ab if args.option_ab else _measure
        measure(examples, args, gpu, work, rf)
    finally:
        if args.server:
            stop_server(doc["server"])
        shutil.rmtree(work, ignore_errors=True)
    rf.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
