"""Shared pieces for op definitions: broadcasting, promotion, numpy compute helpers."""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor, wrap_dim

__all__ = [
    "broadcast_shapes", "result_type", "compute_np_dtype", "to_np", "sum_to", "wrap_dim",
    "is_scalar", "np_result", "normalize_dims",
]


def broadcast_shapes(*shapes) -> tuple:
    """The broadcast of ``shapes`` with torch's error for incompatible sizes."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for i, shape in enumerate(shapes):
        for j, size in enumerate(shape):
            k = ndim - len(shape) + j
            if out[k] == size or size == 1:
                continue
            if out[k] == 1:
                out[k] = size
                continue
            # torch names the first two operands a and b
            raise RuntimeError(
                f"The size of tensor a ({out[k]}) must match the size of tensor b ({size}) "
                f"at non-singleton dimension {k}"
            )
    return tuple(out)


def is_scalar(x) -> bool:
    """A Python (or numpy) number, as opposed to a tensor."""
    return isinstance(x, (bool, int, float, complex, np.number, np.bool_))


def result_type(*operands) -> D.dtype:
    """torch.result_type over tensors and Python scalars (see refimpl._dtype)."""
    dims, zeros, scalars = [], [], []
    for o in operands:
        if isinstance(o, Tensor):
            (dims if o._shape else zeros).append(o.dtype)
        elif o is not None:
            scalars.append(o)
    return D.result_type_of(dims, zeros, scalars)


def compute_np_dtype(dtype: D.dtype) -> np.dtype:
    """The numpy dtype to compute in: float16/bfloat16 compute in float32 like torch's CPU."""
    if dtype is D.float16 or dtype is D.bfloat16:
        return np.dtype(np.float32)
    return dtype.np


def to_np(x, dtype: D.dtype | None = None) -> np.ndarray:
    """A tensor or scalar as a numpy array, cast to ``dtype``'s compute type if given."""
    if isinstance(x, Tensor):
        arr = x._np
    else:
        arr = np.asarray(x)
    if dtype is not None:
        cd = compute_np_dtype(dtype)
        if arr.dtype != cd:
            arr = arr.astype(cd)
    return arr


def np_result(arr, dtype: D.dtype) -> np.ndarray:
    """Cast a numpy result back to the output dtype (rounding float16/bfloat16)."""
    arr = np.asarray(arr)
    if arr.dtype != dtype.np:
        with np.errstate(all="ignore"):
            arr = arr.astype(dtype.np)
    return arr


def sum_to(grad: Tensor, shape) -> Tensor:
    """Reduce a broadcast gradient back to ``shape`` (the adjoint of broadcasting)."""
    shape = tuple(shape)
    if grad._shape == shape:
        return grad
    lead = grad.dim() - len(shape)
    dims = list(range(lead))
    for i, size in enumerate(shape):
        if size == 1 and grad._shape[lead + i] != 1:
            dims.append(lead + i)
    out = grad.sum(dims, keepdim=True) if dims else grad
    if lead:
        out = out.reshape(shape)
    return out


def normalize_dims(dim, ndim: int) -> tuple:
    """``dim`` (None, int, or sequence) as a sorted tuple of non-negative dims."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, int):
        dim = (dim,)
    dims = tuple(sorted({wrap_dim(d, ndim) for d in dim}))
    if len(dims) != len(tuple(dim)):
        raise RuntimeError("dim appears multiple times in the list of dims")
    return dims
