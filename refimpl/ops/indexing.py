"""Indexing: ``x[idx]``, ``x[idx] = v``, the ``index``/``index_put`` ops, ``nonzero``
(spec: TENSOR-400..406).

``__getitem__`` follows torch's Python indexing: integers, slices, ``None``, ``...`` and
Python bools make views (select, slice, unsqueeze; ``alias`` when nothing changes); every
integer tensor, bool mask or list in the index is collected, in the dim it applies to,
into one call of the ``index`` op, which copies (IndexBackward0). ``__setitem__`` writes
through the basic view with ``copy_``/``fill_`` (so autograd sees CopySlices) and through
``index_put_`` when tensors are involved.
"""

from __future__ import annotations

import operator
import warnings

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.ops._helpers import broadcast_shapes, compute_np_dtype, np_result, sum_to
from refimpl.ops._registry import TensorSpec, defop
from refimpl.ops.elementwise import inplace
from refimpl.ops.slicing import select, slice_op
from refimpl.ops.views import alias, type_str, unsqueeze

_INDEX_DTYPES = (D.int64, D.int32, D.uint8, D.bool_)

# -- the index op -------------------------------------------------------------------------------


def _mask_to_arrays(self_shape, mask: Tensor, dim: int) -> tuple:
    if mask.dtype is D.uint8:
        warnings.warn("indexing with dtype torch.uint8 is now deprecated, please use a dtype "
                      "torch.bool instead.", UserWarning, stacklevel=5)
    for j, n in enumerate(mask.shape):
        if dim + j >= len(self_shape) or n != self_shape[dim + j]:
            raise IndexError(
                f"The shape of the mask {list(mask.shape)} at index {j} does not match the "
                f"shape of the indexed tensor {list(self_shape)} at index {dim + j}")
    return np.nonzero(mask._np)


def index_arrays(self_shape, indices) -> tuple:
    """The numpy index tuple for ``self[indices]`` (torch's aten::index semantics): masks
    become their nonzero coordinates, None a full slice; torch's checks and messages."""
    if isinstance(indices, Tensor) or not isinstance(indices, (list, tuple)):
        raise TypeError("index(): argument 'indices' must be tuple of Tensors")
    for idx in indices:
        if idx is not None and idx.dtype not in _INDEX_DTYPES:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    out: list = []
    for idx in indices:
        if idx is None:
            out.append(slice(None))
        elif idx.dtype in (D.bool_, D.uint8):
            out.extend(_mask_to_arrays(self_shape, idx, len(out)))
        else:
            out.append(idx._np.astype(np.int64, copy=False))
    if len(out) > len(self_shape):
        raise IndexError(f"too many indices for tensor of dimension {len(self_shape)} (got "
                         f"{len(out)})")
    arrays = [a for a in out if not isinstance(a, slice)]
    try:
        np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError:
        shapes = ", ".join(str(list(a.shape)) for a in arrays)
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together "
                         f"with shapes {shapes}") from None
    ordinal = 0
    for d, a in enumerate(out):
        if isinstance(a, slice):
            continue
        size = self_shape[d]
        if a.size:
            bad = (a < -size) | (a >= size)
            if bad.any():
                raise IndexError(f"index {int(a[bad].flat[0])} is out of bounds for dimension "
                                 f"{ordinal} with size {size}")
        ordinal += 1
    return tuple(out)


def indexed_shape(self_shape, idx: tuple) -> tuple:
    """The shape of ``self[idx]`` for a numpy index tuple of arrays and full slices."""
    adv = [i for i, a in enumerate(idx) if not isinstance(a, slice)]
    bshape = np.broadcast_shapes(*(idx[i].shape for i in adv)) if adv else ()
    rest = list(self_shape[len(idx):])
    if not adv:
        return tuple(self_shape)
    if adv == list(range(adv[0], adv[-1] + 1)):
        return tuple(self_shape[:adv[0]]) + tuple(bshape) + \
            tuple(self_shape[adv[-1] + 1:len(idx)]) + tuple(rest)
    sliced = [self_shape[i] for i, a in enumerate(idx) if isinstance(a, slice)]
    return tuple(bshape) + tuple(sliced) + tuple(rest)


def _index_meta(self: Tensor, indices) -> TensorSpec:
    if any(i is not None and i.dtype in (D.bool_, D.uint8) for i in indices):
        raise NotImplementedError(
            "index with a boolean mask has a data-dependent output shape (no meta function)")
    shape = indexed_shape(self._shape, tuple(slice(None) if i is None else
                                             np.empty(i.shape, np.int64) for i in indices))
    return TensorSpec(shape, self.dtype, self.device)


def _index_cpu(self: Tensor, indices) -> np.ndarray:
    return self._np[index_arrays(self._shape, indices)]


def _check_index_list(self_shape, indices) -> None:
    """The checks of :func:`index_arrays` that need no index values (the CUDA kernels
    check the bounds on the device)."""
    if isinstance(indices, Tensor) or not isinstance(indices, (list, tuple)):
        raise TypeError("index(): argument 'indices' must be tuple of Tensors")
    width = 0
    for idx in indices:
        if idx is not None and idx.dtype not in _INDEX_DTYPES:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    for idx in indices:
        if idx is not None and idx.dtype in (D.bool_, D.uint8):
            if idx.dtype is D.uint8:
                warnings.warn("indexing with dtype torch.uint8 is now deprecated, please use a "
                              "dtype torch.bool instead.", UserWarning, stacklevel=5)
            for j, n in enumerate(idx.shape):
                if width + j >= len(self_shape) or n != self_shape[width + j]:
                    raise IndexError(
                        f"The shape of the mask {list(idx.shape)} at index {j} does not match "
                        f"the shape of the indexed tensor {list(self_shape)} at index "
                        f"{width + j}")
            width += idx.dim()
        else:
            width += 1
    if width > len(self_shape):
        raise IndexError(f"too many indices for tensor of dimension {len(self_shape)} (got "
                         f"{width})")
    shapes = [tuple(i.shape) for i in indices if i is not None and i.dtype not in
              (D.bool_, D.uint8)]
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        listed = ", ".join(str(list(a)) for a in shapes)
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together "
                         f"with shapes {listed}") from None


def _check_index_devices(self: Tensor, indices=()) -> None:
    # the ops accept CPU index tensors with a CUDA self (dispatch: cross_device), not
    # the other way round, nor index tensors of another CUDA device
    if not self.is_cuda or any(isinstance(i, Tensor) and i.is_cuda and i.device != self.device
                               for i in indices):
        raise RuntimeError("indices should be either on cpu or on the same device as the "
                           f"indexed tensor ({self.device})")


def _index_cuda(self: Tensor, indices) -> Tensor:
    from refimpl.cuda import _index_ops

    _check_index_devices(self, indices)
    _check_index_list(self._shape, indices)
    return _index_ops.index(self, list(indices))


def _index_backward(ctx, grad):
    from refimpl.ops.factories import zeros

    inp, indices = ctx.args[0], ctx.args[1]
    base = zeros(tuple(inp.shape), dtype=grad.dtype, device=grad.device)
    return (index_put(base, indices, grad, True),)


# The backward reads only self's metadata and the indices: only the indices are saved
# (torch does not save self: test_index_backward_does_not_save_tensor).
index = defop("index", meta=_index_meta, cpu=_index_cpu, cuda=_index_cuda,
              backward=_index_backward,
              jvp=lambda ctx, t, *_: None if t is None else index(t, ctx.args[1]),
              extra={"method": False, "save_needs": {0: (1,)}, "cross_device": True})


# -- index_put -------------------------------------------------------------------------------

def _check_values(self: Tensor, values) -> None:
    if not isinstance(values, Tensor):
        raise TypeError("index_put(): argument 'values' (position 2) must be Tensor, not "
                        f"{type(values).__name__}")
    if values.dtype != self.dtype:
        raise RuntimeError(
            "Index put requires the source and destination dtypes match, got "
            f"{D.type_name(self.dtype)} for the destination and {D.type_name(values.dtype)} "
            "for the source.")


def _index_put_meta(self: Tensor, indices, values, accumulate: bool = False) -> TensorSpec:
    _check_values(self, values)
    return TensorSpec(self._shape, self.dtype, self.device)


def _index_put_cpu(self: Tensor, indices, values, accumulate: bool = False) -> np.ndarray:
    _check_values(self, values)
    idx = index_arrays(self._shape, indices)
    target = indexed_shape(self._shape, idx)
    try:
        ok = broadcast_shapes(values._shape, target) == tuple(target)
    except RuntimeError:
        ok = False
    if not ok:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(values.shape)} cannot "
                           f"be broadcast to indexing result of shape {list(target)}")
    from refimpl.ops.shape import layout_like

    cd = compute_np_dtype(self.dtype) if accumulate else self.dtype.np
    out = np.array(self._np, dtype=cd, copy=True, order="C")
    vals = np.broadcast_to(values._np.astype(cd, copy=False), target)
    if accumulate:
        np.add.at(out, idx, vals)
    else:
        out[idx] = vals
    return layout_like(np_result(out, self.dtype), self)


def _index_put_cuda(self: Tensor, indices, values, accumulate: bool = False) -> Tensor:
    from refimpl.cuda import _index_ops

    _check_index_devices(self, indices)
    _check_values(self, values)
    _check_index_list(self._shape, indices)
    if isinstance(values, Tensor) and values._storage.device != self._storage.device \
            and values.dim() > 0:
        # only a 0-dim CPU value may join a CUDA index_put (index tensors may stay on the CPU)
        raise RuntimeError(
            "Expected all tensors to be on the same device, but found at least two devices, "
            f"{self.device} and {values.device}!")

    def check_target(target) -> None:
        try:
            ok = broadcast_shapes(values._shape, tuple(target)) == tuple(target)
        except RuntimeError:
            ok = False
        if not ok:
            raise RuntimeError(f"shape mismatch: value tensor of shape {list(values.shape)} "
                               f"cannot be broadcast to indexing result of shape "
                               f"{list(target)}")

    return _index_ops.index_put(self, list(indices), values, bool(accumulate), check_target)


def _index_put_backward(ctx, grad):
    from refimpl.ops.factories import zeros

    indices, values = ctx.args[1], ctx.args[2]
    accumulate = ctx.args[3] if len(ctx.args) > 3 else ctx.kwargs.get("accumulate", False)
    g_self = g_values = None
    if ctx.needs_input_grad[0]:
        g_self = grad if accumulate else index_put(
            grad, indices, zeros((), dtype=grad.dtype, device=grad.device))
    if len(ctx.needs_input_grad) > 2 and ctx.needs_input_grad[2]:
        g_values = sum_to(index(grad, indices), values.shape)
    return g_self, None, g_values


def _index_put_jvp(ctx, t_self, t_indices, t_values, *_):
    from refimpl.ops.factories import zeros

    inp, indices = ctx.args[0], ctx.args[1]
    accumulate = ctx.args[3] if len(ctx.args) > 3 else ctx.kwargs.get("accumulate", False)
    if t_self is None and t_values is None:
        return None
    base = t_self if t_self is not None else zeros(tuple(inp.shape), dtype=inp.dtype,
                                                   device=inp.device)
    vals = t_values if t_values is not None else zeros((), dtype=inp.dtype, device=inp.device)
    return index_put(base, indices, vals, accumulate)


index_put = defop("index_put", meta=_index_put_meta, cpu=_index_put_cpu, cuda=_index_put_cuda,
                  backward=_index_put_backward, jvp=_index_put_jvp,
                  extra={"save_needs": {0: (1,), 2: (1,)}, "cross_device": True})


def inplace_of(op):
    """``inplace(op)`` that also keeps ``op``'s saving rule (what its backward reads)."""
    ip = inplace(op)
    ip.saves = op.saves
    if "save_needs" in op.extra:
        ip.extra["save_needs"] = op.extra["save_needs"]
    return ip


index_put_ = inplace_of(index_put)


# -- Python indexing ----------------------------------------------------------------------------

_SEQUENCES = (list, tuple, np.ndarray)


def _type_name(obj) -> str:
    t = type(obj)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"


def _is_int(obj) -> bool:
    return isinstance(obj, (int, np.integer)) and not isinstance(obj, (bool, np.bool_))


def _as_tuple(index) -> tuple:
    """torch's treatSequenceAsTuple: a short list holding a tensor, a sequence, a slice,
    ``None`` or ``...`` is read as a tuple of indices (deprecated, with a warning)."""
    if isinstance(index, tuple):
        return index
    if isinstance(index, (list, np.ndarray)) and len(index) < 32 and any(
            isinstance(o, (Tensor, slice) + _SEQUENCES) or o is None or o is Ellipsis
            for o in index):
        warnings.warn(
            "Using a non-tuple sequence for multidimensional indexing is deprecated and will "
            "be changed in pytorch 2.9; use x[tuple(seq)] instead of x[seq]. In pytorch 2.9 "
            "this will be interpreted as tensor index, x[torch.tensor(seq)], which will "
            "result either in an error or a different result", UserWarning, stacklevel=4)
        return tuple(index)
    return (index,)


def _sequence_to_tensor(seq, device) -> Tensor:
    """A list index as an index tensor: bool if every entry is a bool, else int64."""
    from refimpl.ops.factories import tensor

    if isinstance(seq, str):
        raise TypeError("new(): invalid data type 'str'")
    arr = np.asarray(seq.tolist() if isinstance(seq, np.ndarray) else
                     [s.tolist() if isinstance(s, Tensor) else s for s in seq])
    dtype = D.bool_ if arr.dtype == np.bool_ else D.int64
    if arr.dtype.kind not in "biuf":
        arr = arr.astype(np.int64)
    return tensor(arr.astype(dtype.np), device=device)


def _bool_index(value: bool, device) -> Tensor:
    from refimpl.ops.factories import tensor

    return tensor([0] if value else [], dtype=D.int64, device=device)


def _select_index(x: Tensor, dim: int, index: int, real_dim: int) -> Tensor:
    if x.dim() == 0:
        if index == 0 and dim == 0:
            raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                             "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
        size = 0
    else:
        size = x._shape[dim]
    if not -size <= index < size:
        raise IndexError(f"index {index} is out of bounds for dimension {real_dim} with size "
                         f"{size}")
    return select(x, dim, index)


def _slice_index(x: Tensor, dim: int, s: slice, optimize: bool) -> Tensor:
    if x.dim() == 0:
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    start = None if s.start is None else operator.index(s.start)
    stop = None if s.stop is None else operator.index(s.stop)
    step = 1 if s.step is None else operator.index(s.step)
    if step == 0:
        raise ValueError("slice step cannot be zero")
    if step < 0:
        raise ValueError("step must be greater than zero")
    size = x._shape[dim]
    if optimize and step == 1 and (start is None or start == 0 or start <= -size) and (
            stop is None or stop >= size):
        return x
    return slice_op(x, dim, start, stop, step)


def _specified_dims(items) -> int:
    n = 0
    for o in items:
        if isinstance(o, Tensor):
            n += o.dim() if o.dtype in (D.bool_, D.uint8) else 1
        elif o is None or o is Ellipsis or isinstance(o, bool):
            continue
        else:
            n += 1
    return n


def apply_slicing(self: Tensor, items: tuple) -> tuple:
    """Apply the basic part of an index tuple (views), collecting the tensor parts.

    Returns ``(result, tensors)``: ``tensors`` is the list of Optional index tensors for
    the ``index``/``index_put`` op, positioned in ``result``'s dims (empty when the index
    was basic only)."""
    specified = _specified_dims(items)
    if specified > self.dim():
        raise IndexError(f"too many indices for tensor of dimension {self.dim()}")
    result, dim, tensors = self, 0, []

    def record(t: Tensor, width: int = 1) -> None:
        nonlocal dim
        tensors.extend([None] * (dim - len(tensors)))
        tensors.append(t)
        dim += width

    for real_dim, obj in enumerate(items):
        if isinstance(obj, bool):
            result = unsqueeze(result, dim)
            record(_bool_index(obj, self.device))
        elif _is_int(obj):
            result = _select_index(result, dim, operator.index(obj), real_dim)
        elif isinstance(obj, slice):
            result = _slice_index(result, dim, obj, True)
            dim += 1
        elif obj is Ellipsis:
            dim += self.dim() - specified
        elif obj is None:
            result = unsqueeze(result, dim)
            dim += 1
        elif isinstance(obj, Tensor):
            if obj.dim() == 0 and obj.dtype in (D.bool_, D.uint8):
                result = unsqueeze(result, dim)
                record(_bool_index(bool(obj.item()), self.device))
            elif obj.dim() == 0 and obj.dtype.category == 1:
                result = _select_index(result, dim, int(obj.item()), real_dim)
            else:
                record(obj, obj.dim() if obj.dtype in (D.bool_, D.uint8) else 1)
        elif isinstance(obj, (*_SEQUENCES, str)):
            t = _sequence_to_tensor(obj, self.device)
            record(t, t.dim() if t.dtype is D.bool_ else 1)
        else:
            raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and long or "
                             f"byte Variables are valid indices (got {_type_name(obj)})")
    return result, tensors


def __getitem__(self: Tensor, idx) -> Tensor:
    """``x[idx]``: a view for basic indices, a copy (``index``) with tensors or lists."""
    if _is_int(idx):
        return _select_index(self, 0, operator.index(idx), 0)
    if isinstance(idx, slice):
        return _slice_index(self, 0, idx, False)
    if idx is None:
        return unsqueeze(self, 0)
    if idx is Ellipsis:
        return alias(self)
    result, tensors = apply_slicing(self, _as_tuple(idx))
    if tensors:
        return index(result, tensors)
    return alias(result) if result is self else result


# -- __setitem__ ----------------------------------------------------------------------------------

_C_NAMES = {
    "float32": "float", "float64": "double", "int64": "int64_t", "int32": "int",
    "int16": "int16_t", "int8": "int8_t", "uint8": "uint8_t",
}


def check_scalar_fits(value, dtype: D.dtype) -> None:
    """Raise torch's error when the Python number ``value`` cannot be stored as ``dtype``."""
    if _is_int(value) and not -2 ** 63 <= int(value) < 2 ** 63:
        raise ValueError("Overflow when unpacking long long")
    if dtype.category in (0, 3) or dtype in (D.float16, D.bfloat16):
        return
    name = _C_NAMES[dtype.name]
    if isinstance(value, complex):
        if value.imag != 0:
            raise RuntimeError(f"value cannot be converted to type {name} without overflow")
        value = value.real
    value = float(value) if not isinstance(value, (int, np.integer)) else int(value)
    if dtype.category == 2:
        if np.isfinite(value) and abs(value) > float(np.finfo(dtype.np).max):
            raise RuntimeError(f"value cannot be converted to type {name} without overflow")
        return
    info = np.iinfo(dtype.np)
    low = -info.max if info.min == 0 else info.min
    if not (np.isfinite(value) and low <= value <= info.max):
        raise RuntimeError(f"value cannot be converted to type {name} without overflow")


def _value_to_tensor(self: Tensor, value) -> Tensor:
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (bool, int, float, complex, np.number, np.bool_)):
        from refimpl.ops.factories import tensor

        check_scalar_fits(value, self.dtype)
        if isinstance(value, complex) and not self.dtype.is_complex:
            value = value.real
        return tensor(value, dtype=self.dtype)
    raise TypeError(f"can't assign a {_type_name(value)} to a {type_str(self)}")


def _strip_leading_ones(value: Tensor) -> Tensor:
    shape = tuple(value._shape)
    k = 0
    while k < len(shape) and shape[k] == 1:
        k += 1
    return value.view(shape[k:]) if k else value


def _copy_to(dst: Tensor, src: Tensor) -> None:
    """torch's setitem copy: same shape copies, a CPU 0-dim value fills, otherwise the
    value (leading size-1 dims dropped) is expanded to the destination."""
    if dst._shape == src._shape:
        dst.copy_(src)
        return
    if src.dim() == 0 and src.is_cpu and not src.requires_grad:
        dst.fill_(src)
        return
    src = src.view(_strip_leading_ones(src)._shape)
    if src._shape != dst._shape:
        src = src.expand(dst._shape)
    dst.copy_(src)


def __setitem__(self: Tensor, idx, value) -> None:
    """``x[idx] = value``: in place through the view (basic) or ``index_put_`` (advanced)."""
    value = _value_to_tensor(self, value)
    if idx is False:
        return
    if idx is Ellipsis:
        _copy_to(self, value)
        return
    if idx is None:
        _copy_to(unsqueeze(self, 0), value)
        return
    if _is_int(idx):
        _copy_to(_select_index(self, 0, operator.index(idx), 0), value)
        return
    if isinstance(idx, slice):
        _copy_to(_slice_index(self, 0, idx, False), value)
        return
    sliced, tensors = apply_slicing(self, _as_tuple(idx))
    if not tensors:
        _copy_to(sliced, value)
        return
    index_put_(sliced, tensors, _strip_leading_ones(value))


# -- nonzero ----------------------------------------------------------------------------------------

def _nonzero_meta(self: Tensor) -> TensorSpec:
    raise NotImplementedError("nonzero has a data-dependent output shape (no meta function)")


def _nonzero_cpu(self: Tensor) -> Tensor:
    # torch lays the [n, ndim] result out column-major: strides (1, n)
    arr = self._np
    if arr.ndim:
        coords = np.stack(np.nonzero(arr)).astype(np.int64)
    else:
        coords = np.zeros((0, 1 if arr.item() else 0), np.int64)
    n = coords.shape[1]
    buf = Tensor._from_array(np.ascontiguousarray(coords))
    return Tensor._make(buf._storage, (n, arr.ndim), (1, n), 0, D.int64)


def _nonzero_cuda(self: Tensor) -> Tensor:
    from refimpl.cuda import _compact

    if self.dim() == 0:
        return _compact.nonzero(self.reshape(1))[:, :0]
    return _compact.nonzero(self)


nonzero_op = defop("nonzero", meta=_nonzero_meta, cpu=_nonzero_cpu, cuda=_nonzero_cuda,
                   differentiable=False,
                   extra={"method": False})


def nonzero(input: Tensor, *, as_tuple: bool = False, out: Tensor | None = None):
    """Indices of the non-zero elements: an ``[n, ndim]`` int64 tensor, or with
    ``as_tuple=True`` one 1-D tensor per dim (a 0-dim input counts as 1-D)."""
    if as_tuple:
        src = unsqueeze(input, 0) if input.dim() == 0 else input
        return nonzero_op(src).unbind(1)
    return nonzero_op(input) if out is None else nonzero_op(input, out=out)


def argwhere(input: Tensor) -> Tensor:
    """``nonzero(input)``: the ``[n, ndim]`` indices of the non-zero elements."""
    return nonzero_op(input)


__all__ = ["argwhere", "index_put", "index_put_", "nonzero"]
TENSOR_METHODS = ("__getitem__", "__setitem__", "nonzero", "argwhere")
