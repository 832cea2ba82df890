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


def fake_amdsmi(seen: dict) -> types.ModuleType:
    """A stand-in for ROCm's amdsmi package: GFX 2100 MHz, memory 1300 MHz, hotspot 65 C, a current power
    the GPU does not report ("N/A", as amdsmi says it) and an average of 550 W, the power cap in force."""
    a = types.ModuleType("amdsmi")
    a.AmdSmiClkType = types.SimpleNamespace(GFX="gfx", MEM="mem")
    a.AmdSmiTemperatureType = types.SimpleNamespace(HOTSPOT="hotspot", EDGE="edge")
    a.AmdSmiTemperatureMetric = types.SimpleNamespace(CURRENT="current")
    a.amdsmi_init = lambda: seen.setdefault("init", True)
    a.amdsmi_shut_down = lambda: seen.setdefault("shut_down", True)

    def by_bdf(bdf):
        seen["bdf"] = bdf
        return "gpu"

    a.amdsmi_get_processor_handle_from_bdf = by_bdf
    a.amdsmi_get_processor_handles = lambda: ["gpu0", "gpu1"]
    a.amdsmi_get_clock_info = lambda h, which: {"clk": 2100 if which == "gfx" else 1300, "min_clk": 500}
    a.amdsmi_get_temp_metric = lambda h, sensor, metric: 65 if sensor == "hotspot" else 0
    a.amdsmi_get_power_info = lambda h: {"current_socket_power": "N/A", "average_socket_power": 550}
    a.amdsmi_get_violation_status = lambda h: {
        "active_ppt_pwr": True,
        "active_socket_thrm": False,
        "active_prochot_thrm": "N/A",
    }
    return a


def _rocm(monkeypatch, props) -> None:
    monkeypatch.setattr(torch.version, "hip", "6.4")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)


def test_amd_smi_readings_on_rocm(monkeypatch):
    seen: dict = {}
    monkeypatch.setitem(sys.modules, "amdsmi", fake_amdsmi(seen))
    _rocm(monkeypatch, types.SimpleNamespace(pci_bus_id=0x83, pci_domain_id=0, pci_device_id=0))
    reader = ClockReader(torch.device("cuda", 1))
    reading = reader.read()
    reader.close()
    assert seen["bdf"] == "0000:83:00.0" and seen.get("shut_down")  # this GPU, found by its PCI address
    assert reading == {"sm_mhz": 2100, "mem_mhz": 1300, "temp_c": 65, "power_w": 550.0, "throttle": ["power_cap"]}
    assert any("throttling (power_cap" in w for w in clock_warnings(reading, reading))


def test_amd_smi_without_a_pci_address_reads_by_position_unless_the_gpus_are_renumbered(monkeypatch):
    seen: dict = {}
    monkeypatch.setitem(sys.modules, "amdsmi", fake_amdsmi(seen))
    _rocm(monkeypatch, types.SimpleNamespace())
    for name in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    assert ClockReader(torch.device("cuda", 1))._backend.handle == "gpu1"
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "1")
    reading = ClockReader(torch.device("cuda", 0)).read()
    assert set(reading) == {"note"} and "renumbers" in reading["note"]


def test_amd_smi_missing_is_a_note(monkeypatch):
    monkeypatch.setitem(sys.modules, "amdsmi", None)  # import fails
    _rocm(monkeypatch, types.SimpleNamespace())
    reading = ClockReader(torch.device("cuda", 0)).read()
    assert set(reading) == {"note"} and "amdsmi" in reading["note"]
