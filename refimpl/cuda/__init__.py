"""The ``torch.cuda``-like namespace of refimpl, on the CUDA driver API.

Importing it never touches the driver; the first eager call initialises CUDA lazily
(``_lazy``). Devices and properties live in ``_device``, streams and events in
``streams``, kernels in ``_kernels``, the caching allocator in ``_allocator`` with its
GPU segment source in ``_device_source``, and the public memory functions in
``memory``.
"""

from __future__ import annotations

from refimpl.cuda import _device, _device_source, _host_allocator, _kernels, _lazy
from refimpl.cuda import streams as streams_module
from refimpl.cuda._device import (
    AcceleratorError,
    CudaError,
    can_device_access_peer,
    check_error,
    cudaStatus,
    current_device,
    device,
    device_count,
    device_of,
    get_arch_list,
    get_device_capability,
    get_device_name,
    get_device_properties,
    get_gencode_flags,
    init,
    is_available,
    is_bf16_supported,
    is_tf32_supported,
    mem_get_info,
    set_device,
    synchronize,
)
from refimpl.cuda._errors import OutOfMemoryError
from refimpl.cuda._lazy import (
    DeferredCudaCallError,
    _lazy_init,
    is_initialized,
)
from refimpl.cuda.streams import (
    Event,
    ExternalStream,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    get_stream_from_external,
    set_stream,
    stream,
)

has_half: bool = True

# torch.cuda's private helpers that tests and conformance adapters reach for.
_CudaDeviceProperties = _device._CudaDeviceProperties
_DeviceGuard = _device._DeviceGuard
_exchange_device = _device._exchange_device
_get_device_index = _device._get_device_index
_get_nvml_device_index = _device._get_nvml_device_index
_maybe_exchange_device = _device._maybe_exchange_device
_parse_visible_devices = _device._parse_visible_devices
_transform_uuid_to_ordinals = _device._transform_uuid_to_ordinals
_nvml_based_avail = _device._nvml_based_avail
_raw_device_count_nvml = _device._raw_device_count_nvml
_raw_device_uuid_nvml = _device._raw_device_uuid_nvml
_is_in_bad_fork = _lazy._is_in_bad_fork
_lazy_call = _lazy._lazy_call
_sleep = _kernels._sleep
from refimpl.cuda.graphs import (
    CUDAGraph,
    graph,
    graph_pool_handle,
    is_current_stream_capturing,
    make_graphed_callables,
)
from refimpl.cuda.random import (
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)

cudart = _host_allocator.cudart
host_memory_stats = _host_allocator.host_memory_stats
get_cycles_per_ms = _kernels.get_cycles_per_ms


def ipc_collect() -> None:
    """Free memory released by CUDA IPC consumers (nothing to do in refimpl)."""
    _lazy_init()


def current_blas_handle() -> int:
    """The cuBLAS handle (``cublasHandle_t`` address) of the current device and stream."""
    from refimpl.cuda import _blas

    return _blas.current_blas_handle()


_lazy.register_init_hook(_device_source.install)

# The legacy typed classes (refimpl.cuda.FloatTensor...): construct and match CUDA tensors.
from refimpl._typed import make_types as _make_types
from refimpl.storage import _lazy_new
from refimpl.storage import make_storage_types as _make_storage_types

_TYPED = _make_types(cuda=True) | _make_storage_types(cuda=True)
globals().update(_TYPED)

from refimpl.cuda._lazy import _LazySeedTracker
from refimpl.cuda._nvml import (
    _get_pynvml_handler,
    clock_rate,
    device_memory_used,
    list_gpu_processes,
    memory_usage,
    power_draw,
    temperature,
    utilization,
)
from refimpl.cuda._remainders import (
    _check_bf16_tensor_supported,
    _check_capability,
    _check_cubins,
    _extract_arch_version,
    _get_device,
    _get_generator,
    _get_rng_state_offset,
    _is_compiled,
    _set_rng_state_offset,
    _set_stream_by_id,
    has_magma,
)


def __getattr__(name: str):
    # computed on access: the generators exist once the devices are known; the
    # nvtx, tunable and profiler submodules import when first used, as attributes of the package
    if name == "default_generators":
        from refimpl.cuda import _remainders

        return _remainders.default_generators()
    if name in ("nvtx", "tunable", "profiler", "jiterator"):
        import importlib

        return importlib.import_module(f"refimpl.cuda.{name}")
    raise AttributeError(f"module 'refimpl.cuda' has no attribute '{name}'")

__all__ = [
    "AcceleratorError",
    "CUDAGraph",
    "CudaError",
    "DeferredCudaCallError",
    "Event",
    "ExternalStream",
    "OutOfMemoryError",
    "Stream",
    "StreamContext",
    "can_device_access_peer",
    "check_error",
    "cudaStatus",
    "current_blas_handle",
    "current_device",
    "current_stream",
    "default_stream",
    "device",
    "device_count",
    "device_of",
    "get_arch_list",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "get_gencode_flags",
    "get_stream_from_external",
    "graph",
    "graph_pool_handle",
    "init",
    "ipc_collect",
    "is_available",
    "is_bf16_supported",
    "is_current_stream_capturing",
    "is_initialized",
    "is_tf32_supported",
    "make_graphed_callables",
    "mem_get_info",
    "set_device",
    "set_stream",
    "stream",
    "synchronize",
]

# The memory API lives in ``memory`` (its own module, as in torch). It never imports
# the driver: this package plugs the current device, stream and lazy init into it.
from refimpl.cuda import memory as _memory
from refimpl.cuda.memory import *

_memory.set_current_device_hook(current_device)
_memory.set_current_stream_hook(streams_module.current_stream_handle)
_memory.set_lazy_init_hook(_lazy_init)
_memory.set_is_initialized_hook(is_initialized)
_memory.set_device_count_hook(device_count)
__all__ += [n for n in _memory.__all__ if not n.endswith("_hook") and n not in __all__]
__all__ += [n for n in sorted(_TYPED)]
__all__ += ["clock_rate", "device_memory_used", "list_gpu_processes", "memory_usage",
            "power_draw", "temperature", "utilization"]


def set_sync_debug_mode(debug_mode: int | str) -> None:
    """Warn (``"warn"``/1) or raise (``"error"``/2) on operations that make the host wait for
    the device, or neither (``"default"``/0); see ``_sync_debug`` (spec CUDADEV-403)."""
    _lazy_init()
    _sync_debug.set_mode(debug_mode)


def get_sync_debug_mode() -> int:
    """The sync debug level set by :func:`set_sync_debug_mode` (0, 1 or 2)."""
    _lazy_init()
    return _sync_debug.get_mode()


from refimpl.cuda import _sync_debug, amp

__all__ += ["get_sync_debug_mode", "set_sync_debug_mode"]
