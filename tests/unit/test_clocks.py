"""NVML readings: absent or without a GPU they are a note, never a failure; with NVML (a stand-in module
here) the clocks, temperature, power and throttle reasons are read, by the newer clocks-event call or the
older throttle-reasons one."""

from __future__ import annotations

import sys
import types

import torch

from harness.engine.clocks import ClockReader, clock_warnings


def fake_nvml(event_call: bool = True) -> types.ModuleType:
    nv = types.ModuleType("pynvml")
    nv.NVML_CLOCK_SM, nv.NVML_CLOCK_MEM, nv.NVML_TEMPERATURE_GPU = 1, 2, 0
    nv.nvmlInit = lambda: None
    nv.nvmlShutdown = lambda: None
    nv.nvmlDeviceGetHandleByIndex = lambda i: ("gpu", i)
    nv.nvmlDeviceGetClockInfo = lambda h, which: 1980 if which == 1 else 2619
    nv.nvmlDeviceGetTemperature = lambda h, which: 71
    nv.nvmlDeviceGetPowerUsage = lambda h: 412_000
    reasons = lambda h: 0x40 | 0x4 | 0x1  # noqa: E731  (hw thermal, sw power cap, idle)
    if event_call:
        nv.nvmlDeviceGetCurrentClocksEventReasons = reasons
    else:
        nv.nvmlDeviceGetCurrentClocksThrottleReasons = reasons
    return nv


def test_cpu_readings_are_a_note():
    assert ClockReader(torch.device("cpu")).read() == {"note": "not available on CPU"}


def test_nvml_readings_and_throttle_reasons(monkeypatch):
    for event_call in (True, False):
        monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(event_call))
        monkeypatch.setattr(torch.version, "hip", None)
        reader = ClockReader(torch.device("cuda", 0))
        reading = reader.read()
        reader.close()
        assert reading["sm_mhz"] == 1980 and reading["mem_mhz"] == 2619 and reading["temp_c"] == 71
        assert reading["power_w"] == 412.0
        assert reading["throttle"] == ["sw_power_cap", "hw_thermal"]  # idle is not a slowdown
        assert any("throttling" in w for w in clock_warnings(reading, reading))


def test_nvml_missing_is_a_note(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    monkeypatch.setattr(torch.version, "hip", None)
    reading = ClockReader(torch.device("cuda", 0)).read()
    assert set(reading) == {"note"} and "nvidia-ml-py" in reading["note"]
