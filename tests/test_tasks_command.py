"""``python -m harness tasks``: every task the harness knows, in a table and as JSON, read from the
task files (not typed into the command)."""

from __future__ import annotations

import json

from harness.cli.main import main
from tasks import list_tasks, load_task


def test_tasks_json_lists_every_task_with_its_cases_and_targets(capsys):
    assert main(["tasks", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [t["name"] for t in doc] == list_tasks() and len(doc) >= 2
    for row in doc:
        task = load_task(row["name"])
        assert row["tests"] == task.tests and row["benchmarks"] == task.benchmarks
        assert row["baseline_us"] == task.baseline_us and row["baseline_label"] == task.baseline_label
        assert (row["timing_protocol"], row["ranking_by"], row["rtol"], row["atol"], row["target_gpu"]) == (
            task.timing_protocol,
            task.ranking_by,
            task.rtol,
            task.atol,
            task.target_gpu,
        )


def test_tasks_table_shows_each_case_and_its_baseline(capsys):
    assert main(["tasks"]) == 0
    out = capsys.readouterr().out
    for name in list_tasks():
        task = load_task(name)
        assert f"{name}: target {task.target_gpu}; ranking {task.ranking_by}; protocol {task.timing_protocol}" in out
        lines = out.splitlines()
        for case in task.tests + task.benchmarks:
            label = " ".join(f"{k}={v}" for k, v in case.items())
            [line] = [ln for ln in lines if f" {label} " in f" {ln} " and ln.split()[0] in ("test", "benchmark")]
            baseline = task.baseline_for(case) if case in task.benchmarks else None
            assert line.split()[-1] == (f"{baseline:.3f}" if baseline is not None else "-"), line
    assert "(50 inputs per measurement)" in out  # nvfp4_gemm's batched protocol


def test_tasks_with_an_unknown_option_is_a_usage_error(capsys):
    assert main(["tasks", "--bogus"]) == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments: --bogus" in err and "--help" in err
