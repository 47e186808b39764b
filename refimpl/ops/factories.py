"""Factories: tensors made from data or from a shape (spec: TENSOR-200 and following)."""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl._device import CPU, as_device, resolve
from refimpl._tensor import Tensor


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


def _finish(t: Tensor, dev, requires_grad: bool, pin_memory: bool = False) -> Tensor:
    dev = resolve(dev) if dev is not None else CPU
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
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
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
    dev = resolve(device) if device is not None else CPU
    t = Tensor._empty(shape, dt, dev)
    if t.numel():
        t.fill_(fill_value)
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
        dev = resolve(device) if device is not None else CPU
        t = Tensor._empty(_shape_args(size), dt, dev)
        if value is not None and t.numel() and (value != 0 or dev.type != "cpu"):
            t.fill_(value)
        if out is not None:
            out.resize_(t.shape).copy_(t)
            return out
        if pin_memory:
            t = t.pin_memory()
        return t.requires_grad_(True) if requires_grad else t

    return factory


zeros = _filled(0)
zeros.__doc__ = "A tensor of zeros of the given shape."
ones = _filled(1)
ones.__doc__ = "A tensor of ones of the given shape."
empty = _filled(None)
empty.__doc__ = "A tensor of the given shape with unspecified contents (zeros on the CPU)."


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
    storage = UntypedStorage._wrap_numpy(flat)
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
        try:
            return from_numpy(data)
        except (TypeError, ValueError):
            pass
    return tensor(data, dtype=dt, device=device)


__all__ = ["tensor", "full", "zeros", "ones", "empty", "from_numpy", "as_tensor"]
