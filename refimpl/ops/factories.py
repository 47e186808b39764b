"""Factories: tensors made from data or from a shape (spec: TENSOR-200 and following)."""

from __future__ import annotations

import contextlib
import math

import numpy as np

from refimpl import _device, _dispatch
from refimpl import _dtype as D
from refimpl._device import as_device, cuda_device, resolve
from refimpl._dispatch import MODE_STACK
from refimpl._memory_format import factory_strides, like_strides, relaid
from refimpl._tensor import Tensor
from refimpl.ops._registry import TensorSpec, defop


def _empty_meta(shape, *, dtype, device, zeroed: bool = False) -> TensorSpec:
    return TensorSpec(tuple(shape), dtype, device)


def _empty_cpu(shape, *, dtype, device, zeroed: bool = False) -> np.ndarray:
    if dtype is D.complex32:
        raise NotImplementedError("refimpl does not implement complex32 tensors")
    # zeros come from calloc, which is cheaper than filling; empty leaves memory as is
    return np.zeros(shape, dtype=dtype.np) if zeroed else np.empty(shape, dtype=dtype.np)


def _empty_cuda(shape, *, dtype, device, zeroed: bool = False) -> Tensor:
    t = Tensor._empty(shape, dtype, device)
    if zeroed and t.numel():
        from refimpl.cuda import _tensor_ops

        _tensor_ops.fill_(t, 0)
    return t


# The one factory every shaped constructor goes through, so that python modes (fake
# tensors) see tensor creation like any other op.
empty_op = defop("empty", kind="factory", meta=_empty_meta, cpu=_empty_cpu, cuda=_empty_cuda,
                 differentiable=False, extra={"method": False})


def _infer_dtype(data) -> D.dtype:
    """The dtype torch.tensor infers from Python data (bool < int < float < complex)."""
    if isinstance(data, Tensor):
        return data.dtype
    if isinstance(data, np.ndarray):
        return D.from_numpy_dtype(data.dtype)
    if isinstance(data, (np.generic,)):
        return D.from_numpy_dtype(data.dtype)
    if isinstance(data, (list, tuple)):
        best = None
        for x in data:
            d = _infer_dtype(x)
            best = d if best is None else D.promote_types(best, d) if (
                d.category != best.category) else (d if d.category > best.category else best)
        return best if best is not None else D.get_default_dtype()
    return D.scalar_dtype(data)


def _to_nested(data):
    if isinstance(data, Tensor):
        return data.detach().cpu()._np
    if isinstance(data, (list, tuple)):
        return [_to_nested(x) for x in data]
    return data


# Data made on the host by a constructor (torch.tensor, arange, ...) is handed to the
# python modes as torch does (aten.lift_fresh): a fake mode turns it into a fake tensor.
lift_fresh = defop("lift_fresh", meta=lambda self: TensorSpec(self._shape, self.dtype, self.device),
                   cpu=lambda self: self, cuda=lambda self: self, differentiable=False,
                   extra={"method": False})


def _finish(t: Tensor, dev, requires_grad: bool, pin_memory: bool = False) -> Tensor:
    from refimpl._dispatch import MODE_STACK

    if MODE_STACK:
        t = lift_fresh(t)
    dev = resolve(dev) if dev is not None else _device.DEFAULT
    if dev.type != "cpu":
        from refimpl.ops.copy import to_device

        t = to_device(t, dev)
    elif pin_memory:
        t = t.pin_memory()
    if requires_grad:
        t.requires_grad_(True)
    return t


def tensor(data, *, dtype=None, device=None, requires_grad: bool = False,
           pin_memory: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data`` (nested sequences, scalars, arrays)."""
    if isinstance(data, Tensor):
        import warnings

        warnings.warn(
            "To copy construct from a tensor, it is recommended to use "
            "sourceTensor.detach().clone() or sourceTensor.detach().clone()."
            "requires_grad_(True), rather than torch.tensor(sourceTensor).",
            UserWarning, stacklevel=2,
        )
    dt = D.dtype_from_any(dtype) if dtype is not None else _infer_dtype(data)
    if dt is D.complex32:
        raise NotImplementedError("refimpl does not implement complex32 tensors")
    src = _to_nested(data)
    try:
        arr = np.array(src, dtype=dt.np if dt is not D.bfloat16 else np.float64)
    except (ValueError, TypeError) as e:
        raise ValueError(f"could not convert data to a tensor: {e}") from None
    if dt is D.bfloat16:
        arr = arr.astype(dt.np)
    return _finish(Tensor._from_array(np.array(arr, copy=True), dt), device, requires_grad,
                   pin_memory)


def _shape_args(size) -> tuple:
    """A shape from ``f(2, 3)`` or ``f((2, 3))`` style arguments, with torch's checks."""
    if len(size) == 1:
        first = size[0]
        if type(first) is int and first >= 0:
            return (first,)  # the common 1-d case
        if isinstance(first, (tuple, list)):
            size = tuple(first)
    out = []
    for s in size:
        s = int(s)
        if s < 0:
            raise RuntimeError(
                f"Trying to create tensor with negative dimension {s}: {list(size)}"
            )
        out.append(s)
    return tuple(out)


def full(size, fill_value, *, dtype=None, device=None, requires_grad: bool = False,
         pin_memory: bool = False, out=None) -> Tensor:
    """A tensor of ``size`` filled with ``fill_value`` (dtype inferred from it)."""
    shape = _shape_args((size,) if isinstance(size, int) else (tuple(size),))
    dt = D.dtype_from_any(dtype) if dtype is not None else D.scalar_dtype(fill_value)
    dev = resolve(device) if device is not None else _device.DEFAULT
    t = empty_op(shape, dtype=dt, device=dev)
    if t.numel():
        t.fill_(fill_value)
        t._version_counter.version = 0  # a fresh tensor starts at version 0
    if out is not None:
        out.resize_(shape).copy_(t)
        return out
    if pin_memory:
        t = t.pin_memory()
    return t.requires_grad_(True) if requires_grad else t


def _filled(value):
    def factory(*size, dtype=None, device=None, requires_grad: bool = False,
                pin_memory: bool = False, out=None, layout=None, memory_format=None) -> Tensor:
        dt = D.dtype_from_any(dtype) if dtype is not None else D.get_default_dtype()
        dev = resolve(device) if device is not None else _device.DEFAULT
        shape = _shape_args(size)
        strides = factory_strides(shape, memory_format) if memory_format is not None else None
        if dev.type == "cuda" and not MODE_STACK and _dispatch.PROFILE_LAYER is None:
            # as empty() does: no mode or profiler watches, so the kernels are called
            # without dispatch (zeros and ones fit every dtype: no value check to make)
            t = Tensor._empty(shape, dt, dev)
            (_CUDA_FILL or _cuda_fill())(t, value)
        else:
            t = empty_op(shape, dtype=dt, device=dev, zeroed=value == 0)
            if value is not None and value != 0 and t.numel():
                t.fill_(value)
                t._version_counter.version = 0  # a fresh tensor starts at version 0
        t = relaid(t, strides)
        if out is not None:
            out.resize_(t.shape).copy_(t)
            return out
        if pin_memory:
            t = t.pin_memory()
        return t.requires_grad_(True) if requires_grad else t

    return factory


_CUDA_FILL = None  # refimpl.cuda._tensor_ops.fill_, bound on the first CUDA zeros/ones


def _cuda_fill():
    global _CUDA_FILL
    from refimpl.cuda._tensor_ops import fill_ as _CUDA_FILL

    return _CUDA_FILL


zeros = _filled(0)
zeros.__doc__ = "A tensor of zeros of the given shape."
ones = _filled(1)
ones.__doc__ = "A tensor of ones of the given shape."


_cuda_current_index = None  # refimpl.cuda.current_device, bound on first use


def empty(*size, dtype=None, device=None, requires_grad: bool = False,
          pin_memory: bool = False, out=None, layout=None, memory_format=None) -> Tensor:
    """A tensor of the given shape with unspecified contents (zeros on the CPU)."""
    # The most frequent constructor, kept lean: a 1-d shape is taken as given, and on
    # a CUDA device with no python mode active the kernel is called the way the
    # dispatcher's factory fast path calls it (modes still see every other call).
    if len(size) == 1 and type(size[0]) is int and size[0] >= 0:
        shape = size
    else:
        shape = _shape_args(size)
    dt = D._default_dtype if dtype is None else D.dtype_from_any(dtype)  # (no call)
    if device is None:
        dev = _device.DEFAULT  # CPU unless set_default_device chose another
    elif device.__class__ is str and device == "cuda" and not MODE_STACK:
        # resolve("cuda") in two calls instead of five: the current device's object
        global _cuda_current_index
        if _cuda_current_index is None:
            from refimpl.cuda import current_device as _cuda_current_index
        index = _cuda_current_index()
        dev = _device._CUDA.get(index) or cuda_device(index)
    else:
        dev = resolve(device)
    if dev.type == "cuda" and not MODE_STACK and _dispatch.PROFILE_LAYER is None:
        t = Tensor._empty(shape, dt, dev)  # _empty_cuda(zeroed=False), without the call
    else:
        t = empty_op(shape, dtype=dt, device=dev)
    if memory_format is not None:
        t = relaid(t, factory_strides(t._shape, memory_format))
    if out is not None:
        out.resize_(t.shape).copy_(t)
        return out
    if pin_memory:
        t = t.pin_memory()
    return t.requires_grad_(True) if requires_grad else t


def from_numpy(array: np.ndarray) -> Tensor:
    """A CPU tensor sharing memory with ``array`` (writes are visible both ways)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    dt = D.from_numpy_dtype(array.dtype)
    item = array.itemsize
    if any(s < 0 for s in array.strides):
        raise ValueError(
            "At least one stride in the given numpy array is negative, and tensors with "
            "negative strides are not currently supported. (You can probably work around "
            "this by making a copy of your array  with array.copy().) "
        )
    if any(s % item for s in array.strides):
        raise ValueError(
            "given numpy array strides not a multiple of the element byte size. Copy the "
            "numpy array to reallocate the memory."
        )
    from refimpl._storage import UntypedStorage

    # The storage spans the bytes the array can reach from its first element.
    span = 1 + sum((n - 1) * s for n, s in zip(array.shape, array.strides)) // item \
        if array.size else 0
    flat = np.lib.stride_tricks.as_strided(array, shape=(span,), strides=(item,)) \
        if array.size else np.empty(0, array.dtype)
    storage = UntypedStorage._wrap_numpy(flat, resizable=False)
    storage._data = flat.view(np.uint8)
    t = Tensor._make(storage, array.shape, tuple(s // item for s in array.strides), 0, dt)
    t._np_cache = array
    return t


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Convert without copying when possible (tensors and numpy arrays of the same dtype)."""
    dt = D.dtype_from_any(dtype) if dtype is not None else None
    if isinstance(data, Tensor):
        out = data if dt is None else data.to(dt)
        return out if device is None else out.to(as_device(device))
    if isinstance(data, np.ndarray) and (dt is None or dt.np == data.dtype) and device is None:
        with contextlib.suppress(TypeError, ValueError):  # strides numpy-only: copy below
            return from_numpy(data)
    return tensor(data, dtype=dt, device=device)


def _factory_kwargs(like: Tensor, dtype, device) -> tuple:
    dt = D.dtype_from_any(dtype) if dtype is not None else like.dtype
    dev = resolve(device) if device is not None else like.device
    return dt, dev


def zeros_like(input: Tensor, *, dtype=None, device=None, requires_grad: bool = False,
               memory_format=None, layout=None) -> Tensor:
    """Zeros with the shape (and by default dtype/device) of ``input``."""
    dt, dev = _factory_kwargs(input, dtype, device)
    t = relaid(zeros(input.shape, dtype=dt, device=dev), like_strides(input, memory_format))
    return t.requires_grad_(True) if requires_grad else t


def ones_like(input: Tensor, *, dtype=None, device=None, requires_grad: bool = False,
              memory_format=None, layout=None) -> Tensor:
    """Ones with the shape (and by default dtype/device) of ``input``."""
    dt, dev = _factory_kwargs(input, dtype, device)
    t = relaid(ones(input.shape, dtype=dt, device=dev), like_strides(input, memory_format))
    return t.requires_grad_(True) if requires_grad else t


def empty_like(input: Tensor, *, dtype=None, device=None, requires_grad: bool = False,
               memory_format=None, layout=None) -> Tensor:
    """An uninitialised tensor shaped like ``input``."""
    dt, dev = _factory_kwargs(input, dtype, device)
    t = relaid(empty(input.shape, dtype=dt, device=dev), like_strides(input, memory_format))
    return t.requires_grad_(True) if requires_grad else t


def full_like(input: Tensor, fill_value, *, dtype=None, device=None,
              requires_grad: bool = False, memory_format=None, layout=None) -> Tensor:
    """``fill_value`` everywhere, shaped like ``input``."""
    dt, dev = _factory_kwargs(input, dtype, device)
    t = relaid(full(input.shape, fill_value, dtype=dt, device=dev), like_strides(input, memory_format))
    return t.requires_grad_(True) if requires_grad else t


def new_tensor(self: Tensor, data, *, dtype=None, device=None,
               requires_grad: bool = False) -> Tensor:
    """A tensor from ``data`` with self's dtype and device by default."""
    dt, dev = _factory_kwargs(self, dtype, device)
    if isinstance(data, Tensor):
        import warnings

        warnings.warn(
            "To copy construct from a tensor, it is recommended to use "
            "sourceTensor.detach().clone() or sourceTensor.detach().clone()."
            "requires_grad_(True), rather than tensor.new_tensor(sourceTensor).",
            UserWarning, stacklevel=2,
        )
        data = data.detach()
    return tensor(data, dtype=dt, device=dev, requires_grad=requires_grad)


def _new_filled(factory):
    def method(self: Tensor, *size, dtype=None, device=None, requires_grad: bool = False,
               **_):
        dt, dev = _factory_kwargs(self, dtype, device)
        return factory(*size, dtype=dt, device=dev, requires_grad=requires_grad)

    method.__doc__ = f"``{factory.__name__}`` with self's dtype and device by default."
    return method


new_zeros = _new_filled(zeros)
new_ones = _new_filled(ones)
new_empty = _new_filled(empty)


def new_full(self: Tensor, size, fill_value, *, dtype=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """``full`` with self's dtype and device by default."""
    dt, dev = _factory_kwargs(self, dtype, device)
    return full(size, fill_value, dtype=dt, device=dev, requires_grad=requires_grad)


def empty_strided(size, stride, *, dtype=None, device=None, requires_grad: bool = False,
                  pin_memory: bool = False) -> Tensor:
    """An uninitialised tensor with the given strides over a storage just big enough."""
    dt = D.dtype_from_any(dtype) if dtype is not None else D.get_default_dtype()
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    span = 0 if 0 in size else 1 + sum((n - 1) * st for n, st in zip(size, stride))
    base = empty(span, dtype=dt, device=device)
    t = Tensor._make(base._storage, size, stride, 0, dt)
    return t.requires_grad_(True) if requires_grad else t


def scalar_tensor(s, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A 0-dim tensor holding ``s`` (default dtype unless given)."""
    dt = D.dtype_from_any(dtype) if dtype is not None else D.get_default_dtype()
    return full((), s, dtype=dt, device=device, requires_grad=requires_grad)


def _cuda_device(dev):
    """The CUDA device ``dev`` names, or None (CPU and meta factories compute here)."""
    if dev is None:
        return None
    dev = resolve(dev)
    return dev if dev.type == "cuda" else None


def _arange_args(args):
    if len(args) == 1:
        return 0, args[0], 1
    if len(args) == 2:
        return args[0], args[1], 1
    if len(args) == 3:
        return args
    raise TypeError("arange() takes 1 to 3 positional arguments")


def arange(*args, start=None, end=None, step=None, dtype=None, device=None,
           requires_grad: bool = False, out=None) -> Tensor:
    """Values from ``start`` to ``end`` (exclusive) by ``step``; int64 for integer args."""
    if end is not None:
        args = (start if start is not None else 0, end, step if step is not None else 1)
    a, b, st = (x.item() if isinstance(x, Tensor) else x for x in _arange_args(args))
    if st == 0:
        raise RuntimeError("step must be nonzero")
    if not (math.isfinite(a) and math.isfinite(b)):
        raise RuntimeError(f"unsupported range: {a} -> {b}")
    if (b - a) * st < 0 and b != a:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if dtype is not None:
        dt = D.dtype_from_any(dtype)
    elif out is not None:
        dt = out.dtype
    elif all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in (a, b, st)):
        dt = D.int64
    else:
        dt = D.get_default_dtype()
    n = max(0, math.ceil((b - a) / st))
    if dt.category < 2:  # integral: start and step are truncated, as torch's kernel does
        a, st = int(a), int(st)
    if dt is D.int64:  # int64 also truncates the end and counts in integers
        if st == 0:
            raise ValueError("step must be nonzero")
        span = int(b) - a + st - (1 if st > 0 else -1)
        n = max(0, abs(span) // abs(st) * (1 if (span >= 0) == (st > 0) else -1))
    dev = _cuda_device(device)
    if dev is not None:
        from refimpl.cuda import _factories

        t = _factories.arange(n, a, st, dt, dev)
        if out is not None:
            out.resize_(t.shape).copy_(t)
            return out
        return t.requires_grad_(True) if requires_grad else t
    values = a + np.arange(n, dtype=np.float64 if dt.category >= 2 else np.int64) * st
    t = Tensor._from_array(values.astype(dt.np), dt)
    if out is not None:
        out.resize_(t.shape).copy_(t)
        return out
    return _finish(t, device, requires_grad)


def _parser_type(x) -> str:
    """The type name torch's argument parser prints for a value."""
    if isinstance(x, Tensor):
        return "Tensor"
    if isinstance(x, D.dtype):
        return "torch.dtype"
    if isinstance(x, _device.device):
        return "torch.device"
    return type(x).__name__


def _space_args(name: str, start, end, steps, extra: str = "", given: dict | None = None
                ) -> tuple:
    """linspace/logspace's argument checks (torch's parser and 0-dim checks); the bounds
    as Python numbers. ``given``: the keyword arguments passed (the parser lists them)."""
    if not isinstance(steps, (int, np.integer)):
        got = ", ".join([_parser_type(x) for x in (start, end, steps)] + [
            f"{k}={_parser_type(v)}" for k, v in (given or {}).items() if v is not None])
        tail = (f"int steps, {extra}*, Tensor out = None, torch.dtype dtype = None, "
                "torch.layout layout = None, torch.device device = None, bool pin_memory = "
                "False, bool requires_grad = False)")
        sigs = "".join(f" * ({a} start, {b} end, {tail}\n" for a, b in (
            ("Tensor", "Tensor"), ("Number", "Tensor"), ("Tensor", "Number"),
            ("Number", "Number")))
        raise TypeError(f"{name}() received an invalid combination of arguments - got ({got}), "
                        f"but expected one of:\n{sigs}")
    dims = [x.dim() if isinstance(x, Tensor) else 0 for x in (start, end)]
    if any(dims):
        raise RuntimeError(f"{name} only supports 0-dimensional start and end tensors, but got "
                           f"start with {dims[0]} dimension(s) and end with {dims[1]} "
                           "dimension(s).")
    return tuple(x.item() if isinstance(x, Tensor) else x for x in (start, end))


def linspace(start, end, steps: int, *, dtype=None, device=None,
             requires_grad: bool = False, out=None) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive."""
    start, end = _space_args("linspace", start, end, steps, given={
        "out": out, "dtype": dtype, "device": device, "requires_grad": requires_grad or None})
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    dt = D.dtype_from_any(dtype) if dtype is not None else D.get_default_dtype()
    dev = _cuda_device(device)
    if dev is not None:
        from refimpl.cuda import _factories

        t = _factories.linspace(start, end, steps, dt, dev)
        return t.requires_grad_(True) if requires_grad else t
    values = np.linspace(start, end, steps, dtype=np.float64)
    if dt.category < 2:
        values = np.trunc(values)
    t = Tensor._from_array(values.astype(dt.np), dt)
    return _finish(t, device, requires_grad)


def logspace(start, end, steps: int, base: float = 10.0, *, dtype=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """``base ** linspace(start, end, steps)``."""
    start, end = _space_args("logspace", start, end, steps, "float base = 10.0, ", given={
        "dtype": dtype, "device": device, "requires_grad": requires_grad or None})
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    dt = D.dtype_from_any(dtype) if dtype is not None else D.get_default_dtype()
    dev = _cuda_device(device)
    if dev is not None:
        from refimpl.cuda import _factories

        t = _factories.linspace(start, end, steps, dt, dev, base=base)
        return t.requires_grad_(True) if requires_grad else t
    values = np.power(base, np.linspace(start, end, steps, dtype=np.float64))
    return _finish(Tensor._from_array(values.astype(dt.np), dt), device, requires_grad)


def eye(n: int, m: int | None = None, *, dtype=None, device=None,
        requires_grad: bool = False) -> Tensor:
    """A 2-D tensor with ones on the diagonal."""
    if n < 0:
        raise RuntimeError(f"n must be greater or equal to 0, got {n}")
    if m is not None and m < 0:
        raise RuntimeError(f"m must be greater or equal to 0, got {m}")
    dt = D.dtype_from_any(dtype) if dtype is not None else D.get_default_dtype()
    dev = _cuda_device(device)
    if dev is not None:
        from refimpl.cuda import _factories

        t = _factories.eye(n, n if m is None else m, dt, dev)
        return t.requires_grad_(True) if requires_grad else t
    values = np.eye(n, n if m is None else m, dtype=dt.np)
    return _finish(Tensor._from_array(values, dt), device, requires_grad)


__all__ = [
    "arange",
    "as_tensor",
    "empty",
    "empty_like",
    "empty_strided",
    "eye",
    "from_numpy",
    "full",
    "full_like",
    "linspace",
    "logspace",
    "ones",
    "ones_like",
    "scalar_tensor",
    "tensor",
    "zeros",
    "zeros_like",
]
TENSOR_METHODS = ("new_tensor", "new_zeros", "new_ones", "new_empty", "new_full")
