"""Shared pieces for op definitions: broadcasting, promotion, numpy compute helpers."""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor, wrap_dim

# torch's message when an op's out= must have the result's dtype exactly (the
# ``extra["out_dtype"]`` of gather, sort, topk...; the dispatcher fills the names)
OUT_DTYPE = "Expected out tensor to have dtype {res}, but got {out} instead"

__all__ = [
    "broadcast_shapes",
    "channel_sums",
    "compute_np_dtype",
    "int_key",
    "is_scalar",
    "normalize_dims",
    "np_result",
    "result_type",
    "sum_to",
    "to_np",
    "wrap_dim",
]


def broadcast_shapes(*shapes) -> tuple:
    """The broadcast of ``shapes`` (folded pairwise, as torch's infer_size).

    Each pair is scanned from the last dimension, so the error names the dimension
    torch names: "The size of tensor a (3) must match the size of tensor b (4) at
    non-singleton dimension 1".
    """
    out: tuple = ()
    for shape in shapes:
        out = _broadcast_pair(out, tuple(shape))
    return out


def _broadcast_pair(a: tuple, b: tuple) -> tuple:
    if a == b:
        return a
    ndim = max(len(a), len(b))
    out = [0] * ndim
    for i in range(ndim - 1, -1, -1):
        off = ndim - 1 - i
        sa = a[len(a) - 1 - off] if len(a) - 1 - off >= 0 else 1
        sb = b[len(b) - 1 - off] if len(b) - 1 - off >= 0 else 1
        if sa != sb and sa != 1 and sb != 1:
            raise RuntimeError(
                f"The size of tensor a ({sa}) must match the size of tensor b ({sb}) at "
                f"non-singleton dimension {i}"
            )
        out[i] = sb if sa == 1 else sa
    return tuple(out)


def is_scalar(x) -> bool:
    """A Python (or numpy) number, as opposed to a tensor."""
    return isinstance(x, (bool, int, float, complex, np.number, np.bool_))


def result_type(*operands) -> D.dtype:
    """torch.result_type over tensors and Python scalars (see refimpl._dtype)."""
    if len(operands) == 2:
        a, b = operands
        if isinstance(a, Tensor) and a._shape:
            # the two common cases, decided as result_type_of would: dimensioned tensors
            # of one dtype keep it; a floating one keeps its dtype with a Python float
            if isinstance(b, Tensor) and b._shape and a.dtype is b.dtype:
                return a.dtype
            if type(b) is float and a.dtype.category == 2:
                return a.dtype
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


def channel_sums(a3: np.ndarray) -> np.ndarray:
    """Per-channel sums of an (N, C, L) array: one matrix-vector product with ones (BLAS)
    and a sum over the batch; numpy's reduction over axes 0 and 2 is several times slower
    (CPU batch norm and convolution bias gradients)."""
    n, c, size = a3.shape
    return (a3.reshape(n * c, size) @ np.ones(size, a3.dtype)).reshape(n, c).sum(0)


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


def int_key(values: tuple) -> tuple | None:
    """``values`` as a memo key when each is an int, a bool, a string, None, or a tuple or
    list of ints (lists become tuples); None otherwise (a tensor argument, say, whose value
    may change)."""
    key = []
    for v in values:
        tv = type(v)
        if tv is list or tv is tuple:
            for x in v:
                if type(x) is not int:
                    return None
            key.append(tuple(v))
        elif tv is int or tv is bool or tv is str or v is None:
            key.append(v)
        else:
            return None
    return tuple(key)
