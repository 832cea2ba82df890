"""The leaderboard's secret: where it is taken from (``--secret-file`` before ``$HARNESS_SECRET_SEED``
before a random one), that it leaves the environment, and how each ranked input's seed is derived
from it (``harness.engine.seeds``), down to the inputs a ranked run really times."""

from __future__ import annotations

import json
import os

import pytest

from harness.engine.seeds import SECRET_ENV, derive_seed, take_secret
from harness.errors import UsageError
from tests.helpers import MXFP4_SMALL, cheat_with_correct_kernel, cli, run


def test_secret_file_beats_the_environment_and_both_leave_it(tmp_path, monkeypatch):
    f = tmp_path / "secret.txt"
    f.write_text("  from-the-file\n")
    monkeypatch.setenv(SECRET_ENV, "from-the-env")
    assert take_secret(str(f)) == ("from-the-file", f"file {f}")
    assert SECRET_ENV not in os.environ  # removed even when the file won
    monkeypatch.setenv(SECRET_ENV, "from-the-env")
    assert take_secret() == ("from-the-env", f"${SECRET_ENV}")
    assert SECRET_ENV not in os.environ
    a, source = take_secret()
    b, _ = take_secret()
    assert source.startswith("random") and a != b and len(a) == 32 and int(a, 16) >= 0


@pytest.mark.parametrize("content, problem", [(None, "cannot read"), ("  \n", "is empty")])
def test_unusable_secret_file_is_a_usage_error(tmp_path, monkeypatch, content, problem):
    f = tmp_path / "secret.txt"
    if content is not None:
        f.write_text(content)
    monkeypatch.setenv(SECRET_ENV, "from-the-env")
    with pytest.raises(UsageError, match=problem) as err:
        take_secret(str(f))
    assert str(f) in str(err.value)  # never falls back to the environment silently


def test_derived_seeds_depend_on_every_part_and_fit_63_bits():
    seeds = {derive_seed(s, p, i) for s in ("a", "b") for p in (11, 12) for i in (0, 1, 1 << 40)}
    assert len(seeds) == 12 and all(0 <= x < 2**63 for x in seeds)
    assert derive_seed("a", 11, 0) == derive_seed("a", 11, 0)
    assert derive_seed("a", 1, 10) != derive_seed("a", 11, 0)


FINGERPRINT = """
def custom_kernel(data):
    print("INPUT", float(data[0].float().sum()), flush=True)
    return _correct_kernel(data)
"""


def _fingerprints(stdout: str) -> list[float]:
    return [float(line.split()[1]) for line in stdout.splitlines() if line.startswith("INPUT ")]


def test_ranked_inputs_are_generated_from_the_derived_seeds(tmp_path):
    """The submission prints a fingerprint of every input it gets; a ranked run's timed inputs are the
    task's inputs for ``derive_seed(secret, public seed, index)``, and none is the public seed's."""
    from tasks import load_task

    task = load_task(MXFP4_SMALL)
    secret = "seed-test-secret"
    r = run(cheat_with_correct_kernel(tmp_path, FINGERPRINT), secret=secret)
    assert r.verdict == "pass", r.message
    seen = _fingerprints(r.stdout)
    case = task.benchmarks[0]

    def fingerprint(seed):
        return float(task.generate_input(dict(case, seed=seed), None)[0].float().sum())

    expected = [fingerprint(derive_seed(secret, case["seed"], i)) for i in range(3)]
    assert all(x in seen for x in expected), (expected, seen)
    assert fingerprint(case["seed"]) not in seen


def test_cli_secret_file_beats_the_environment(tmp_path):
    """Through the CLI: with both given, the run says it used the file, and its ranked inputs are those
    of the file's secret (the run with the environment's secret alone times other inputs)."""
    sub = cheat_with_correct_kernel(tmp_path, FINGERPRINT)
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text("the-file-secret\n")
    args = [
        "run",
        str(sub),
        "--task",
        MXFP4_SMALL,
        "--device",
        "cpu",
        "--mode",
        "leaderboard",
        "--max-repeats",
        "3",
        "--quiet",
        "--json",
    ]
    env = dict(os.environ, **{SECRET_ENV: "the-env-secret"})
    both = cli([*args, str(tmp_path / "both.json"), "--secret-file", str(secret_file)], env=env)
    env_only = cli([*args, str(tmp_path / "env.json")], env=env)
    assert both.returncode == 0 and env_only.returncode == 0, (both.stderr[-1500:], env_only.stderr[-1500:])
    both_doc, env_doc = (json.loads((tmp_path / n).read_text()) for n in ("both.json", "env.json"))
    assert f"secret seed: file {secret_file}" in both_doc["warnings"], both_doc["warnings"]
    assert f"secret seed: ${SECRET_ENV}" in env_doc["warnings"], env_doc["warnings"]
    from tasks import load_task

    case = load_task(MXFP4_SMALL).benchmarks[0]
    first = float(
        load_task(MXFP4_SMALL)
        .generate_input(dict(case, seed=derive_seed("the-file-secret", case["seed"], 0)), None)[0]
        .float()
        .sum()
    )
    assert first in _fingerprints(both_doc["stdout"]) and first not in _fingerprints(env_doc["stdout"])
