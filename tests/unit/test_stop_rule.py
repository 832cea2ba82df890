"""The benchmark loop's stop rule, one criterion at a time (no process is started)."""

from __future__ import annotations

from harness.engine.options import RunOptions
from harness.engine.stop_rule import StopRule

# A rule whose every cap is far away: only the criterion a test sets can stop it.
FAR = dict(min_samples=3, target_rel_err=1e-12, max_measured_ns=1e18, wall_cap_s=1e9, max_samples=10**6)
NOISY = [100.0, 300.0, 200.0, 400.0]  # relative error about 22%


def test_never_stops_below_the_minimum_even_when_every_cap_is_passed():
    rule = StopRule(min_samples=3, target_rel_err=1.0, max_measured_ns=0.0, wall_cap_s=0.0, max_samples=1)
    assert not rule.should_stop([5.0, 5.0], elapsed_s=1e6)
    assert rule.should_stop([5.0, 5.0, 5.0], elapsed_s=1e6)


def test_nothing_reached_goes_on():
    assert not StopRule(**FAR).should_stop(NOISY, elapsed_s=1.0)


def test_stops_when_the_standard_error_is_small_enough():
    steady = [1000.0, 1000.5, 999.5, 1000.0]  # stderr / mean about 2e-4
    rule = StopRule(**dict(FAR, target_rel_err=0.001))
    assert rule.should_stop(steady, elapsed_s=0.0)
    assert not rule.should_stop(NOISY, elapsed_s=0.0)
    assert not StopRule(**dict(FAR, target_rel_err=1e-4)).should_stop(steady, elapsed_s=0.0)


def test_stops_when_the_measured_time_passes_its_cap():
    rule = StopRule(**dict(FAR, max_measured_ns=999.0))
    assert rule.should_stop(NOISY, elapsed_s=0.0)  # 1000 ns measured
    assert not StopRule(**dict(FAR, max_measured_ns=1000.0)).should_stop(NOISY, elapsed_s=0.0)


def test_stops_when_the_wall_time_passes_its_cap():
    rule = StopRule(**dict(FAR, wall_cap_s=30.0))
    assert rule.should_stop(NOISY, elapsed_s=30.5)
    assert not rule.should_stop(NOISY, elapsed_s=30.0)


def test_stops_at_the_sample_limit():
    rule = StopRule(**dict(FAR, max_samples=4))
    assert rule.should_stop(NOISY, elapsed_s=0.0)
    assert not rule.should_stop(NOISY[:3], elapsed_s=0.0)


def test_defaults_by_device_and_ranking():
    cpu = StopRule.from_options(RunOptions(), gpu=False, ranked=True)
    assert (cpu.min_samples, cpu.target_rel_err, cpu.max_samples, cpu.max_measured_ns, cpu.wall_cap_s) == (
        3,
        0.001,
        10,
        2e9,
        30.0,
    )
    gpu = StopRule.from_options(RunOptions(), gpu=True, ranked=False)
    assert (gpu.max_samples, gpu.max_measured_ns, gpu.wall_cap_s) == (100, 10e9, 120.0)
    assert StopRule.from_options(RunOptions(), gpu=True, ranked=True).max_measured_ns == 30e9
    mine = StopRule.from_options(
        RunOptions(max_repeats=7, max_time_s=1.5, wall_cap_s=9.0, min_runs=5, target_rel_err=0.01),
        gpu=True,
        ranked=True,
    )
    assert (mine.min_samples, mine.target_rel_err, mine.max_samples, mine.max_measured_ns, mine.wall_cap_s) == (
        5,
        0.01,
        7,
        1.5e9,
        9.0,
    )
