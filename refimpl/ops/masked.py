"""Index ops through a bool mask or flat indices (spec: TENSOR-407): masked_fill,
masked_scatter, masked_select, take and take_along_dim.

As in ``gather_scatter.py``, arguments are checked with torch's messages before any data
is touched, and the in-place forms reuse the out-of-place ops through ``inplace_of``.
"""

from __future__ import annotations

import warnings

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor, wrap_dim
from refimpl.ops._helpers import broadcast_shapes, sum_to
from refimpl.ops._registry import TensorSpec, defop
from refimpl.ops.indexing import check_scalar_fits, inplace_of

# c10's names of the scalar types, used in a few messages
_C_NAMES = {
    "bool": "bool", "uint8": "unsigned char", "int8": "signed char", "int16": "short int",
    "int32": "int", "int64": "long int", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
    "float32": "float", "float64": "double", "complex64": "c10::complex<float>",
    "complex128": "c10::complex<double>",
}


def _zeros(shape, like) -> Tensor:
    from refimpl.ops.factories import zeros

    return zeros(tuple(shape), dtype=like.dtype, device=like.device)


# -- masked ops -------------------------------------------------------------------------------

def _masked_fill_check(self: Tensor, mask: Tensor, value) -> tuple:
    if mask.dtype is not D.bool_:
        raise RuntimeError("masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{_C_NAMES[mask.dtype.name]}")
    if isinstance(value, Tensor) and value.dim():
        raise RuntimeError("masked_fill_ only supports a 0-dimensional value tensor, but got "
                           f"tensor with {value.dim()} dimension(s).")
    return broadcast_shapes(mask._shape, self._shape)


def _masked_fill_cpu(self: Tensor, mask: Tensor, value) -> np.ndarray:
    shape = _masked_fill_check(self, mask, value)
    value = value.item() if isinstance(value, Tensor) else value
    check_scalar_fits(value, self.dtype)
    if isinstance(value, complex) and not self.dtype.is_complex:
        value = value.real
    with np.errstate(all="ignore"):
        fill = np.asarray(value).astype(self.dtype.np)
    return np.where(np.broadcast_to(mask._np, shape), fill, np.broadcast_to(self._np, shape))


def _masked_fill_cuda(self: Tensor, mask: Tensor, value) -> Tensor:
    from refimpl.cuda import _index_ops

    shape = _masked_fill_check(self, mask, value)
    if isinstance(value, Tensor):
        if value.dtype is not self.dtype:  # torch fills value.item(): a checked conversion
            check_scalar_fits(value.item(), self.dtype)
    else:
        check_scalar_fits(value, self.dtype)
        if isinstance(value, complex) and not self.dtype.is_complex:
            value = value.real
    return _index_ops.masked_fill(self, mask, value, shape)


def _or_zeros(tangent, like):
    return tangent if tangent is not None else _zeros(like.shape, like)


def _masked_fill_tensor_jvp(ctx, t_self, _m, t_value, *_):
    if t_self is None and t_value is None:
        return None
    inp, mask, value = ctx.args[:3]
    return _or_zeros(t_self, inp).masked_fill(mask, _or_zeros(t_value, value))


def _masked_scatter_jvp(ctx, t_self, _m, t_src, *_):
    if t_self is None and t_src is None:
        return None
    inp, mask, src = ctx.args[:3]
    return _or_zeros(t_self, inp).masked_scatter(mask, _or_zeros(t_src, src))


def _masked_fill_meta(self: Tensor, mask: Tensor, value) -> TensorSpec:
    return TensorSpec(_masked_fill_check(self, mask, value), self.dtype, self.device)


masked_fill_scalar = defop(
    "masked_fill", cpu=_masked_fill_cpu, cuda=_masked_fill_cuda, meta=_masked_fill_meta,
    backward=lambda ctx, g: (sum_to(g.masked_fill(ctx.args[1], 0), ctx.args[0].shape),),
    jvp=lambda ctx, t, *_: None if t is None else t.masked_fill(ctx.args[1], 0),
    extra={"method": False, "save_needs": {0: (1,)}})
masked_fill_tensor = defop(
    "_masked_fill_tensor", cpu=_masked_fill_cpu, cuda=_masked_fill_cuda,
    meta=_masked_fill_meta,
    node="MaskedFillBackward1", jvp=_masked_fill_tensor_jvp,
    backward=lambda ctx, g: (sum_to(g.masked_fill(ctx.args[1], 0), ctx.args[0].shape), None,
                             g.masked_fill(ctx.args[1].logical_not(), 0).sum()),
    extra={"method": False, "save_needs": {0: (1,), 2: (1,)}})
masked_fill_scalar_ = inplace_of(masked_fill_scalar)
masked_fill_tensor_ = inplace_of(masked_fill_tensor)
masked_fill_scalar_.extra["method"] = masked_fill_tensor_.extra["method"] = False


def _cuda_value_check(self: Tensor, value) -> None:
    """torch's CUDA kernel of a tensor value, reached when only ``value`` is on CUDA: it
    accepts a CPU value for a CUDA ``self``, never the converse."""
    if isinstance(value, Tensor) and value.device.type == "cuda" and \
            self.device.type != "cuda":
        if value.dim():
            raise RuntimeError("masked_fill_ only supports a 0-dimensional value tensor, but "
                               f"got tensor with {value.dim()} dimension(s).")
        raise RuntimeError("masked_fill_: Expected inputs to be on same device")


def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:
    """A copy with ``value`` (a number or 0-dim tensor) where the bool ``mask`` is True."""
    _cuda_value_check(input, value)
    op = masked_fill_tensor if isinstance(value, Tensor) else masked_fill_scalar
    return op(input, mask, value)


def masked_fill_(self: Tensor, mask: Tensor, value) -> Tensor:
    """In-place ``masked_fill`` (``mask`` must broadcast to ``self``'s shape)."""
    _cuda_value_check(self, value)
    op = masked_fill_tensor_ if isinstance(value, Tensor) else masked_fill_scalar_
    return op(self, mask, value)


def _masked_select_cpu(self: Tensor, mask: Tensor) -> np.ndarray:
    if mask.dtype is not D.bool_:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    shape = broadcast_shapes(mask._shape, self._shape)
    return np.broadcast_to(self._np, shape)[np.broadcast_to(mask._np, shape)]


def _masked_select_cuda(self: Tensor, mask: Tensor) -> Tensor:
    from refimpl.cuda import _compact

    if mask.dtype is not D.bool_:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    return _compact.masked_select(self, mask, broadcast_shapes(mask._shape, self._shape))


def _masked_select_backward(ctx, grad):
    inp, mask = ctx.args[0], ctx.args[1]
    shape = broadcast_shapes(tuple(inp.shape), tuple(mask.shape))
    full = _zeros(shape, grad).masked_scatter(mask, grad)
    return (sum_to(full, inp.shape),)


def _data_dependent(*_, **__):
    raise NotImplementedError("masked_select has a data-dependent output shape (no meta "
                              "function)")


masked_select = defop(
    "masked_select", cpu=_masked_select_cpu, cuda=_masked_select_cuda, meta=_data_dependent,
    backward=_masked_select_backward,
    jvp=lambda ctx, t, *_: None if t is None else t.masked_select(ctx.args[1]),
    extra={"save_needs": {0: (1,)}, "out_overlap": True,
           "out_dtype": "masked_select(): self and result must have the same scalar type"})


def _masked_scatter_check(self: Tensor, mask: Tensor, source: Tensor) -> tuple:
    if mask.dtype is not D.bool_:
        if mask.dtype is D.uint8:
            warnings.warn("masked_scatter_ received a mask with dtype torch.uint8, this behavior "
                          "is now deprecated,please use a mask with dtype torch.bool instead.",
                          UserWarning, stacklevel=5)
        raise RuntimeError("masked_scatter_ only supports boolean masks, but got mask with "
                           f"dtype {D.type_name(mask.dtype)}")
    if self.dtype != source.dtype:
        raise RuntimeError("masked_scatter: expected self and source to have same dtypes but "
                           f"got{D.type_name(self.dtype)} and {D.type_name(source.dtype)}")
    return broadcast_shapes(self._shape, mask._shape)


def _masked_scatter_cpu(self: Tensor, mask: Tensor, source: Tensor) -> np.ndarray:
    shape = _masked_scatter_check(self, mask, source)
    m = np.broadcast_to(mask._np, shape)
    count = int(m.sum())
    if count > source.numel():
        raise RuntimeError("Number of elements of source < number of ones in mask")
    out = np.array(np.broadcast_to(self._np, shape), copy=True)
    out[m] = source._np.reshape(-1)[:count]
    return out


def _masked_scatter_cuda(self: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    from refimpl.cuda import _compact

    shape = _masked_scatter_check(self, mask, source)
    return _compact.masked_scatter(self, mask, source, shape)


def _masked_scatter_backward(ctx, grad):
    from refimpl.ops.shape import cat

    inp, mask, source = ctx.args[:3]
    g_self = g_src = None
    if ctx.needs_input_grad[0]:
        g_self = sum_to(grad.masked_fill(mask, 0), inp.shape)
    if ctx.needs_input_grad[2]:
        picked = grad.masked_select(mask)
        rest = source.numel() - picked.numel()
        if rest:
            picked = cat([picked, _zeros((rest,), grad)])
        g_src = picked.reshape(source.shape)
    return g_self, None, g_src


masked_scatter = defop(
    "masked_scatter", cpu=_masked_scatter_cpu, cuda=_masked_scatter_cuda,
    backward=_masked_scatter_backward,
    jvp=_masked_scatter_jvp,
    meta=lambda self, mask, source: TensorSpec(_masked_scatter_check(self, mask, source),
                                               self.dtype, self.device),
    extra={"save_needs": {0: (1,), 2: (1,)}})
masked_scatter_ = inplace_of(masked_scatter)


# -- take / take_along_dim -------------------------------------------------------------------------

def _take_check(self: Tensor, index: Tensor) -> None:
    if index.dtype is not D.int64:
        raise RuntimeError("take(): Expected a long tensor for index, but got "
                           f"{D.type_name(index.dtype)}")


def _take_cpu(self: Tensor, index: Tensor) -> np.ndarray:
    _take_check(self, index)
    n = self.numel()
    idx = index._np
    if idx.size:
        bad = (idx < -n) | (idx >= n)
        if bad.any():
            raise IndexError(f"out of range: tried to access index {int(idx[bad].flat[0])} on a "
                             f"tensor of {n} elements.")
    return np.asarray(self._np.reshape(-1)[idx])


def _take_cuda(self: Tensor, index: Tensor) -> Tensor:
    from refimpl.cuda import _index_ops

    _take_check(self, index)
    return _index_ops.take(self, index)


def _take_backward(ctx, grad):
    from refimpl.ops.indexing import index_put

    inp, index = ctx.args[0], ctx.args[1]
    flat = _zeros((inp.numel(),), grad)
    return (index_put(flat, (index.reshape(-1),), grad.reshape(-1), True).view(inp.shape),)


take = defop(
    "take", cpu=_take_cpu, cuda=_take_cuda, backward=_take_backward,
    meta=lambda self, index: _take_check(self, index) or TensorSpec(index._shape, self.dtype,
                                                                    self.device),
    jvp=lambda ctx, t, *_: None if t is None else t.take(ctx.args[1]),
    extra={"save_needs": {0: (1,)}, "out_overlap": True,
           "out_dtype": "take(): self and out expected to have the same dtype, but got "
                        "self.dtype = {RES} and out.dtype = {OUT}"})


def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """Gather along ``dim`` after broadcasting ``input`` and ``indices`` in the other dims
    (``dim=None``: over the flattened input)."""
    if indices.dtype is not D.int64:
        raise RuntimeError("torch.take_along_dim(): dtype of indices should be Long but got "
                           f"{D.type_name(indices.dtype)}")
    if dim is None:
        return input.reshape(-1).gather(0, indices.reshape(-1))
    if input.dim() != indices.dim():
        raise RuntimeError(
            "torch.take_along_dim(): input and indices should have the same number of "
            f"dimensions, but got {input.dim()} dimensions for input, and {indices.dim()} "
            "dimensions for indices")
    d = wrap_dim(dim, input.dim())
    in_shape, idx_shape = list(input.shape), list(indices.shape)
    in_shape[d] = idx_shape[d] = 1
    shape = list(broadcast_shapes(tuple(in_shape), tuple(idx_shape)))
    in_target, idx_target = list(shape), list(shape)
    in_target[d], idx_target[d] = input.shape[d], indices.shape[d]
    x = input if list(input.shape) == in_target else input.expand(in_target)
    i = indices if list(indices.shape) == idx_target else indices.expand(idx_target)
    if i.numel() and bool((i < 0).any()):  # along a dim, negative indices count from the end
        i = i + (i < 0).to(D.int64) * input.shape[d]
    return x.gather(d, i)


__all__ = ["masked_fill", "masked_scatter", "masked_select", "take", "take_along_dim"]
TENSOR_METHODS = ("masked_fill", "masked_fill_", "take_along_dim")
