"""Device memory management: the ``torch.cuda.memory`` functions over refimpl's allocator.

Spec: cuda_memory. Each device has one caching allocator
(``refimpl.cuda._allocator``): it keeps freed blocks for reuse instead of returning
them to the driver, so ``memory_reserved()`` (segments held) is usually larger
than ``memory_allocated()`` (bytes handed out). ``empty_cache()`` gives unused
segments back.

The CUDA runtime plugs in through hooks, so that this module never imports the
driver:

* ``_allocator.set_segment_source_factory(fn)``: ``fn(device_index)`` returns the
  device's segment source (``cuMemAlloc``-backed on a GPU);
* :func:`set_current_device_hook`, :func:`set_current_stream_hook`,
  :func:`set_lazy_init_hook`, :func:`set_is_initialized_hook` and
  :func:`set_device_count_hook`.

Without hooks, CUDA counts as initialised once a segment source factory is
registered; the current device is 0 and the current stream the legacy default
stream (0). Before initialisation the statistics read as torch's do: an empty
``memory_stats()`` and zero for ``memory_allocated()`` and friends.
"""

from __future__ import annotations

import collections
import pickle
import re
import sys
import warnings
from collections.abc import Callable
from typing import Any

from refimpl.cuda import _allocator
from refimpl.cuda._allocator_config import get_config, set_allocator_settings
from refimpl.cuda._errors import OutOfMemoryError
from refimpl.cuda._memory_summary import format_memory_summary
from refimpl.cuda._snapshot import TRACE_ACTIONS, RecordContext

__all__ = [
    "OutOfMemoryError",
    "caching_allocator_alloc",
    "caching_allocator_delete",
    "empty_cache",
    "get_allocator_backend",
    "get_per_process_memory_fraction",
    "list_gpu_processes",
    "max_memory_allocated",
    "max_memory_cached",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_cached",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "memory_stats_as_nested_dict",
    "memory_summary",
    "reset_accumulated_memory_stats",
    "reset_max_memory_allocated",
    "reset_max_memory_cached",
    "reset_peak_memory_stats",
    "set_per_process_memory_fraction",
]

NO_DRIVER_MESSAGE = (
    "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU "
    "and installed a driver from http://www.nvidia.com/Download/index.aspx"
)

_current_device: Callable[[], int] | None = None
_current_stream: Callable[[int], int] | None = None
_lazy_init_hook: Callable[[], None] | None = None
_is_initialized_hook: Callable[[], bool] | None = None
_device_count: Callable[[], int] | None = None


def set_current_device_hook(fn: Callable[[], int] | None) -> None:
    """Register ``fn() -> int``, the current device index (it may initialise CUDA)."""
    global _current_device
    _current_device = fn


def set_current_stream_hook(fn: Callable[[int], int] | None) -> None:
    """Register ``fn(device_index) -> int``, the handle of that device's current stream."""
    global _current_stream
    _current_stream = fn


def set_lazy_init_hook(fn: Callable[[], None] | None) -> None:
    """Register ``fn()``, which initialises CUDA or raises torch's error if it cannot."""
    global _lazy_init_hook
    _lazy_init_hook = fn


def set_is_initialized_hook(fn: Callable[[], bool] | None) -> None:
    """Register ``fn() -> bool``: whether CUDA has been initialised in this process."""
    global _is_initialized_hook
    _is_initialized_hook = fn


def set_device_count_hook(fn: Callable[[], int] | None) -> None:
    """Register ``fn() -> int``, the number of visible devices (validates device indices)."""
    global _device_count
    _device_count = fn


def simulate_devices(capacity: int) -> None:
    """Run the memory API on simulated devices of ``capacity`` bytes each (no GPU).

    Unregisters the CUDA runtime hooks, forgets existing allocators and registers
    an ``AddressSpaceSource`` factory: allocation, statistics, snapshots and OOMs
    work; nothing can read or write the (non-existent) memory. For tools and
    tests on machines without a GPU.
    """
    for setter in (
        set_current_device_hook,
        set_current_stream_hook,
        set_lazy_init_hook,
        set_is_initialized_hook,
        set_device_count_hook,
    ):
        setter(None)
    _allocator.reset_device_allocators()
    _allocator.set_segment_source_factory(lambda index: _allocator.AddressSpaceSource(capacity))


def _is_initialized() -> bool:
    if _is_initialized_hook is not None:
        return _is_initialized_hook()
    return _allocator.has_segment_source_factory()


def _lazy_init() -> None:
    if _lazy_init_hook is not None:
        _lazy_init_hook()
    elif not _allocator.has_segment_source_factory():
        raise RuntimeError(NO_DRIVER_MESSAGE)


def _current_device_index() -> int:
    if _current_device is not None:
        return _current_device()
    _lazy_init()
    return 0


_DEVICE_STRING = re.compile(r"cuda(?::(\d+))?")


def _device_index(device: Any) -> int:
    """torch's ``_get_device_index(device, optional=True)`` for CUDA devices."""
    if device is None:
        return _current_device_index()
    if isinstance(device, bool):
        return int(device)
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        match = _DEVICE_STRING.fullmatch(device)
        if match is None:
            if re.fullmatch(r"(cpu|meta|mps|xpu|hip)(:\d+)?", device):
                raise ValueError(f"Expected a cuda device, but got: {device}")
            raise RuntimeError(f"Invalid device string: '{device}'")
        index = match.group(1)
        return int(index) if index is not None else _current_device_index()
    kind = getattr(device, "type", None)
    if kind is not None and hasattr(device, "index"):
        if kind != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {device}")
        return device.index if device.index is not None else _current_device_index()
    index = getattr(device, "idx", None)
    if isinstance(index, int):
        return index
    raise ValueError(f"Expected a cuda device, but got: {device!r}")


def _checked(index: int) -> int:
    if not _is_initialized():
        raise RuntimeError(f"Invalid device argument {index}: did you call init?")
    if _device_count is not None and not 0 <= index < _device_count():
        raise RuntimeError(f"Invalid device argument {index}: did you call init?")
    return index


def _allocator_of(device: Any) -> _allocator.CachingAllocator:
    return _allocator.get_device_allocator(_checked(_device_index(device)))


# -- allocation ----------------------------------------------------------------------


def caching_allocator_alloc(size: int, device: Any = None, stream: Any = None) -> int:
    """Allocate ``size`` bytes through the caching allocator; return the device address.

    ``device`` defaults to the current device and ``stream`` (a Stream or a raw
    ``CUstream`` int) to that device's current stream. The block may be reused only
    on that stream until it is freed with :func:`caching_allocator_delete`.
    """
    if device is None and _current_device is not None:
        index = _current_device()  # the runtime's current device initialises CUDA
    else:
        _lazy_init()
        index = _device_index(device)
    if stream is None:
        stream = _current_stream(index) if _current_stream is not None else 0
    elif not isinstance(stream, int):
        stream = getattr(stream, "cuda_stream", stream)
        if not isinstance(stream, int):
            raise TypeError(
                "Invalid type for stream argument, must be `torch.cuda.Stream` or `int` "
                "representing a pointer to an existing stream"
            )
    allocator = _allocator._allocators.get(index)  # the common case: skip the checks
    if allocator is None:
        allocator = _allocator_of(index)
    return allocator.malloc(size, stream).address if size else 0


def caching_allocator_delete(mem_ptr: int) -> None:
    """Free memory obtained from :func:`caching_allocator_alloc` (device found by address)."""
    if not mem_ptr:
        return
    for allocator in tuple(_allocator._allocators.values()):
        block = allocator.block_at(mem_ptr)
        if block is not None:
            allocator.free(block)
            return
    raise RuntimeError(f"invalid device pointer: {mem_ptr:#x}")


def empty_cache() -> None:
    """Return every cached segment with no block in use to the driver (all devices).

    Memory in use by tensors is untouched; reserved memory drops, allocated memory
    does not. Frees that wait on other streams are completed first.
    """
    if _is_initialized():
        for allocator in _allocator.device_allocators().values():
            allocator.empty_cache()


def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
    """Cap this process's reserved memory on ``device`` at ``fraction`` of its total.

    Allocations that would go past ``fraction * total_memory`` fail with
    OutOfMemoryError after the cache has been freed. ``fraction`` is a float in [0, 1].
    """
    _lazy_init()
    index = _device_index(device)
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _allocator_of(index).set_memory_fraction(fraction)


def get_per_process_memory_fraction(device: Any = None) -> float:
    """The fraction set by :func:`set_per_process_memory_fraction` (1.0 by default)."""
    _lazy_init()
    return _allocator_of(device).fraction


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """``(free, total)`` bytes of the device, as the driver reports them."""
    _lazy_init()
    return _allocator_of(device).source.mem_get_info()


def _attach_out_of_memory_observer(
    observer: Callable[[int, int, int, int], object],
) -> None:
    """Call ``observer(device, alloc, device_total_or_allowed, device_free)`` before each
    OutOfMemoryError (torch's ``_cuda_attach_out_of_memory_observer``)."""
    _lazy_init()
    _allocator.attach_oom_observer(observer)


# -- statistics ----------------------------------------------------------------------


def memory_stats_as_nested_dict(device: Any = None) -> dict[str, Any]:
    """The allocator statistics of ``device`` as nested dicts ({} before CUDA is initialised)."""
    if not _is_initialized():
        return {}
    return _allocator_of(device).stats_as_nested_dict()


def memory_stats(device: Any = None) -> collections.OrderedDict[str, Any]:
    """The allocator statistics of ``device``, flattened to sorted ``a.b.c`` keys.

    Families ``allocation``, ``segment``, ``active``, ``inactive_split``,
    ``allocated_bytes``, ``reserved_bytes``, ``active_bytes``,
    ``inactive_split_bytes`` and ``requested_bytes``, each per pool
    (``all``/``small_pool``/``large_pool``) with ``current``, ``peak``,
    ``allocated`` and ``freed``; ``oversize_allocations`` and ``oversize_segments``;
    the counters ``num_alloc_retries``, ``num_ooms``, ``num_sync_all_streams``,
    ``num_device_alloc``, ``num_device_free``; and ``max_split_size`` (-1: no limit).
    """
    result: list[tuple[str, Any]] = []

    def flatten(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                flatten(f"{prefix}.{key}" if prefix else str(key), item)
        else:
            result.append((prefix, value))

    flatten("", memory_stats_as_nested_dict(device))
    result.sort()
    return collections.OrderedDict(result)


def reset_accumulated_memory_stats(device: Any = None) -> None:
    """Zero the ``allocated``/``freed`` sums and the event counters of ``device``."""
    _allocator_of(device).reset_accumulated_stats()


def reset_peak_memory_stats(device: Any = None) -> None:
    """Set every ``peak`` statistic of ``device`` to its current value."""
    _allocator_of(device).reset_peak_stats()


def reset_max_memory_allocated(device: Any = None) -> None:
    """Deprecated: resets all peak statistics (see :func:`reset_peak_memory_stats`)."""
    warnings.warn(
        "torch.cuda.reset_max_memory_allocated now calls torch.cuda.reset_peak_memory_stats, "
        "which resets /all/ peak memory stats.",
        FutureWarning,
        stacklevel=2,
    )
    reset_peak_memory_stats(device)


def reset_max_memory_cached(device: Any = None) -> None:
    """Deprecated: resets all peak statistics (see :func:`reset_peak_memory_stats`)."""
    warnings.warn(
        "torch.cuda.reset_max_memory_cached now calls torch.cuda.reset_peak_memory_stats, "
        "which resets /all/ peak memory stats.",
        FutureWarning,
        stacklevel=2,
    )
    reset_peak_memory_stats(device)


def memory_allocated(device: Any = None) -> int:
    """Bytes currently handed out to tensors (rounded block sizes) on ``device``."""
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device: Any = None) -> int:
    """Peak of :func:`memory_allocated` since start or the last peak reset."""
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device: Any = None) -> int:
    """Bytes of the segments the allocator holds on ``device`` (in use or cached)."""
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device: Any = None) -> int:
    """Peak of :func:`memory_reserved` since start or the last peak reset."""
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def memory_cached(device: Any = None) -> int:
    """Deprecated name of :func:`memory_reserved`."""
    warnings.warn(
        "`torch.cuda.memory_cached` has been renamed to `torch.cuda.memory_reserved`",
        FutureWarning,
        stacklevel=2,
    )
    return memory_reserved(device)


def max_memory_cached(device: Any = None) -> int:
    """Deprecated name of :func:`max_memory_reserved`."""
    warnings.warn(
        "`torch.cuda.max_memory_cached` has been renamed to `torch.cuda.max_memory_reserved`",
        FutureWarning,
        stacklevel=2,
    )
    return max_memory_reserved(device)


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """torch's human-readable table of the allocator statistics of ``device``."""
    index = _device_index(device)
    return format_memory_summary(memory_stats(index), index, abbreviated)


def list_gpu_processes(device: Any = None) -> str:
    """The processes running on a GPU and their memory, one line each (through NVML)."""
    from refimpl.cuda import _nvml

    return _nvml.list_gpu_processes(device)


def get_allocator_backend() -> str:
    """``"native"``: refimpl implements torch's native caching allocator only."""
    return get_config().backend


def _set_allocator_settings(env: str) -> None:
    """Apply an allocator settings string (``PYTORCH_CUDA_ALLOC_CONF`` syntax) now."""
    warnings.warn(
        "torch.cuda._set_allocator_settings is deprecated. "
        "Use torch._C._accelerator_setAllocatorSettings instead.",
        FutureWarning,
        stacklevel=2,
    )
    set_allocator_settings(env)


# -- snapshots and history -------------------------------------------------------------


def _snapshot(device: Any = None, augment_with_fx_traces: bool = False) -> dict[str, Any]:
    """The state of every device allocator and the recorded history.

    ``{"segments": [...], "device_traces": [[...], ...], "allocator_settings": {...},
    "external_annotations": []}``; see ``refimpl.cuda._snapshot`` for the entries.
    """
    allocators = _allocator.device_allocators() if _is_initialized() else {}
    # one trace per device, as torch's allocator has one per device from initialisation
    devices = _device_count() if _device_count is not None and _is_initialized() else 0
    count = max(max(allocators, default=-1) + 1, devices)
    traces: list[list[dict[str, Any]]] = [[] for _ in range(count)]
    segments: list[dict[str, Any]] = []
    for index, allocator in allocators.items():
        traces[index] = allocator.trace()
        segments.extend(allocator.segments())
    return {
        "segments": segments,
        "device_traces": traces,
        "allocator_settings": get_config().snapshot_settings(),
        "external_annotations": [],
    }


def memory_snapshot(mempool_id: Any = None, include_traces: bool = True) -> list[dict[str, Any]]:
    """Every segment of every device allocator, with its blocks."""
    return _snapshot()["segments"]


def _dump_snapshot(
    filename: str = "dump_snapshot.pickle", augment_with_fx_traces: bool = False
) -> None:
    """Pickle :func:`_snapshot` to ``filename`` (readable by ``tensorctl memstats``)."""
    snapshot = _snapshot()
    with open(filename, "wb") as f:
        pickle.dump(snapshot, f)


_CONTEXT_LEVELS = {
    None: RecordContext.NEVER,
    "state": RecordContext.STATE,
    "alloc": RecordContext.ALLOC,
    "all": RecordContext.ALL,
}


def _record_memory_history(enabled: Any = "all", *args: Any, **kwargs: Any) -> None:
    """Record allocator history and stacks for :func:`_snapshot`.

    ``enabled``: None stops recording, ``"state"`` keeps stacks of live blocks only,
    ``"all"`` also keeps the trace of actions (up to ``max_entries``). ``context``:
    None (no stacks), ``"state"``, ``"alloc"`` or ``"all"`` (also the stacks of
    frees). ``stacks``: ``"python"`` or ``"all"`` (refimpl has Python frames only).
    A bool ``enabled`` selects torch's legacy signature.
    """
    if isinstance(enabled, bool):
        _record_memory_history_legacy(enabled, *args, **kwargs)
    else:
        _record_memory_history_impl(enabled, *args, **kwargs)


def _record_memory_history_impl(
    enabled: str | None = "all",
    context: str | None = "all",
    stacks: str = "all",
    max_entries: int = sys.maxsize,
    device: Any = None,
    clear_history: bool = False,
    compile_context: bool = False,
    global_record_annotations: bool = False,
    skip_actions: list[str] | None = None,
) -> None:
    if enabled is not None and enabled not in ("state", "all"):
        raise RuntimeError("expected state to be 'state', 'all', or None")
    if context is not None and context not in ("state", "alloc", "all"):
        raise RuntimeError("expected context to be 'state', 'alloc', 'all', or None")
    if stacks not in ("python", "all"):
        raise RuntimeError("expected stacks to be 'python', or 'all'")
    _lazy_init()
    entries = max_entries if enabled == "all" else 1
    skip = frozenset(a for a in (skip_actions or ()) if a in TRACE_ACTIONS)
    _allocator.configure_history(
        enabled is not None, _CONTEXT_LEVELS[context], entries, clear_history, skip
    )


def _record_memory_history_legacy(
    enabled: bool,
    record_context: bool = True,
    trace_alloc_max_entries: int = 1,
    trace_alloc_record_context: bool = False,
    device: Any = None,
    record_context_cpp: bool = False,
    clear_history: bool = False,
    compile_context: bool = False,
    global_record_annotations: bool = False,
    skip_actions: list[str] | None = None,
) -> None:
    level = RecordContext.NEVER
    if trace_alloc_record_context:
        level = RecordContext.ALLOC
    elif record_context:
        level = RecordContext.STATE
    _lazy_init()
    skip = frozenset(a for a in (skip_actions or ()) if a in TRACE_ACTIONS)
    _allocator.configure_history(enabled, level, trace_alloc_max_entries, clear_history, skip)
