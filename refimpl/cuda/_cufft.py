"""Discrete Fourier transforms on cuFFT: plans, the per-device plan cache, execution
(spec TENSOR-FFT-006).

cuFFT is reached through ``nvmath.bindings.cufft`` (``nvmath-python``, as cuBLAS is in
``_blas.py``): one call per C function, integers for plans and device addresses. It is
imported when the first CUDA transform runs, so CPU-only installs never load it.

Conventions (torch's CUDA FFT backend behaves the same way):

* A plan is made with ``cufftMakePlanMany64`` for a batch of contiguous signals of up to
  three dims (the basic data layout: no embeddings). Plans live in a per-device LRU
  cache (``refimpl.backends.cuda.cufft_plan_cache[device]``: ``size``, ``max_size``,
  default 4096, ``clear()``), keyed by transform type, signal sizes and batch.
* Plans do not allocate their own work area (``cufftSetAutoAllocation(0)``): each
  execution takes one from refimpl's caching allocator on the current stream and binds
  it with ``cufftSetWorkArea``, and the plan is bound to that stream with
  ``cufftSetStream``. During a CUDA graph capture the work area therefore comes from
  the graph's private pool and the transform is captured into the graph.
* The transformed dims are moved last into a fresh contiguous buffer first (any input
  strides are accepted), unless the input is already laid out so: complex to complex
  and real to complex then read it in place and write a fresh output. More than three dims are transformed three at a time for
  complex to complex; the two-sided real to complex transform runs as complex to
  complex on the input made complex; c2r (which cuFFT lets overwrite its input) always
  reads a private copy. Normalization is one scaling kernel afterwards.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.cuda import _device, _driver, _tensor_ops, streams
from refimpl.cuda._lazy import _lazy_init

DEFAULT_CACHE_SIZE = 4096
MAX_PLAN_NUM = 2**63 - 1
_FORWARD, _INVERSE = -1, 1
_MAX_RANK = 3

_cufft = None


def _lib():
    """``nvmath.bindings.cufft``, imported on first use with a clear error if missing."""
    global _cufft
    if _cufft is None:
        try:
            from nvmath.bindings import cufft
        except ImportError as exc:
            raise RuntimeError(
                "refimpl computes CUDA FFTs with cuFFT through the 'nvmath-python' package, "
                f"which could not be imported ({exc}); install it with "
                "`pip install nvmath-python`") from exc
        _cufft = cufft
    return _cufft


def version() -> int:
    """The loaded cuFFT library's version (``cufftGetVersion``)."""
    return int(_lib().get_version())


# -- plans and their cache ---------------------------------------------------------------

class _Plan:
    """One cuFFT plan (a ``cufftHandle``) and the work area size it needs."""

    def __init__(self, device: int, kind: str, sizes: tuple, batch: int) -> None:
        cufft = _lib()
        _driver.use_device(device)
        self.kind = kind
        self.handle = cufft.create()
        try:
            cufft.set_auto_allocation(self.handle, 0)
            in_dist = out_dist = math.prod(sizes)
            half = math.prod(sizes[:-1]) * (sizes[-1] // 2 + 1)
            if kind in ("R2C", "D2Z"):
                out_dist = half
            elif kind in ("C2R", "Z2D"):
                in_dist = half
            self.work_size = int(cufft.make_plan_many64(
                self.handle, len(sizes), list(sizes), 0, 1, in_dist, 0, 1, out_dist,
                int(getattr(cufft.Type, kind)), batch))
        except BaseException:
            cufft.destroy(self.handle)
            raise
        self.lock = threading.Lock()

    def destroy(self) -> None:
        """Release the plan (``cufftDestroy``)."""
        if self.handle:
            _lib().destroy(self.handle)
            self.handle = 0

    def execute(self, src: Tensor, dst: Tensor, direction: int) -> None:
        """Run the plan from ``src`` into ``dst`` (contiguous CUDA tensors) on the current
        stream, with a work area from the caching allocator."""
        cufft = _lib()
        index = dst._storage._data.device_index
        stream = streams.current_stream(index).cuda_stream
        work = None
        if self.work_size:
            from refimpl._device import device as _dev

            work = Tensor._empty((self.work_size,), D.uint8, _dev("cuda", index))
        _driver.use_device(index)
        with self.lock:
            cufft.set_stream(self.handle, int(stream))
            if work is not None:
                cufft.set_work_area(self.handle, _ptr(work))
            i, o = _ptr(src), _ptr(dst)
            kind = self.kind
            if kind == "C2C":
                cufft.exec_c2c(self.handle, i, o, direction)
            elif kind == "Z2Z":
                cufft.exec_z2z(self.handle, i, o, direction)
            elif kind == "R2C":
                cufft.exec_r2c(self.handle, i, o)
            elif kind == "D2Z":
                cufft.exec_d2z(self.handle, i, o)
            elif kind == "C2R":
                cufft.exec_c2r(self.handle, i, o)
            else:
                cufft.exec_z2d(self.handle, i, o)
        # ``work`` goes back to the allocator now: its block is reused only by later
        # work on this stream, which runs after the transform


class PlanCache:
    """The cuFFT plans of one device, least recently used first out.

    ``size`` is the number of cached plans (read-only); ``max_size`` the capacity
    (``0 <= max_size``; 0 keeps no plan); ``clear()`` destroys them all.
    """

    def __init__(self, device_index: int) -> None:
        self.device_index = device_index
        self._plans: OrderedDict[tuple, _Plan] = OrderedDict()
        self._max = DEFAULT_CACHE_SIZE
        self._lock = threading.Lock()

    @property
    def size(self) -> int:
        """The number of plans in the cache."""
        return len(self._plans)

    @size.setter
    def size(self, value) -> None:
        raise RuntimeError(
            ".size is a read-only property showing the number of plans currently in the "
            "cache. To change the cache capacity, set cufft_plan_cache.max_size.")

    @property
    def max_size(self) -> int:
        """How many plans the cache keeps (default 4096)."""
        return self._max

    @max_size.setter
    def max_size(self, value: int) -> None:
        value = int(value)
        if value < 0:
            raise RuntimeError(f"cuFFT plan cache size must be non-negative, but got {value}")
        if value > MAX_PLAN_NUM:
            raise RuntimeError(f"cuFFT plan cache size can not be larger than {MAX_PLAN_NUM}, "
                               f"but got {value}")
        with self._lock:
            self._max = value
            self._evict()

    def clear(self) -> None:
        """Destroy every cached plan."""
        with self._lock:
            while self._plans:
                self._plans.popitem()[1].destroy()

    def _evict(self) -> None:
        while len(self._plans) > self._max:
            self._plans.popitem(last=False)[1].destroy()

    def execute(self, kind: str, sizes: tuple, batch: int, src: Tensor, dst: Tensor,
                direction: int) -> None:
        """Run the plan for ``batch`` signals of ``sizes`` (made on a miss, kept unless
        ``max_size`` is 0) from ``src`` into ``dst``."""
        key = (kind, sizes, batch)
        with self._lock:
            plan = self._plans.get(key)
            if plan is not None:
                self._plans.move_to_end(key)
        if plan is None:
            plan = _Plan(self.device_index, kind, sizes, batch)
            with self._lock:
                if self._max:
                    self._plans[key] = plan
                    self._evict()
        plan.execute(src, dst, direction)
        if not self._max:
            plan.destroy()


class PlanCacheManager:
    """``refimpl.backends.cuda.cufft_plan_cache``: ``[device]`` gives that device's
    ``PlanCache``; attributes read and written on the manager itself are the current
    device's."""

    def __init__(self) -> None:
        object.__setattr__(self, "_caches", {})

    def __getitem__(self, device) -> PlanCache:
        index = _device._get_device_index(device)
        count = _device.device_count()
        if index < 0 or index >= count:
            raise RuntimeError(f"cufft_plan_cache: expected 0 <= device index < {count}, "
                               f"but got device with index {index}")
        cache = self._caches.get(index)
        if cache is None:
            cache = self._caches.setdefault(index, PlanCache(index))
        return cache

    def __getattr__(self, name: str):
        return getattr(self[_device.current_device()], name)

    def __setattr__(self, name: str, value) -> None:
        setattr(self[_device.current_device()], name, value)


cufft_plan_cache = PlanCacheManager()


# -- transforms --------------------------------------------------------------------------

def _ptr(t: Tensor) -> int:
    return t._storage._data.ptr + t._offset * t.dtype.itemsize


def _fresh(shape: tuple, dtype: D.dtype, like: Tensor) -> Tensor:
    return Tensor._empty(tuple(shape), dtype, like._storage.device)


def _view(x: Tensor, order: list[int]) -> Tensor:
    """``x`` with its dims in ``order`` (no copy)."""
    return Tensor._make(x._storage, tuple(x._shape[d] for d in order),
                        tuple(x._stride[d] for d in order), x._offset, x.dtype)


def _copy_into(dst: Tensor, src: Tensor) -> Tensor:
    _tensor_ops.copy_(dst, src)
    return dst


def _moved(x: Tensor, dims: tuple, dtype: D.dtype | None = None,
           last: int | None = None, reuse: bool = False) -> tuple[Tensor, list[int]]:
    """A fresh contiguous copy of ``x`` with the other dims first and ``dims`` last (in
    ``dims``' order), converted to ``dtype``; with ``last``, the last of ``dims`` cut or
    zero-padded to that length. Returns it and the dim order used. With ``reuse``, a view
    of ``x`` that is already laid out so is returned as it is (no copy): the caller must
    then not write into it."""
    order = [d for d in range(x.dim()) if d not in dims] + list(dims)
    view = _view(x, order)
    if (reuse and (dtype is None or dtype is x.dtype) and last is None
            and view.is_contiguous()):
        return view, order
    shape = list(view._shape)
    if last is not None and last != shape[-1]:
        keep = min(last, shape[-1])
        shape[-1] = last
        buf = _fresh(shape, dtype or x.dtype, x)
        _tensor_ops.fill_(buf, 0)
        cut = list(view._shape[:-1]) + [keep]
        _copy_into(Tensor._make(buf._storage, tuple(cut), buf._stride, 0, buf.dtype),
                   Tensor._make(view._storage, tuple(cut), view._stride, view._offset,
                                view.dtype))
        return buf, order
    return _copy_into(_fresh(shape, dtype or x.dtype, x), view), order


def _restored(y: Tensor, order: list[int]) -> Tensor:
    """``y`` (dims in ``order``) back in the original dim order, contiguous."""
    if order == sorted(order):
        return y
    inverse = [order.index(d) for d in range(len(order))]
    view = _view(y, inverse)
    return _copy_into(_fresh(view._shape, y.dtype, y), view)


def _cache(x: Tensor) -> PlanCache:
    return cufft_plan_cache[x._storage._data.device_index]


def _run(x: Tensor, nsig: int, kind: str, out_shape: tuple, out_dtype: D.dtype,
         direction: int, in_place: bool) -> Tensor:
    """One plan over the last ``nsig`` dims of the contiguous ``x``."""
    batch = math.prod(x._shape[:x.dim() - nsig])
    sizes = tuple(out_shape[-nsig:]) if kind in ("C2R", "Z2D") else tuple(x._shape[-nsig:])
    out = x if in_place else _fresh(out_shape, out_dtype, x)
    _cache(x).execute(kind, sizes, batch, x, out, direction)
    return out


def _scale(y: Tensor, factor: float) -> Tensor:
    if factor != 1.0:
        from refimpl.cuda._pointwise import pointwise

        value = complex(factor) if y.dtype.is_complex else factor
        pointwise("a * s", [y], y.dtype, params={"s": (value, y.dtype)}, out=y)
    return y


def _c2c_raw(x: Tensor, dims: tuple, forward: bool) -> Tensor:
    """The unnormalized complex transform over ``dims``, three dims per plan."""
    kind = "C2C" if x.dtype is D.complex64 else "Z2Z"
    direction = _FORWARD if forward else _INVERSE
    rest, chunk = dims[:-_MAX_RANK], dims[-_MAX_RANK:]
    buf, order = _moved(x, chunk, reuse=True)
    # a complex transform out of place leaves its input as it was: transform in place
    # only into a private copy
    private = buf._storage is not x._storage
    y = _restored(_run(buf, len(chunk), kind, buf._shape, buf.dtype, direction, private),
                  order)
    return _c2c_raw(y, rest, forward) if rest else y


def _empty_result(shape: tuple, dtype: D.dtype, like: Tensor) -> Tensor:
    out = _fresh(shape, dtype, like)
    _tensor_ops.fill_(out, 0)
    return out


def c2c(x: Tensor, dims: tuple, normalization: int, forward: bool) -> Tensor:
    """``_fft_c2c`` on a CUDA tensor (complex64 or complex128)."""
    from refimpl.ops.fft import scale_of

    _lazy_init()
    if x.numel() == 0:
        return _empty_result(x._shape, x.dtype, x)
    if not dims:
        return _copy_into(_fresh(x._shape, x.dtype, x), x)
    y = _c2c_raw(x, dims, forward)  # a fresh buffer: the input is never written
    return _scale(y, scale_of(normalization, [x._shape[d] for d in dims]))


def r2c(x: Tensor, dims: tuple, normalization: int, onesided: bool) -> Tensor:
    """``_fft_r2c`` on a CUDA tensor (float32 or float64)."""
    from refimpl.ops.fft import complex_of, scale_of

    _lazy_init()
    cdt = complex_of(x.dtype)
    shape = list(x._shape)
    if onesided and dims:
        shape[dims[-1]] = shape[dims[-1]] // 2 + 1
    if x.numel() == 0:
        return _empty_result(tuple(shape), cdt, x)
    factor = scale_of(normalization, [x._shape[d] for d in dims])
    if not onesided or not dims:
        # the two-sided output is the complex transform of the input made complex
        as_complex = _copy_into(_fresh(x._shape, cdt, x), x)
        y = _c2c_raw(as_complex, dims, True) if dims else as_complex
        return _scale(y, factor)
    last = dims[-1:]
    buf, order = _moved(x, last, reuse=True)  # real to complex reads its input only
    kind = "R2C" if x.dtype is D.float32 else "D2Z"
    half = tuple(buf._shape[:-1]) + (buf._shape[-1] // 2 + 1,)
    y = _restored(_run(buf, 1, kind, half, cdt, _FORWARD, False), order)
    if len(dims) > 1:
        y = _c2c_raw(y, dims[:-1], True)
    return _scale(y, factor)


def c2r(x: Tensor, dims: tuple, normalization: int, last_dim_size: int) -> Tensor:
    """``_fft_c2r`` on a CUDA tensor (complex64 or complex128)."""
    from refimpl.ops.fft import real_of, scale_of

    _lazy_init()
    rdt = real_of(x.dtype)
    shape = list(x._shape)
    shape[dims[-1]] = last_dim_size
    if x.numel() == 0 or 0 in shape:
        return _empty_result(tuple(shape), rdt, x)
    sizes = [shape[d] for d in dims]
    if len(dims) > 1:
        x = _c2c_raw(x, dims[:-1], False)
    buf, order = _moved(x, dims[-1:], last=last_dim_size // 2 + 1)
    kind = "C2R" if x.dtype is D.complex64 else "Z2D"
    out_shape = tuple(buf._shape[:-1]) + (last_dim_size,)
    y = _restored(_run(buf, 1, kind, out_shape, rdt, _INVERSE, False), order)
    return _scale(y, scale_of(normalization, sizes))
