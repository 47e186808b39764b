"""NVML queries of ``torch.cuda``: utilization, temperature, power, clocks, processes.

They go through ``pynvml`` (the nvidia-ml-py package, the binding torch itself uses),
imported on first use so that importing refimpl never needs it. Where it is missing,
the functions raise torch's ``ModuleNotFoundError`` (``list_gpu_processes`` returns
torch's one-line explanation instead, as torch does); where the NVIDIA driver is
missing, torch's "cuda driver can't be loaded" ``RuntimeError``.

Device arguments are CUDA device indices as refimpl sees them; NVML counts every GPU
of the machine, so they are translated through ``CUDA_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import os
from typing import Any

from refimpl.cuda import _device

__all__ = [
    "clock_rate",
    "device_memory_used",
    "list_gpu_processes",
    "memory_usage",
    "power_draw",
    "temperature",
    "utilization",
]

_MISSING = "nvidia-ml-py does not seem to be installed or it can't be imported."
_NO_DRIVER = "cuda driver can't be loaded, is cuda enabled?"


def _pynvml() -> Any:
    try:
        import pynvml
    except ImportError as e:
        raise ModuleNotFoundError(_MISSING) from e
    return pynvml


def _get_pynvml_handler(device: Any = None) -> Any:
    """The NVML handle of a CUDA device (the current one by default), NVML initialised."""
    nv = _pynvml()
    try:
        nv.nvmlInit()
    except nv.NVMLError_DriverNotLoaded as e:
        raise RuntimeError(_NO_DRIVER) from e
    return nv.nvmlDeviceGetHandleByIndex(_device._get_nvml_device_index(device))


def utilization(device: Any = None) -> int:
    """Percent of the last sample period during which a kernel ran (as nvidia-smi)."""
    return _pynvml().nvmlDeviceGetUtilizationRates(_get_pynvml_handler(device)).gpu


def memory_usage(device: Any = None) -> int:
    """Percent of the last sample period during which device memory was read or written."""
    return _pynvml().nvmlDeviceGetUtilizationRates(_get_pynvml_handler(device)).memory


def temperature(device: Any = None) -> int:
    """GPU die temperature in degrees Celsius."""
    nv = _pynvml()
    return nv.nvmlDeviceGetTemperature(_get_pynvml_handler(device), nv.NVML_TEMPERATURE_GPU)


def power_draw(device: Any = None) -> int:
    """Power drawn by the GPU, in milliwatts."""
    return _pynvml().nvmlDeviceGetPowerUsage(_get_pynvml_handler(device))


def clock_rate(device: Any = None) -> int:
    """Streaming-multiprocessor clock, in MHz."""
    nv = _pynvml()
    return nv.nvmlDeviceGetClockInfo(_get_pynvml_handler(device), nv.NVML_CLOCK_SM)


def device_memory_used(device: Any = None) -> int:
    """Bytes of device memory in use by every process (NVML's view, not the allocator's)."""
    return _pynvml().nvmlDeviceGetMemoryInfo(_get_pynvml_handler(device)).used


def list_gpu_processes(device: Any = None) -> str:
    """The processes running on a GPU and their memory, one line each."""
    try:
        nv = _pynvml()
    except ModuleNotFoundError:
        return "pynvml module not found, please install nvidia-ml-py"
    try:
        nv.nvmlInit()
    except nv.NVMLError_DriverNotLoaded:
        return _NO_DRIVER
    index = _device._get_nvml_device_index(device)
    procs = nv.nvmlDeviceGetComputeRunningProcesses(nv.nvmlDeviceGetHandleByIndex(index))
    lines = [f"GPU:{index}"]
    if not procs:
        lines.append("no processes are running")
    for p in procs:
        mib = (p.usedGpuMemory or 0) / (1024 * 1024)
        lines.append(f"process {p.pid:>10d} uses {mib:>12.3f} MB GPU memory")
    return "\n".join(lines)


def process_memory_in_use(device_index: int) -> int | None:
    """Bytes this process holds on a device by NVML's count, or None when NVML can't say.

    What an out-of-memory message reports as "Including non-PyTorch memory, this process
    has X memory in use" (the CUDA context and libraries included).
    """
    try:
        nv = _pynvml()
        nv.nvmlInit()
        handle = nv.nvmlDeviceGetHandleByIndex(_device._get_nvml_device_index(device_index))
        procs = nv.nvmlDeviceGetComputeRunningProcesses(handle)
    except Exception:  # noqa: BLE001 (any NVML failure: the sentence is left out)
        return None
    pid = os.getpid()
    return next((p.usedGpuMemory for p in procs if p.pid == pid and p.usedGpuMemory), None)
