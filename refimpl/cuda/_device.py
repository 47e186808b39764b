"""Devices: discovery, visibility, the current device and properties (CUDADEV-100..404).

Semantics follow ``torch.cuda`` of torch 2.11 (checked against an H100/H200):

* ``is_available()`` never raises. Without ``cuda.bindings`` it is False; with
  ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` it is ``device_count() > 0``; otherwise it asks
  the driver (which poisons fork, as torch's ``cudaGetDeviceCount`` does). No driver
  or no GPU is a quiet False; other driver failures warn ``"CUDA initialization: ..."``.
* ``device_count()`` never raises and is not cached before initialisation, so a
  ``CUDA_VISIBLE_DEVICES`` set after import is honoured: NVML is asked first (through
  ``libnvidia-ml.so.1`` with ctypes, as torch does), the driver only if NVML fails.
* ``CUDA_VISIBLE_DEVICES`` is parsed with torch's quirks (:func:`_parse_visible_devices`):
  strtoul-like integers (``"1gpu2,2ampere"`` -> ``[1, 2]``), the first negative or
  non-numeric entry ends the list, a duplicate empties it, ``GPU-``/``MIG-`` UUID
  prefixes, and the ``"+"`` ValueError.
* The current device is per thread and starts at 0; selecting a device makes its
  primary context current; an out-of-range ordinal raises :class:`AcceleratorError`
  with torch's "CUDA error: invalid device ordinal" text (2.11; older torch raised a
  plain RuntimeError without the "GPU device may be out of range" line).
"""

from __future__ import annotations

import os
import threading
import warnings
from typing import Any

from refimpl._device import device as _torch_device
from refimpl.cuda import _driver, _lazy
from refimpl.cuda._driver import AcceleratorError
from refimpl.cuda._lazy import _lazy_init

_CUDA_ERROR_SUFFIX = (
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.\nFor debugging consider passing "
    "CUDA_LAUNCH_BLOCKING=1\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side "
    "assertions.\n"
)
INVALID_ORDINAL_MESSAGE = (
    "CUDA error: invalid device ordinal\nGPU device may be out of range, do you have "
    "enough GPUs?\n" + _CUDA_ERROR_SUFFIX
)


class cudaStatus:
    """Runtime status codes that torch exposes (its ERROR_NOT_READY keeps the old 34)."""

    SUCCESS: int = 0
    ERROR_NOT_READY: int = 34


class CudaError(RuntimeError):
    """A CUDA runtime error code; the message is ``"<runtime description> (<code>)"``."""

    def __init__(self, code: int) -> None:
        super().__init__(f"{_driver.runtime_error_string(code)} ({code})")
        self.code = code


def check_error(res: int) -> None:
    """Raise :class:`CudaError` unless ``res`` is 0 (``cudaSuccess``)."""
    if res != 0:
        raise CudaError(res)


# -- availability and counting ----------------------------------------------------------

_cached_device_count: int | None = None
_probed_count: int | None = None
_probe_lock = threading.Lock()


def _is_compiled() -> bool:
    """True when the CUDA bindings are importable (torch's "compiled with CUDA")."""
    return _driver.bindings_available()


def _nvml_based_avail() -> bool:
    return os.getenv("PYTORCH_NVML_BASED_CUDA_CHECK") == "1"


def _driver_device_count() -> int:
    """torch's ``_cuda_getDeviceCount``: never raises, computed once per process.

    Like the C++ static it stands for, the first answer is kept: the driver fixes its
    view of the devices at ``cuInit``.
    """
    global _probed_count
    _lazy._poison_fork()
    if _probed_count is None:
        with _probe_lock:
            if _probed_count is None:
                try:
                    _probed_count = _lazy._device_count_impl(fail_if_no_driver=False)
                except RuntimeError as exc:
                    warnings.warn(f"CUDA initialization: {exc}", UserWarning, stacklevel=3)
                    _probed_count = 0
    return _probed_count


def is_available() -> bool:
    """Whether a CUDA device can be used; never raises (spec: CUDADEV-001)."""
    if not _is_compiled():
        return False
    if _nvml_based_avail():
        return device_count() > 0
    return _driver_device_count() > 0


def _parse_visible_devices() -> list[int] | list[str]:
    """``CUDA_VISIBLE_DEVICES`` as torch reads it; unset means ``list(range(64))``."""
    var = os.getenv("CUDA_VISIBLE_DEVICES")
    if var is None:
        return list(range(64))

    def strtoul(s: str) -> int:
        # The leading digits (with one optional sign); -1 when there are none. A bare
        # sign reaches int() and raises ValueError, as in torch.
        end = 0
        for i, c in enumerate(s):
            if c.isdigit() or (i == 0 and c in "+-"):
                end = i + 1
            else:
                break
        return int(s[:end]) if end > 0 else -1

    for prefix in ("GPU-", "MIG-"):
        if var.startswith(prefix):
            uuids: list[str] = []
            for elem in var.split(","):
                if elem in uuids:
                    return []
                if not elem.startswith(prefix):
                    break
                uuids.append(elem)
            return uuids
    ordinals: list[int] = []
    for elem in var.split(","):
        x = strtoul(elem.strip())
        if x in ordinals:
            return []
        if x < 0:
            break
        ordinals.append(x)
    return ordinals


def _nvml() -> Any:
    import ctypes

    return ctypes.CDLL("libnvidia-ml.so.1")


def _raw_device_count_nvml() -> int:
    """NVML's device count, or -1 (with a warning) when NVML fails; OSError propagates."""
    import ctypes

    lib = _nvml()
    if lib.nvmlInit_v2() != 0:
        warnings.warn("Can't initialize NVML", stacklevel=2)
        return -1
    count = ctypes.c_int(-1)
    if lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
        warnings.warn("Can't get nvml device count", stacklevel=2)
        return -1
    return count.value


def _raw_device_uuid_nvml() -> list[str] | None:
    """NVML's UUIDs (``GPU-...``) of every device, or None (with a warning)."""
    import ctypes

    lib = _nvml()
    if lib.nvmlInit_v2() != 0:
        warnings.warn("Can't initialize NVML", stacklevel=2)
        return None
    count = ctypes.c_int(-1)
    if lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
        warnings.warn("Can't get nvml device count", stacklevel=2)
        return None
    uuids: list[str] = []
    for i in range(count.value):
        handle = ctypes.c_void_p()
        if lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle)) != 0:
            warnings.warn("Can't get device handle", stacklevel=2)
            return None
        buf = ctypes.create_string_buffer(96)
        if lib.nvmlDeviceGetUUID(handle, buf, 96) != 0:
            warnings.warn("Can't get device UUID", stacklevel=2)
            return None
        uuids.append(buf.raw.decode("ascii").strip("\0"))
    return uuids


def _transform_uuid_to_ordinals(candidates: list[str], uuids: list[str]) -> list[int]:
    """Map UUID prefixes to ordinals: an unknown or ambiguous prefix ends the list, a
    duplicate empties it."""
    ordinals: list[int] = []
    for candidate in candidates:
        matches = [i for i, u in enumerate(uuids) if u.startswith(candidate)]
        if len(matches) != 1:
            break
        if matches[0] in ordinals:
            return []
        ordinals.append(matches[0])
    return ordinals


def _device_count_nvml() -> int:
    """Visible devices counted through NVML; negative when NVML cannot tell."""
    visible = _parse_visible_devices()
    if not visible:
        return 0
    try:
        if isinstance(visible[0], str):
            if visible[0].startswith("MIG-"):
                return -1
            uuids = _raw_device_uuid_nvml()
            if uuids is None:
                return -1
            visible = _transform_uuid_to_ordinals(visible, uuids)  # type: ignore[arg-type]
        else:
            raw = _raw_device_count_nvml()
            if raw <= 0:
                return raw
            for i, ordinal in enumerate(visible):
                if ordinal >= raw:  # type: ignore[operator]
                    return i
    except (OSError, AttributeError):
        return -1
    return len(visible)


def _get_nvml_device_index(device: Any) -> int:
    """The NVML index of a CUDA device, through ``CUDA_VISIBLE_DEVICES``."""
    idx = _get_device_index(device, optional=True)
    visible = _parse_visible_devices()
    if visible and isinstance(visible[0], str):
        uuids = _raw_device_uuid_nvml()
        if uuids is None:
            raise RuntimeError("Can't get device UUIDs")
        visible = _transform_uuid_to_ordinals(visible, uuids)  # type: ignore[arg-type]
    if idx is None or idx < 0 or idx >= len(visible):
        raise RuntimeError(f"device {idx} is not visible (CUDA_VISIBLE_DEVICES={visible})")
    return int(visible[idx])


def device_count() -> int:
    """The number of visible CUDA devices; 0 without a driver; never raises."""
    global _cached_device_count
    if not _is_compiled():
        return 0
    if _cached_device_count is not None:
        return _cached_device_count
    if _lazy._initialized or _lazy._is_initializing():
        count = _driver_device_count()
    else:
        nvml_count = _device_count_nvml()
        count = _driver_device_count() if nvml_count < 0 else nvml_count
    if _lazy._initialized:
        _cached_device_count = count
    return count


# -- device indices and the current device ----------------------------------------------

class _ThreadDevice(threading.local):
    """This thread's current device; a class default makes the read a plain lookup."""

    device = 0


_tls = _ThreadDevice()


def _get_device_index(device: Any, optional: bool = False, allow_cpu: bool = False) -> Any:
    """An int ordinal from an int, a device string/object or a ``device`` context.

    With ``optional``, None and ``"cuda"`` mean the current device when CUDA is
    available (which initialises it) and None otherwise. A ``cpu`` device gives -1 with
    ``allow_cpu`` and a ValueError otherwise, with torch's messages.
    """
    if device is None and optional and _lazy._initialized and not _lazy._in_bad_fork:
        return _tls_device()  # the hot path: the current device of an initialised CUDA
    if isinstance(device, bool):
        device = int(device)
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        device = _torch_device(device)
    if isinstance(device, (_torch_device,)) or _looks_like_device(device):
        if allow_cpu:
            if device.type not in ("cuda", "cpu"):
                raise ValueError(f"Expected a cuda or cpu device, but got: {device}")
        elif device.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {device}")
        index = -1 if device.type == "cpu" else device.index
    elif isinstance(device, _DeviceContext):
        return device.idx
    else:
        index = device
    if index is None:
        if not optional:
            raise ValueError(
                "Expected a torch.device with a specified index or an integer, "
                f"but got:{device}")
        index = current_device() if is_available() else None
    return index


def _looks_like_device(obj: Any) -> bool:
    # A torch.device or any other library's device object (duck-typed).
    return (not isinstance(obj, (str, int, _DeviceContext)) and hasattr(obj, "type")
            and hasattr(obj, "index"))


def _tls_device() -> int:
    return _tls.device


def _check_ordinal(idx: int) -> None:
    if idx >= device_count():
        raise AcceleratorError(INVALID_ORDINAL_MESSAGE)


def current_device() -> int:
    """The index of this thread's current device (0 until one is selected)."""
    if not (_lazy._initialized and not _lazy._in_bad_fork):  # the steady state skips a call
        _lazy_init()
    return _tls.device


def _select(idx: int) -> None:
    _check_ordinal(idx)
    _driver.use_device(idx)
    _tls.device = idx


def set_device(device: Any) -> None:
    """Select the current device of this thread; a negative index is a no-op."""
    idx = _get_device_index(device)
    if idx >= 0:
        _lazy_init()
        _select(idx)


def _exchange_device(idx: int) -> int:
    """Select ``idx`` and return the previous device; -1 in, -1 out."""
    if idx is None:
        raise TypeError("_exchange_device(): argument 'device' must be int, not NoneType")
    if idx < 0:
        return -1
    _lazy_init()
    prev = _tls_device()
    if idx != prev:
        _select(idx)
    else:
        _check_ordinal(idx)
    return prev


def _maybe_exchange_device(idx: int) -> int:
    """Switch back to ``idx`` without forcing a context on it (c10 MaybeExchangeDevice)."""
    if idx < 0:
        return -1
    prev = _tls_device()
    _tls.device = idx
    return prev


class _DeviceContext:
    """Base of :class:`device`: enter selects ``idx``, exit restores the previous one."""

    def __init__(self, idx: Any) -> None:
        self.idx = idx
        self.prev_idx = -1

    def __enter__(self) -> None:
        self.prev_idx = _exchange_device(self.idx)

    def __exit__(self, *exc: object) -> bool:
        self.idx = _maybe_exchange_device(self.prev_idx)
        return False


class device(_DeviceContext):
    """Context manager that selects a device; a negative index or None is a no-op."""

    def __init__(self, device: Any) -> None:
        super().__init__(_get_device_index(device, optional=True))


_device_context = device  # for functions whose ``device`` argument hides the class


class _DeviceGuard(_DeviceContext):
    """The same as :class:`device` for a plain int."""


class device_of(device):
    """Select the device of a tensor or storage; a no-op for a CPU object."""

    def __init__(self, obj: Any) -> None:
        super().__init__(obj.get_device() if obj.is_cuda else -1)


# -- properties -------------------------------------------------------------------------


class _CUuuid:
    """A device UUID; ``str()`` gives the dashed hex form torch prints."""

    __slots__ = ("bytes",)

    def __init__(self, raw: bytes) -> None:
        self.bytes = raw

    def __str__(self) -> str:
        h = self.bytes.hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"

    __repr__ = __str__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _CUuuid) and other.bytes == self.bytes

    def __hash__(self) -> int:
        return hash(self.bytes)


# (field, driver attribute) pairs; total_memory, name and uuid come from other calls.
_ATTRIBUTE_FIELDS = (
    ("major", "COMPUTE_CAPABILITY_MAJOR"),
    ("minor", "COMPUTE_CAPABILITY_MINOR"),
    ("multi_processor_count", "MULTIPROCESSOR_COUNT"),
    ("is_integrated", "INTEGRATED"),
    ("is_multi_gpu_board", "MULTI_GPU_BOARD"),
    ("max_threads_per_multi_processor", "MAX_THREADS_PER_MULTIPROCESSOR"),
    ("warp_size", "WARP_SIZE"),
    ("L2_cache_size", "L2_CACHE_SIZE"),
    ("clock_rate", "CLOCK_RATE"),
    ("memory_clock_rate", "MEMORY_CLOCK_RATE"),
    ("memory_bus_width", "GLOBAL_MEMORY_BUS_WIDTH"),
    ("shared_memory_per_block", "MAX_SHARED_MEMORY_PER_BLOCK"),
    ("shared_memory_per_multiprocessor", "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
    ("shared_memory_per_block_optin", "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
    ("regs_per_multiprocessor", "MAX_REGISTERS_PER_MULTIPROCESSOR"),
    ("max_threads_per_block", "MAX_THREADS_PER_BLOCK"),
    ("pci_bus_id", "PCI_BUS_ID"),
    ("pci_device_id", "PCI_DEVICE_ID"),
    ("pci_domain_id", "PCI_DOMAIN_ID"),
)


class _CudaDeviceProperties:
    """The properties of one device, with torch's field names and repr."""

    name: str
    major: int
    minor: int
    total_memory: int
    multi_processor_count: int
    uuid: _CUuuid
    L2_cache_size: int

    def __init__(self, ordinal: int) -> None:
        self.name = _driver.device_name(ordinal)
        self.total_memory = _driver.device_total_memory(ordinal)
        for field, attribute in _ATTRIBUTE_FIELDS:
            setattr(self, field, _driver.device_attribute(ordinal, attribute))
        self.is_integrated = int(self.is_integrated)
        self.is_multi_gpu_board = int(self.is_multi_gpu_board)
        self.gcnArchName = self.name  # torch on CUDA repeats the name here (2.11)
        self.uuid = _CUuuid(_driver.device_uuid(ordinal))

    def __repr__(self) -> str:
        mib = 1024 * 1024
        return (
            f"_CudaDeviceProperties(name='{self.name}', major={self.major}, "
            f"minor={self.minor}, total_memory={self.total_memory // mib}MB, "
            f"multi_processor_count={self.multi_processor_count}, uuid={self.uuid}, "
            f"pci_bus_id={self.pci_bus_id}, pci_device_id={self.pci_device_id}, "
            f"pci_domain_id={self.pci_domain_id}, L2_cache_size={self.L2_cache_size // mib}MB)"
        )


_properties: dict[int, _CudaDeviceProperties] = {}


def get_device_properties(device: Any = None) -> _CudaDeviceProperties:
    """The properties of a device (the current one by default); cached per device."""
    _lazy_init()
    idx = _get_device_index(device, optional=True)
    if idx < 0 or idx >= device_count():
        raise AssertionError("Invalid device id")
    props = _properties.get(idx)
    if props is None:
        props = _properties.setdefault(idx, _CudaDeviceProperties(idx))
    return props


def get_device_name(device: Any = None) -> str:
    """The name of a device (the current one by default)."""
    return get_device_properties(device).name


def get_device_capability(device: Any = None) -> tuple[int, int]:
    """(major, minor) compute capability of a device (the current one by default)."""
    props = get_device_properties(device)
    return props.major, props.minor


def can_device_access_peer(device: Any, peer_device: Any) -> bool:
    """Whether ``device`` can access ``peer_device``'s memory (False for itself)."""
    _lazy_init()
    idx = _get_device_index(device, optional=True)
    peer = _get_device_index(peer_device)
    count = device_count()
    if idx < 0 or idx >= count:
        raise AssertionError("Invalid device id")
    if peer < 0 or peer >= count:
        raise AssertionError("Invalid peer device id")
    if idx == peer:
        return False
    return _driver.can_access_peer(idx, peer)


def synchronize(device: Any = None) -> None:
    """Wait for all work on all streams of a device (the current one by default)."""
    _lazy_init()
    with _device_context(device):
        _driver.synchronize(_tls_device())
    # a synchronizing point: report an out-of-range index a kernel recorded (_index)
    from refimpl.cuda import _index

    _index.raise_pending()


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) global memory of a device in bytes, as the driver reports it."""
    _lazy_init()
    if device is None:
        device = current_device()
    idx = _get_device_index(device)
    _check_ordinal(idx)
    return _driver.mem_get_info(idx)


def init() -> None:
    """Initialise CUDA now (a no-op when already initialised)."""
    _lazy_init()


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """bfloat16 support: compute capability 8.0+, or emulated on older GPUs."""
    if not is_available():
        return False
    if get_device_properties(current_device()).major >= 8:
        return True
    return including_emulation


def is_tf32_supported() -> bool:
    """TF32 needs native bfloat16 support (compute capability 8.0+)."""
    return is_bf16_supported(including_emulation=False)


def get_arch_list() -> list[str]:
    """The ``sm_XY`` targets refimpl can build kernels for (its NVRTC's); [] without a GPU."""
    if not is_available():
        return []
    try:
        return [f"sm_{a}" for a in _driver.nvrtc_supported_archs()]
    except (_driver.NvrtcError, RuntimeError, ImportError):
        return []


def get_gencode_flags() -> str:
    """``-gencode`` flags for :func:`get_arch_list`, as torch formats them."""
    return " ".join(
        f"-gencode compute=compute_{arch},code={kind}_{arch}"
        for kind, arch in (a.split("_", 1) for a in get_arch_list())
    )
