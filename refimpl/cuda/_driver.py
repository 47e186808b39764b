"""The CUDA driver layer: the only module of refimpl that imports ``cuda.bindings``.

Every other module of ``refimpl.cuda`` talks to the GPU through the small functions
below, which take and return plain Python values (ints for handles and addresses).

Rules this module keeps (spec: cuda_device, CUDADEV-001 and CUDADEV-400..404):

* ``cuda.bindings`` is imported lazily, on the first call that needs it, so importing
  refimpl never touches the driver and works on machines without one.
* Every driver call is checked. A failing call raises :class:`CudaDriverError`, a
  ``RuntimeError`` whose message names the call and the CUDA error, for example
  ``cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)``; the numeric
  ``CUresult`` is kept in ``.code`` and the enum name in ``.name``.
* A missing driver library raises :class:`DriverNotFoundError` (a ``RuntimeError``)
  with torch's text; the import of ``cuda.bindings`` failing raises ``ImportError``.
* Contexts: the driver API has no implicit per-thread context (unlike the runtime API
  torch uses). Each thread makes the device's *primary* context current before its
  first call on that device: :func:`use_device` does it, once per thread and device
  switch, and every helper that needs a context calls it with the device it works on.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

NO_DRIVER_MESSAGE = (
    "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
    "installed a driver from http://www.nvidia.com/Download/index.aspx"
)

CUDA_SUCCESS = 0
CUDA_ERROR_OUT_OF_MEMORY = 2
CUDA_ERROR_NOT_INITIALIZED = 3
CUDA_ERROR_NO_DEVICE = 100
CUDA_ERROR_INVALID_DEVICE = 101
CUDA_ERROR_NOT_READY = 600

# Flags, as the driver headers define them (stable ABI values).
STREAM_NON_BLOCKING = 0x1
EVENT_BLOCKING_SYNC = 0x1
EVENT_DISABLE_TIMING = 0x2
EVENT_INTERPROCESS = 0x4
IPC_EVENT_HANDLE_SIZE = 64


class AcceleratorError(RuntimeError):
    """A CUDA runtime failure reported by torch as ``torch.AcceleratorError`` (2.11)."""


class CudaDriverError(AcceleratorError):
    """A driver call returned an error.

    The message reads as torch's (``CUDA error: <description>``) and then names the
    driver call and the error code.
    """

    def __init__(self, call: str, code: int, name: str, description: str) -> None:
        super().__init__(f"CUDA error: {description} ({call} failed: {name})")
        self.call = call
        self.code = code
        self.name = name
        self.description = description


class DriverNotFoundError(RuntimeError):
    """The NVIDIA driver library (libcuda) is not installed on this machine."""


_modules: dict[str, Any] = {}
_import_lock = threading.Lock()


def _load(name: str) -> Any:
    """Import ``cuda.bindings.<name>`` once; ImportError propagates."""
    mod = _modules.get(name)
    if mod is None:
        with _import_lock:
            mod = _modules.get(name)
            if mod is None:
                import importlib

                mod = importlib.import_module(f"cuda.bindings.{name}")
                _modules[name] = mod
    return mod


def bindings_available() -> bool:
    """True when ``cuda.bindings`` can be imported (refimpl's "compiled with CUDA")."""
    try:
        _load("driver")
    except ImportError:
        return False
    return True


def _is_missing_library(exc: BaseException) -> bool:
    # cuda.pathfinder raises DynamicLibNotFoundError (a RuntimeError) when libcuda or
    # libnvrtc cannot be found; match by name so that no pathfinder import is needed.
    return any(cls.__name__ == "DynamicLibNotFoundError" for cls in type(exc).__mro__)


def _describe(code: int) -> tuple[str, str]:
    """(enum name, description) of a CUresult, without failing if the driver is gone."""
    d = _load("driver")
    try:
        name = d.CUresult(code).name
    except ValueError:
        name = f"CUDA error {code}"
    try:
        err, text = d.cuGetErrorString(d.CUresult(code))
        desc = text.decode() if err == 0 and text else "unknown error"
    except Exception:  # noqa: BLE001 - a driverless machine cannot describe errors
        desc = "unknown error"
    return name, desc


def _call(name: str, *args: Any) -> Any:
    """Call ``cuda.bindings.driver.<name>`` and check its CUresult.

    Returns None, the single value, or a tuple of values.
    """
    d = _load("driver")
    try:
        out = getattr(d, name)(*args)
    except RuntimeError as exc:
        if _is_missing_library(exc):
            raise DriverNotFoundError(NO_DRIVER_MESSAGE) from exc
        raise
    code = int(out[0])
    if code != CUDA_SUCCESS:
        raise CudaDriverError(name, code, *_describe(code))
    if len(out) == 1:
        return None
    return out[1] if len(out) == 2 else tuple(out[1:])


def _status(name: str, *args: Any) -> int:
    """Call a query-like function and return its raw CUresult (no raise on NOT_READY)."""
    d = _load("driver")
    code = int(getattr(d, name)(*args)[0])
    if code not in (CUDA_SUCCESS, CUDA_ERROR_NOT_READY):
        raise CudaDriverError(name, code, *_describe(code))
    return code


def error_name(code: int) -> str:
    """The driver enum name of a CUresult (``CUDA_ERROR_INVALID_DEVICE``)."""
    return _describe(code)[0]


def runtime_error_string(code: int) -> str:
    """The CUDA *runtime* description of a ``cudaError_t`` (``out of memory`` for 2).

    ``cuda.bindings.runtime`` carries the runtime statically, so this works without a
    driver; torch's ``CudaError`` uses runtime codes.
    """
    r = _load("runtime")
    try:
        _err, text = r.cudaGetErrorString(r.cudaError_t(code))
    except ValueError:
        return "unrecognized error code"
    return text.decode()


# -- initialisation and devices ---------------------------------------------------------

_init_lock = threading.Lock()
_init_done = False


def init() -> None:
    """``cuInit(0)`` once per process; raises DriverNotFoundError or CudaDriverError."""
    global _init_done
    if _init_done:
        return
    with _init_lock:
        if not _init_done:
            _call("cuInit", 0)
            _init_done = True


def driver_version() -> int:
    """The driver's CUDA version as an int (13000 for CUDA 13.0)."""
    init()
    return int(_call("cuDriverGetVersion"))


def device_count() -> int:
    """``cuDeviceGetCount`` after ``cuInit``."""
    init()
    return int(_call("cuDeviceGetCount"))


_devices: dict[int, Any] = {}


def _device(ordinal: int) -> Any:
    dev = _devices.get(ordinal)
    if dev is None:
        init()
        dev = _call("cuDeviceGet", ordinal)
        _devices[ordinal] = dev
    return dev


def device_name(ordinal: int) -> str:
    """The marketing name of a device (``NVIDIA H100 80GB HBM3``)."""
    raw = _call("cuDeviceGetName", 256, _device(ordinal))
    return bytes(raw).split(b"\x00", 1)[0].decode()


def device_total_memory(ordinal: int) -> int:
    """Total global memory in bytes."""
    return int(_call("cuDeviceTotalMem", _device(ordinal)))


def device_attribute(ordinal: int, attribute: str) -> int:
    """``cuDeviceGetAttribute`` by the suffix of the enum name (``L2_CACHE_SIZE``)."""
    d = _load("driver")
    attr = getattr(d.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{attribute}")
    return int(_call("cuDeviceGetAttribute", attr, _device(ordinal)))


def device_uuid(ordinal: int) -> bytes:
    """The 16 bytes of the device UUID."""
    uuid = _call("cuDeviceGetUuid", _device(ordinal))
    return bytes(uuid.bytes)[:16]


def can_access_peer(ordinal: int, peer: int) -> bool:
    """``cuDeviceCanAccessPeer`` (the driver itself says False for a device and itself)."""
    return bool(_call("cuDeviceCanAccessPeer", _device(ordinal), _device(peer)))


# -- contexts ---------------------------------------------------------------------------

_primary: dict[int, Any] = {}
_primary_lock = threading.Lock()
class _ThreadContext(threading.local):
    """The device whose primary context this thread made current (None: none yet)."""

    device = None


_tls = _ThreadContext()


def _primary_context(ordinal: int) -> Any:
    ctx = _primary.get(ordinal)
    if ctx is None:
        with _primary_lock:
            ctx = _primary.get(ordinal)
            if ctx is None:
                ctx = _call("cuDevicePrimaryCtxRetain", _device(ordinal))
                _primary[ordinal] = ctx
    return ctx


def use_device(ordinal: int) -> None:
    """Make ``ordinal``'s primary context current on this thread (cheap when it is)."""
    if _tls.device == ordinal:
        return
    _call("cuCtxSetCurrent", _primary_context(ordinal))
    _tls.device = ordinal


CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704


def enable_peer_access(ordinal: int, peer: int) -> None:
    """Let ``ordinal``'s primary context access ``peer``'s memory (``cuCtxEnablePeerAccess``).

    Access is one way, from the current context to the peer's allocations (those made
    before the call included); enabling it twice is not an error.
    """
    d = _load("driver")
    use_device(ordinal)
    code = int(d.cuCtxEnablePeerAccess(_primary_context(peer), 0)[0])
    if code not in (CUDA_SUCCESS, CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED):
        raise CudaDriverError("cuCtxEnablePeerAccess", code, *_describe(code))


def primary_context_active(ordinal: int) -> bool:
    """Whether the device's primary context exists (``cuDevicePrimaryCtxGetState``)."""
    _flags, active = _call("cuDevicePrimaryCtxGetState", _device(ordinal))
    return bool(active)


def synchronize(ordinal: int) -> None:
    """Wait for all work on every stream of the device (``cuCtxSynchronize``)."""
    use_device(ordinal)
    _call("cuCtxSynchronize")


def reset_after_fork() -> None:
    """Forget per-process driver state in a forked child (its handles are invalid)."""
    global _init_done
    _init_done = False
    _devices.clear()
    _primary.clear()
    _tls.__dict__.clear()


# -- streams ----------------------------------------------------------------------------


def stream_priority_range(ordinal: int) -> tuple[int, int]:
    """(least, greatest) stream priority of the device, e.g. ``(0, -5)``."""
    use_device(ordinal)
    least, greatest = _call("cuCtxGetStreamPriorityRange")
    return int(least), int(greatest)


def stream_create(ordinal: int, priority: int = 0, flags: int = STREAM_NON_BLOCKING) -> int:
    """``cuStreamCreateWithPriority``; returns the stream handle as an int."""
    use_device(ordinal)
    return int(_call("cuStreamCreateWithPriority", flags, priority))


def stream_priority(ordinal: int, stream: int) -> int:
    """The priority a stream was created with (0 for the legacy default stream)."""
    d = _load("driver")
    use_device(ordinal)
    return int(_call("cuStreamGetPriority", d.CUstream(stream)))


def stream_query(ordinal: int, stream: int) -> bool:
    """True when all work submitted to the stream has completed."""
    d = _load("driver")
    use_device(ordinal)
    return _status("cuStreamQuery", d.CUstream(stream)) == CUDA_SUCCESS


def stream_synchronize(ordinal: int, stream: int) -> None:
    """Block until the stream's work completes."""
    d = _load("driver")
    use_device(ordinal)
    _call("cuStreamSynchronize", d.CUstream(stream))


def stream_wait_event(ordinal: int, stream: int, event: int) -> None:
    """Make future work on ``stream`` wait for ``event`` (device side, non-blocking)."""
    d = _load("driver")
    use_device(ordinal)
    _call("cuStreamWaitEvent", d.CUstream(stream), d.CUevent(event), 0)


def stream_destroy(ordinal: int, stream: int) -> None:
    """``cuStreamDestroy``."""
    d = _load("driver")
    use_device(ordinal)
    _call("cuStreamDestroy", d.CUstream(stream))


# -- events -----------------------------------------------------------------------------


def event_create(ordinal: int, flags: int) -> int:
    """``cuEventCreate`` with EVENT_* flags; returns the handle as an int."""
    use_device(ordinal)
    return int(_call("cuEventCreate", flags))


def event_record(ordinal: int, event: int, stream: int) -> None:
    """Record ``event`` on ``stream``."""
    d = _load("driver")
    use_device(ordinal)
    _call("cuEventRecord", d.CUevent(event), d.CUstream(stream))


def event_query(ordinal: int, event: int) -> bool:
    """True when the work captured by the event has completed."""
    d = _load("driver")
    use_device(ordinal)
    return _status("cuEventQuery", d.CUevent(event)) == CUDA_SUCCESS


def event_synchronize(ordinal: int, event: int) -> None:
    """Block the calling thread until the event completes."""
    d = _load("driver")
    use_device(ordinal)
    _call("cuEventSynchronize", d.CUevent(event))


def event_elapsed_ms(ordinal: int, start: int, end: int) -> float:
    """Milliseconds between two completed timing events."""
    d = _load("driver")
    use_device(ordinal)
    return float(_call("cuEventElapsedTime", d.CUevent(start), d.CUevent(end)))


def event_destroy(ordinal: int, event: int) -> None:
    """``cuEventDestroy``."""
    d = _load("driver")
    use_device(ordinal)
    _call("cuEventDestroy", d.CUevent(event))


def event_ipc_handle(ordinal: int, event: int) -> bytes:
    """The 64-byte IPC handle of an interprocess event."""
    d = _load("driver")
    use_device(ordinal)
    handle = _call("cuIpcGetEventHandle", d.CUevent(event))
    return ctypes.string_at(handle.getPtr(), IPC_EVENT_HANDLE_SIZE)


def event_from_ipc_handle(ordinal: int, handle: bytes) -> int:
    """Open an event exported by another process; returns the handle as an int."""
    d = _load("driver")
    if len(handle) != IPC_EVENT_HANDLE_SIZE:
        raise ValueError(f"an IPC event handle has {IPC_EVENT_HANDLE_SIZE} bytes")
    use_device(ordinal)
    h = d.CUipcEventHandle()
    ctypes.memmove(h.getPtr(), bytes(handle), IPC_EVENT_HANDLE_SIZE)
    return int(_call("cuIpcOpenEventHandle", h))


# -- memory -----------------------------------------------------------------------------


def mem_alloc(ordinal: int, nbytes: int) -> int:
    """``cuMemAlloc``; raises CudaDriverError (code 2) when out of memory."""
    use_device(ordinal)
    return int(_call("cuMemAlloc", nbytes))


def mem_free(ordinal: int, address: int) -> None:
    """``cuMemFree``."""
    d = _load("driver")
    use_device(ordinal)
    _call("cuMemFree", d.CUdeviceptr(address))


def mem_get_info(ordinal: int) -> tuple[int, int]:
    """(free, total) bytes of the device's global memory."""
    use_device(ordinal)
    free, total = _call("cuMemGetInfo")
    return int(free), int(total)


def memcpy_htod_async(ordinal: int, dst: int, src_host: int, nbytes: int, stream: int) -> None:
    """Copy host (address) to device; asynchronous only when the host side is pinned."""
    d = _load("driver")
    use_device(ordinal)
    _call("cuMemcpyHtoDAsync", d.CUdeviceptr(dst), src_host, nbytes, d.CUstream(stream))


def memcpy_dtoh_async(ordinal: int, dst_host: int, src: int, nbytes: int, stream: int) -> None:
    """Copy device to host (address); asynchronous only when the host side is pinned."""
    d = _load("driver")
    use_device(ordinal)
    _call("cuMemcpyDtoHAsync", dst_host, d.CUdeviceptr(src), nbytes, d.CUstream(stream))


def memcpy_dtod_async(ordinal: int, dst: int, src: int, nbytes: int, stream: int) -> None:
    """Copy device to device (peer copies included, with unified addressing)."""
    d = _load("driver")
    use_device(ordinal)
    _call("cuMemcpyDtoDAsync", d.CUdeviceptr(dst), d.CUdeviceptr(src), nbytes,
          d.CUstream(stream))


def memcpy_peer_async(dst_ordinal: int, dst: int, src_ordinal: int, src: int, nbytes: int,
                      stream: int, stream_ordinal: int) -> None:
    """``cuMemcpyPeerAsync``: copy between the memory of two devices on ``stream`` (a
    stream of ``stream_ordinal``); with peer access enabled the copy engines move the
    bytes over the peer link, otherwise the driver stages them through the host."""
    d = _load("driver")
    use_device(stream_ordinal)
    _call("cuMemcpyPeerAsync", d.CUdeviceptr(dst), _primary_context(dst_ordinal),
          d.CUdeviceptr(src), _primary_context(src_ordinal), nbytes, d.CUstream(stream))


def memset_async(ordinal: int, dst: int, value: int, count: int, width: int, stream: int) -> None:
    """Set ``count`` elements of ``width`` bytes (1, 2 or 4) to ``value``."""
    fn = _MEMSETS[width]
    if _tls.device != ordinal:
        use_device(ordinal)
    # raw integer handles, as launches pass them (no CUdeviceptr/CUstream objects)
    code = int(getattr(_load("driver"), fn)(dst, value, count, stream)[0])
    if code != CUDA_SUCCESS:
        raise CudaDriverError(fn, code, *_describe(code))


_MEMSETS = {1: "cuMemsetD8Async", 2: "cuMemsetD16Async", 4: "cuMemsetD32Async"}


def host_alloc(nbytes: int, portable: bool = True) -> int:
    """Page-locked host memory (``cuMemHostAlloc``), mapped into every context."""
    use_device(_tls_device_or_zero())
    flags = 0x1 if portable else 0  # CU_MEMHOSTALLOC_PORTABLE
    return int(_call("cuMemHostAlloc", nbytes, flags))


def host_free(address: int) -> None:
    """``cuMemFreeHost``."""
    use_device(_tls_device_or_zero())
    _call("cuMemFreeHost", address)


def host_register(address: int, nbytes: int, flags: int = 0) -> None:
    """Page-lock existing host memory (``cuMemHostRegister``)."""
    use_device(_tls_device_or_zero())
    _call("cuMemHostRegister", address, nbytes, flags)


def host_unregister(address: int) -> None:
    """Undo :func:`host_register` (``cuMemHostUnregister``)."""
    use_device(_tls_device_or_zero())
    _call("cuMemHostUnregister", address)


def _tls_device_or_zero() -> int:
    device = _tls.device
    return 0 if device is None else device


# -- modules and launches ---------------------------------------------------------------


def module_load(ordinal: int, image: bytes) -> int:
    """Load a cubin or PTX image into the device's primary context.

    A kernel first used inside a graph capture is loaded then: the load runs in the
    relaxed capture mode, where the driver permits it (it is not captured).
    """
    use_device(ordinal)
    d = _load("driver")
    old = _call("cuThreadExchangeStreamCaptureMode", d.CUstreamCaptureMode(2))
    try:
        return int(_call("cuModuleLoadData", image))
    finally:
        _call("cuThreadExchangeStreamCaptureMode", old)


def module_function(module: int, name: str) -> int:
    """A kernel handle by its (extern "C") name (looked up in the relaxed capture mode,
    like the load, so a first use inside a capture is allowed)."""
    d = _load("driver")
    old = _call("cuThreadExchangeStreamCaptureMode", d.CUstreamCaptureMode(2))
    try:
        return int(_call("cuModuleGetFunction", d.CUmodule(module), name.encode()))
    finally:
        _call("cuThreadExchangeStreamCaptureMode", old)


# The profiler's kernel observer (refimpl.profiler._cuda), called as
# ``observer(ordinal, function, stream, before)`` around each launch while a profile with
# the CUDA activity records; None otherwise (one check per launch).
LAUNCH_OBSERVER = None


def launch(ordinal: int, function: int, grid: tuple[int, int, int],
           block: tuple[int, int, int], args: list[ctypes._SimpleCData | ctypes.Structure],
           stream: int, shared_mem: int = 0) -> None:
    """``cuLaunchKernel`` with arguments given as ctypes values (scalars or structs).

    The parameter array holds one pointer per argument; the driver copies each
    argument out of it at launch, so the ctypes objects only need to live until this
    call returns.
    """
    ptrs = (ctypes.c_void_p * max(len(args), 1))(
        *[ctypes.addressof(a) for a in args])
    if _tls.device != ordinal:
        use_device(ordinal)
    observer = LAUNCH_OBSERVER
    if observer is not None:
        observer(ordinal, function, stream, True)
    # raw handles, as launch_1d passes them (no CUfunction/CUstream objects per launch)
    code = int(_load("driver").cuLaunchKernel(function, grid[0], grid[1], grid[2], block[0],
                                              block[1], block[2], shared_mem, stream,
                                              ctypes.addressof(ptrs), 0)[0])
    if observer is not None:
        observer(ordinal, function, stream, False)
    if code != CUDA_SUCCESS:
        raise CudaDriverError("cuLaunchKernel", code, *_describe(code))


class ParamLayout:
    """How one kernel signature's arguments are packed for :func:`launch_packed`.

    ``fmt`` spells the kernel's parameters in order, one ``struct`` code each: ``P`` a
    pointer, ``q`` a ``long long``, ``i`` an ``int``, ``f`` a ``float``, ``d`` a
    ``double``, ``<n>s`` a struct of ``n`` bytes passed by value. Each thread packs into
    a buffer of its own, and the ``kernelParams`` array (one pointer per parameter, into
    that buffer) is built once with it: a launch is one ``pack_into`` and the driver
    call, where ctypes values cost one object per argument and an array per launch.
    The driver copies the values at launch (and into the node, when a graph captures
    it), so the buffer is free again as soon as the call returns.
    """

    def __init__(self, fmt: str) -> None:
        import struct

        self.fmt = fmt
        self.struct = struct.Struct("@" + fmt.replace("P", "Q"))
        self.sizes: list[int] = []
        self.offsets: list[int] = []
        prefix = "@"
        for code in _param_codes(fmt):
            prefix += code
            size = struct.calcsize("@" + code)
            self.offsets.append(struct.calcsize(prefix) - size)
            self.sizes.append(size)
        self.local = threading.local()
        self.checked: set[int] = set()  # functions whose parameters matched the layout

    def buffers(self) -> tuple[ctypes.Array, int]:
        """This thread's (value buffer, address of its kernelParams array)."""
        bufs = getattr(self.local, "bufs", None)
        if bufs is None:
            data = ctypes.create_string_buffer(max(self.struct.size, 1))
            base = ctypes.addressof(data)
            array = (ctypes.c_void_p * max(len(self.offsets), 1))(
                *[base + off for off in self.offsets])
            bufs = self.local.bufs = (data, ctypes.addressof(array), array)
        return bufs[0], bufs[1]

    def check(self, function: int, name: str) -> None:
        """Compare the layout with the kernel's own parameters (``cuFuncGetParamInfo``),
        once per function: a wrong count or size raises instead of launching garbage."""
        d = _load("driver")
        query = getattr(d, "cuFuncGetParamInfo", None)
        if query is not None:
            sizes = []
            while True:
                out = query(d.CUfunction(function), len(sizes))
                if int(out[0]) != CUDA_SUCCESS:
                    break
                sizes.append(int(out[2]))
            if sizes and sizes != self.sizes:
                raise RuntimeError(
                    f"kernel parameters of {name} do not match the launch layout "
                    f"'{self.fmt}': the kernel takes sizes {sizes}, the launch packs "
                    f"{self.sizes}")
        self.checked.add(function)


def _param_codes(fmt: str) -> list[str]:
    """The codes of a layout, a byte count kept with its ``s``."""
    codes, digits = [], ""
    for ch in fmt:
        if ch.isdigit():
            digits += ch
            continue
        codes.append(digits + ch)
        digits = ""
    return codes


_LAYOUTS: dict[str, ParamLayout] = {}


def param_layout(fmt: str) -> ParamLayout:
    """The shared :class:`ParamLayout` of ``fmt``."""
    layout = _LAYOUTS.get(fmt)
    if layout is None:
        layout = _LAYOUTS.setdefault(fmt, ParamLayout(fmt))
    return layout


_LAUNCH = None  # cuda.bindings.driver.cuLaunchKernel, bound on the first launch


def _launch_kernel():
    global _LAUNCH
    _LAUNCH = _load("driver").cuLaunchKernel
    return _LAUNCH


def launch_packed(ordinal: int, function: int, grid: tuple[int, int, int],
                  block: tuple[int, int, int], fmt: str, values, stream: int,
                  shared_mem: int = 0, name: str = "kernel") -> None:
    """``cuLaunchKernel`` with the arguments ``values`` (plain ints, floats and bytes,
    pointers as ints, 0 for NULL) packed by the layout ``fmt`` (see :class:`ParamLayout`).
    The first launch of each function checks the layout against the kernel."""
    layout = _LAYOUTS.get(fmt) or param_layout(fmt)
    if _tls.device != ordinal:
        use_device(ordinal)
    if function not in layout.checked:
        layout.check(function, name)
    data, params = layout.buffers()
    layout.struct.pack_into(data, 0, *values)
    observer = LAUNCH_OBSERVER
    if observer is not None:
        observer(ordinal, function, stream, True)
    code = int((_LAUNCH or _launch_kernel())(function, grid[0], grid[1], grid[2], block[0],
                                             block[1], block[2], shared_mem, stream,
                                             params, 0)[0])
    if observer is not None:
        observer(ordinal, function, stream, False)
    if code != CUDA_SUCCESS:
        raise CudaDriverError("cuLaunchKernel", code, *_describe(code))


def launch_1d(ordinal: int, function: int, grid: int, block: int, params: int,
              stream: int) -> None:
    """``cuLaunchKernel`` on a 1-D grid with a prebuilt ``kernelParams`` array address.

    The hot path of elementwise kernels: no handle objects, no argument list built
    per call (the caller keeps the parameter buffers alive across the call).
    """
    if _tls.device != ordinal:
        use_device(ordinal)
    observer = LAUNCH_OBSERVER
    if observer is not None:
        observer(ordinal, function, stream, True)
    # raw integer handles (measured cheaper than libcuda's symbol called through ctypes)
    code = int((_LAUNCH or _launch_kernel())(function, grid, 1, 1, block, 1, 1, 0, stream,
                                             params, 0)[0])
    if observer is not None:
        observer(ordinal, function, stream, False)
    if code != CUDA_SUCCESS:
        raise CudaDriverError("cuLaunchKernel", code, *_describe(code))


# -- NVRTC ------------------------------------------------------------------------------


class NvrtcError(RuntimeError):
    """An NVRTC call failed; a compile failure carries the program log."""


def _nvrtc_call(name: str, *args: Any) -> Any:
    n = _load("nvrtc")
    try:
        out = getattr(n, name)(*args)
    except RuntimeError as exc:
        if _is_missing_library(exc):
            raise NvrtcError(f"{name} failed: NVRTC library not found ({exc})") from exc
        raise
    code = int(out[0])
    if code != 0:
        _err, text = n.nvrtcGetErrorString(out[0])
        raise NvrtcError(f"{name} failed: {n.nvrtcResult(code).name} ({text.decode()})")
    if len(out) == 1:
        return None
    return out[1] if len(out) == 2 else tuple(out[1:])


def nvrtc_version() -> tuple[int, int]:
    """(major, minor) of the loaded NVRTC."""
    major, minor = _nvrtc_call("nvrtcVersion")
    return int(major), int(minor)


def nvrtc_supported_archs() -> list[int]:
    """The ``sm_XY`` numbers this NVRTC can target (``[75, 80, ..., 120]``)."""
    return [int(a) for a in _nvrtc_call("nvrtcGetSupportedArchs")]


def nvrtc_compile(source: str, name: str, options: list[str], cubin: bool) -> bytes:
    """Compile CUDA C source; returns a cubin (real arch) or NUL-terminated PTX."""
    prog = _nvrtc_call("nvrtcCreateProgram", source.encode(), name.encode(), 0, [], [])
    try:
        opts = [o.encode() for o in options]
        try:
            _nvrtc_call("nvrtcCompileProgram", prog, len(opts), opts)
        except NvrtcError as exc:
            size = _nvrtc_call("nvrtcGetProgramLogSize", prog)
            log = b" " * size
            _nvrtc_call("nvrtcGetProgramLog", prog, log)
            raise NvrtcError(f"{exc}\n{log.decode(errors='replace').rstrip(chr(0))}") from None
        kind = "CUBIN" if cubin else "PTX"
        size = _nvrtc_call(f"nvrtcGet{kind}Size", prog)
        image = b" " * size
        _nvrtc_call(f"nvrtcGet{kind}", prog, image)
        return image
    finally:
        _nvrtc_call("nvrtcDestroyProgram", prog)


# -- graphs: stream capture, instantiate, launch ------------------------------------------

# CUstreamCaptureMode values, by the names torch's capture_error_mode uses
CAPTURE_MODES = {"global": 0, "thread_local": 1, "relaxed": 2}
_CAPTURE_MODE_NAMES = {v: k for k, v in CAPTURE_MODES.items()}
CAPTURE_STATUS_NONE, CAPTURE_STATUS_ACTIVE, CAPTURE_STATUS_INVALIDATED = 0, 1, 2


def stream_begin_capture(ordinal: int, stream: int, mode: str) -> None:
    """``cuStreamBeginCapture`` with the mode named ``global``/``thread_local``/``relaxed``."""
    d = _load("driver")
    use_device(ordinal)
    _call("cuStreamBeginCapture", d.CUstream(stream), d.CUstreamCaptureMode(CAPTURE_MODES[mode]))


def stream_end_capture(ordinal: int, stream: int) -> int:
    """``cuStreamEndCapture``: the captured graph's handle (0 when the capture failed)."""
    d = _load("driver")
    use_device(ordinal)
    return int(_call("cuStreamEndCapture", d.CUstream(stream)))


def stream_capture_info(ordinal: int, stream: int) -> tuple[int, int]:
    """(capture status, capture id) of a stream; the id is 0 unless the status is active."""
    d = _load("driver")
    if _tls.device != ordinal:
        use_device(ordinal)
    out = _call("cuStreamGetCaptureInfo", d.CUstream(stream))
    status = int(out[0])
    return status, (int(out[1]) if status == CAPTURE_STATUS_ACTIVE else 0)


def exchange_capture_mode(mode: str) -> str:
    """``cuThreadExchangeStreamCaptureMode``: set this thread's mode, return the old one."""
    d = _load("driver")
    old = _call("cuThreadExchangeStreamCaptureMode", d.CUstreamCaptureMode(CAPTURE_MODES[mode]))
    return _CAPTURE_MODE_NAMES[int(old)]


def graph_node_count(graph: int) -> int:
    """The number of nodes of a graph."""
    d = _load("driver")
    out = _call("cuGraphGetNodes", d.CUgraph(graph), 0)
    return int(out[1]) if isinstance(out, tuple) else int(out)


def graph_instantiate(ordinal: int, graph: int) -> int:
    """``cuGraphInstantiate``: an executable graph's handle."""
    d = _load("driver")
    use_device(ordinal)
    return int(_call("cuGraphInstantiate", d.CUgraph(graph), 0))


def graph_launch(ordinal: int, graph_exec: int, stream: int) -> None:
    """``cuGraphLaunch`` of an executable graph on a stream."""
    d = _load("driver")
    use_device(ordinal)
    _call("cuGraphLaunch", d.CUgraphExec(graph_exec), d.CUstream(stream))


def graph_destroy(graph: int) -> None:
    """``cuGraphDestroy``."""
    d = _load("driver")
    _call("cuGraphDestroy", d.CUgraph(graph))


def graph_exec_destroy(graph_exec: int) -> None:
    """``cuGraphExecDestroy``."""
    d = _load("driver")
    _call("cuGraphExecDestroy", d.CUgraphExec(graph_exec))


def graph_debug_dot_print(graph: int, path: str) -> None:
    """``cuGraphDebugDotPrint``: write the graph as Graphviz DOT to ``path``."""
    d = _load("driver")
    _call("cuGraphDebugDotPrint", d.CUgraph(graph), path.encode(), 1)
