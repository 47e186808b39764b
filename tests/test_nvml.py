"""NVML functions of refimpl.cuda against a stand-in pynvml module (no GPU needed)."""

from __future__ import annotations

import os
import sys
import types

import pytest

from refimpl import cuda
from refimpl.cuda import _nvml


class _DriverNotLoaded(Exception):
    pass


def _fake_pynvml(procs=(), driver=True) -> types.ModuleType:
    nv = types.ModuleType("pynvml")
    nv.NVMLError_DriverNotLoaded = _DriverNotLoaded
    nv.NVML_TEMPERATURE_GPU = 0
    nv.NVML_CLOCK_SM = 1
    nv.calls = []

    def init():
        if not driver:
            raise _DriverNotLoaded
    nv.nvmlInit = init
    nv.nvmlDeviceGetHandleByIndex = lambda i: ("handle", i)
    nv.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=37, memory=12)
    nv.nvmlDeviceGetTemperature = lambda h, sensor: (h[1], sensor, 55)
    nv.nvmlDeviceGetPowerUsage = lambda h: 123456
    nv.nvmlDeviceGetClockInfo = lambda h, kind: (h[1], kind, 1980)
    nv.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=5 * 2**30)
    nv.nvmlDeviceGetComputeRunningProcesses = lambda h: list(procs)
    return nv


@pytest.fixture
def visible(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    monkeypatch.setattr(cuda._device, "current_device", lambda: 0)


def test_queries_go_to_the_visible_device(monkeypatch, visible):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml())
    assert cuda.utilization(0) == 37
    assert cuda.memory_usage(1) == 12
    assert cuda.temperature(1) == (1, 0, 55)  # NVML index 1 is refimpl's device 1
    assert cuda.clock_rate(0) == (3, 1, 1980)  # device 0 is NVML's GPU 3
    assert cuda.power_draw(0) == 123456
    assert cuda.device_memory_used(0) == 5 * 2**30
    assert cuda._get_pynvml_handler(1) == ("handle", 1)
    with pytest.raises(RuntimeError, match="device 2 is not visible"):
        cuda.utilization(2)


def test_list_gpu_processes_in_torch_format(monkeypatch, visible):
    procs = [types.SimpleNamespace(pid=4242, usedGpuMemory=3 * 2**20)]
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(procs))
    assert cuda.list_gpu_processes(0) == (
        "GPU:3\nprocess       4242 uses        3.000 MB GPU memory")
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml())
    assert cuda.list_gpu_processes(1) == "GPU:1\nno processes are running"


def test_missing_module_and_missing_driver(monkeypatch, visible):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import raises ImportError
    with pytest.raises(ModuleNotFoundError, match="nvidia-ml-py does not seem to be installed"):
        cuda.temperature(0)
    assert cuda.list_gpu_processes(0) == "pynvml module not found, please install nvidia-ml-py"
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(driver=False))
    with pytest.raises(RuntimeError, match="cuda driver can't be loaded, is cuda enabled"):
        cuda.power_draw(0)
    assert cuda.list_gpu_processes(0) == "cuda driver can't be loaded, is cuda enabled?"


def test_process_memory_in_use_finds_this_process(monkeypatch, visible):
    procs = [types.SimpleNamespace(pid=1, usedGpuMemory=10),
             types.SimpleNamespace(pid=os.getpid(), usedGpuMemory=518 * 2**20)]
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(procs))
    assert _nvml.process_memory_in_use(0) == 518 * 2**20
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert _nvml.process_memory_in_use(0) is None


def test_nvml_based_availability_flag(monkeypatch):
    monkeypatch.setenv("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    assert cuda._nvml_based_avail() is True
    monkeypatch.setenv("PYTORCH_NVML_BASED_CUDA_CHECK", "0")
    assert cuda._nvml_based_avail() is False


@pytest.mark.skipif(not cuda.is_available(), reason="needs a CUDA GPU and NVML")
def test_real_nvml_on_a_gpu():
    pytest.importorskip("pynvml")
    assert 0 <= cuda.utilization() <= 100
    assert cuda.temperature() > 0
    assert cuda.device_memory_used() > 0
    assert cuda.list_gpu_processes().startswith("GPU:")
    assert cuda._raw_device_count_nvml() >= cuda.device_count()
    assert len(cuda._raw_device_uuid_nvml()) == cuda._raw_device_count_nvml()


def test_out_of_memory_sentence_from_nvml(monkeypatch, visible):
    from refimpl.cuda._allocator_core import _process_memory_sentence

    procs = [types.SimpleNamespace(pid=os.getpid(), usedGpuMemory=518 * 2**20)]
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(procs))
    assert _process_memory_sentence(0) == (
        "Including non-PyTorch memory, this process has 518.00 MiB memory in use. ")
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert _process_memory_sentence(0) == ""
