"""Do the tests bite? For each defence of the harness, turn it off in a scratch copy of the repository
(a small textual patch, which must apply exactly once) and run the CPU tests that should notice; at
least one of them must fail. A baseline run of the same tests on the unpatched copy must pass first,
or a failure would prove nothing.

Defences that act only on a GPU are patched too: the CPU tests cannot reach them, and the report says
so and names the GPU tests that cover them.

    python bench/mutation_check.py                 # writes results/mutation_check.txt
    python bench/mutation_check.py --only "output check"
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "mutation_check.txt"


@dataclass(frozen=True)
class Mutation:
    defence: str
    file: str  # relative to the repository root
    old: str  # must occur exactly once
    new: str
    tests: tuple[str, ...]  # pytest arguments (paths, -k)
    gpu_only: str = ""  # why no CPU test can catch it, and which GPU tests do


MUTATIONS = [
    Mutation(
        "output check",
        "harness/engine/checks.py",
        "            return self.ctx.task.check(data, out)",
        "            return True, ''",
        ("tests/adversarial/test_adversarial.py", "-k", "weak_outputs or stale_or_input or output_cache"),
    ),
    Mutation(
        "fresh inputs (ranked inputs from the secret)",
        "harness/engine/inputs.py",
        "fresh = self.ctx.ranked if fresh is None else fresh",
        "fresh = False",
        (
            "tests/adversarial/test_adversarial.py",
            "tests/test_seeds.py",
            "-k",
            "precomputed_public_seed or ranked_inputs_are_generated",
        ),
    ),
    Mutation(
        "integrity snapshot (watched originals and namespaces)",
        "harness/worker/originals.py",
        "    return tampered_names() + changed(snap, worker)",
        "    return []",
        ("tests/adversarial/test_adversarial.py", "-k", "patching_clocks or wrapping_the_workers_input"),
    ),
    Mutation(
        "device-clock check (events re-recorded or moved)",
        "harness/analysis/plausibility.py",
        "    if excess is not None:",
        "    if False:",
        ("tests/test_plausibility.py", "-k", "moved_against_the_device_clock or batched_samples_share"),
        gpu_only="end to end it acts only on a GPU (the device clock is read behind the launch gate); the CPU "
        "tests above call the pure check on recorded numbers; on the device, "
        "tests/adversarial/test_adversarial.py::test_gpu_rerecording_the_start_event_is_caught "
        "runs the attack",
    ),
    Mutation(
        "physical floor (the check)",
        "harness/analysis/plausibility.py",
        "    if floor_ns is not None and stats.mean < floor_ns:",
        "    if False:",
        ("tests/test_timing_trust.py", "tests/test_plausibility.py", "-k", "physical_floor or faster_than_physics"),
    ),
    Mutation(
        "physical floor (rejection in ranked runs)",
        "harness/engine/timing_checks.py",
        "        if reason and ctx.ranked:",
        "        if False:",
        ("tests/test_timing_trust.py", "-k", "physical_floor"),
    ),
    Mutation(
        "stray processes (ranked runs reject them)",
        "harness/engine/session.py",
        "            children = len(self.sup.strays()) if self.sup else 0",
        "            children = 0",
        ("tests/adversarial/test_adversarial.py", "-k", "escaped_and_forked"),
    ),
    Mutation(
        "stray processes (the whole tree is walked)",
        "harness/engine/process_tree.py",
        "        todo += child_pids(child) or []",
        "        pass",
        ("tests/unit/test_process_tree.py",),
    ),
    Mutation(
        "a worker's reply read within a time limit",
        "harness/channel.py",
        "    if not poller.poll(max(0.0, deadline - time.monotonic()) * 1e3):",
        "    if not poller.poll(None):",
        (
            "tests/unit/test_channel.py",
            "tests/adversarial/test_adversarial.py",
            "-k",
            "stops_part_way",
        ),
    ),
    Mutation(
        "launch gate self-check",
        "harness/worker/gate.py",
        "            why = gate._why_it_does_not_hold()",
        "            why = ''",
        ("tests/test_timing_trust.py", "tests/test_examples.py", "-k", "gate"),
        gpu_only="the gate is built only on an NVIDIA GPU (LaunchGate.create returns before the self-check "
        "elsewhere), so no CPU test can reach it. On the device, "
        "tests/test_timing_trust.py::test_launch_gate_hides_host_time_and_strict_counts_it fails if the "
        "self-check wrongly refuses a gate, and tests/adversarial/test_adversarial.py::"
        "test_gpu_side_stream_work_cannot_hide_behind_the_launch_gate fails if a gate that lets a "
        "side stream run ahead is used; but on an H200, where the gate does hold, switching the "
        "self-check off changes nothing any test can see: it matters only on a GPU where the gate "
        "would not hold, which no test machine here has",
    ),
]


def scratch_copy(dest: Path) -> None:
    """The repository's files as git sees them (tracked and untracked-not-ignored), links kept as links."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True, capture_output=True
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, listed):
        src, dst = ROOT / rel, dest / rel
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the work tree, not yet committed
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst, follow_symlinks=False)


def apply(copy: Path, m: Mutation) -> None:
    path = copy / m.file
    text = path.read_text()
    found = text.count(m.old)
    if found != 1:
        raise SystemExit(
            f"mutation check: the patch for '{m.defence}' expects its target exactly once in "
            f"{m.file}, found it {found} times:\n    {m.old.strip()}\nThe code moved: update the "
            "patch in bench/mutation_check.py to the defence's new place."
        )
    path.write_text(text.replace(m.old, m.new))


def pytest(copy: Path, args, stop_at_first: bool, limit_s: float | None = None) -> tuple[int, str, float]:
    """(exit code, summary, seconds). ``limit_s``: a mutated run that outlasts it is a hang, which a
    test run in CI would not survive either: exit code 1 and a summary that says so."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-rfE",
        *(["-x"] if stop_at_first else []),
        *args,
    ]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=limit_s)
    except subprocess.TimeoutExpired:
        return 1, f"    the tests hung: stopped after {limit_s:.0f} s", time.monotonic() - t0
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("FAILED ") or ln.startswith("ERROR ")]
    summary = (p.stdout.strip().splitlines() or ["(no output)"])[-1]
    return p.returncode, "\n".join(["    " + summary] + ["    " + ln for ln in lines[:3]]), time.monotonic() - t0


def harness_location(copy: Path) -> str:
    p = subprocess.run(
        [sys.executable, "-c", "import harness; print(harness.__file__)"], cwd=copy, capture_output=True, text=True
    )
    return p.stdout.strip()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="run only the defence whose name contains this text")
    parser.add_argument("--out", default=str(OUT), help="report file (default results/mutation_check.txt)")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if not args.only or args.only in m.defence]
    if not chosen:
        raise SystemExit(f"no defence matches {args.only!r}; choose from: {', '.join(m.defence for m in MUTATIONS)}")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout)
    lines = [
        f"mutation check, {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}, "
        f"commit {commit}{' (+ uncommitted changes)' if dirty else ''}, CPU only",
        "each defence is switched off in a scratch copy; the listed CPU tests must then fail",
        "",
    ]
    bad = 0
    with tempfile.TemporaryDirectory(prefix="mutation-") as tmp:
        base = Path(tmp) / "baseline"
        scratch_copy(base)
        where = harness_location(base)
        if not where.startswith(str(base)):
            raise SystemExit(
                f"the scratch copy imports harness from {where}, not from itself: the check would test the wrong code"
            )
        for m in chosen:
            rc, out, secs = pytest(base, m.tests, stop_at_first=False)
            if rc != 0:
                lines += [f"[BASELINE FAILS] {m.defence}: the tests fail without the mutation ({secs:.0f} s):", out, ""]
                bad += 1
                continue
            copy = Path(tmp) / f"m{MUTATIONS.index(m)}"
            scratch_copy(copy)
            apply(copy, m)
            rc_m, out_m, secs_m = pytest(copy, m.tests, stop_at_first=True, limit_s=60 + 5 * secs)
            caught = rc_m == 1
            if m.gpu_only and not caught:
                verdict = "NOT CAUGHT ON THE CPU (expected: GPU only)"
            elif caught:
                verdict = "CAUGHT"
            else:
                verdict, bad = "SURVIVED", bad + 1
            lines += [
                f"[{verdict}] {m.defence}",
                f"  patch: {m.file}: {m.old.strip()!r} -> {m.new.strip()!r}",
                f"  tests: {' '.join(m.tests)}",
                f"  baseline: pass ({secs:.0f} s); mutated (pytest -x, exit {rc_m}, {secs_m:.0f} s):",
                out_m,
            ]
            if m.gpu_only:
                lines.append(f"  GPU: {m.gpu_only}")
            lines.append("")
            shutil.rmtree(copy, ignore_errors=True)
    lines.append(
        f"{len(chosen) - bad} of {len(chosen)} defences: caught by a CPU test, or said to be GPU-only; "
        f"{bad} survived or had a failing baseline"
    )
    text = "\n".join(lines) + "\n"
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(text, end="")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
