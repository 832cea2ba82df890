"""A result's JSON round trip (a single-sample case included) and the case records' JSON keys."""

from __future__ import annotations

import math

import pytest

from harness.extras import Clocks, DeviceClockCheck, KernelOnlyFigures, ProfilerCheck
from harness.results import PASS, CaseResult, DeviceInfo, RunResult, Stats, SubmissionInfo


def _result(samples) -> RunResult:
    case = CaseResult("benchmark", {"m": 4, "n": 8, "k": 64, "seed": 1}, PASS, stats=Stats.from_samples(samples))
    return RunResult(
        task="mxfp4_mm",
        submission=SubmissionInfo("s.py", "ab" * 32, "s"),
        mode="benchmark",
        device=DeviceInfo("cpu", "cpu"),
        verdict=PASS,
        cases=[case],
    )


def test_a_single_sample_case_reads_back_from_json_like_from_the_store():
    result = _result([1234.5])
    assert math.isnan(result.cases[0].stats.std)
    text = result.to_json()
    assert '"std": null' in text and '"stderr": null' in text  # JSON has no NaN
    back = RunResult.from_json(text).cases[0].stats
    assert math.isnan(back.std) and math.isnan(back.stderr)
    assert back.relative_error == math.inf == result.cases[0].stats.relative_error
    assert (back.samples_ns, back.runs, back.mean, back.median) == ([1234.5], 1, 1234.5, 1234.5)


def test_a_many_sample_case_round_trips_unchanged():
    result = _result([1000.0, 1010.0, 990.0])
    back = RunResult.from_json(result.to_json())
    assert back.cases[0].stats == result.cases[0].stats
    assert back.to_json() == result.to_json()


def test_records_write_the_keys_results_have_always_had():
    graph = KernelOnlyFigures(
        ns=5e3,
        method="cuda_graph",
        launch_overhead_ns=1e3,
        note="",
        spread_pct=None,
        nodes_per_call=2.0,
        unhidden_host_ns=None,
    )
    assert graph.to_extra() == {
        "kernel_only_ns": 5e3,
        "kernel_only_method": "cuda_graph",
        "launch_overhead_ns": 1e3,
        "kernel_only_note": "",
        "kernel_only_spread_pct": None,
        "kernel_only_nodes_per_call": 2.0,
        "unhidden_host_ns": None,
    }
    eager = KernelOnlyFigures(ns=5e3, method="profiler", note="fell back")
    assert "kernel_only_spread_pct" not in eager.to_extra() and "kernel_only_nodes_per_call" not in eager.to_extra()
    rejected = KernelOnlyFigures()  # the measurement's reply was rejected: no note
    assert set(rejected.to_extra()) == {
        "kernel_only_ns",
        "kernel_only_method",
        "launch_overhead_ns",
        "unhidden_host_ns",
    }
    gpu = ProfilerCheck(kernel_ns=4.9e3, note="", vs_kernel_only_pct=2.0, kernels_per_call=2.0, window_ns=None)
    assert gpu.to_extra() == {
        "profiler_kernel_ns": 4.9e3,
        "profiler_note": "",
        "kernel_only_vs_profiler_pct": 2.0,
        "profiler_kernels_per_call": 2.0,
        "profiler_window_ns": None,
    }
    assert "profiler_window_ns" not in ProfilerCheck(note="not available on CPU", on_device=False).to_extra()
    assert Clocks({"note": "not available on CPU"}).to_extra() == {"clocks_before": {"note": "not available on CPU"}}
    assert Clocks({"sm_mhz": 1}, {"sm_mhz": 2}).to_extra() == {
        "clocks_before": {"sm_mhz": 1},
        "clocks_after": {"sm_mhz": 2},
    }
    assert DeviceClockCheck(None).to_extra() == {"device_clock_excess_ns": None}


@pytest.mark.parametrize(
    "records",
    [
        [
            KernelOnlyFigures(
                ns=5e3,
                method="cuda_graph",
                launch_overhead_ns=1e3,
                note="",
                spread_pct=1.0,
                nodes_per_call=2.0,
                unhidden_host_ns=3.0,
            ),
            ProfilerCheck(kernel_ns=4.9e3, note="", vs_kernel_only_pct=2.0, kernels_per_call=2.0, window_ns=5.1e3),
            Clocks({"sm_mhz": 1980}, {"sm_mhz": 1965}),
            DeviceClockCheck(120.0),
        ],
        [
            KernelOnlyFigures(note="not available on CPU"),
            ProfilerCheck(note="not on CPU", on_device=False),
            Clocks({"note": "not available on CPU"}),
        ],
        [KernelOnlyFigures()],
    ],
)
def test_records_read_back_from_a_saved_result(records):
    result = _result([1.0, 2.0])
    result.cases[0].record(*records)
    case = RunResult.from_json(result.to_json()).cases[0]
    assert case.extra == result.cases[0].extra
    got = {type(r): r for r in (case.kernel_only, case.profiler_check, case.clocks, case.device_clock) if r}
    assert got == {type(r): r for r in records}
