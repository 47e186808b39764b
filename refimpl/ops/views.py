"""View ops: outputs alias input 0's storage (spec: TENSOR-010 and following).

A view op's meta function returns a ``ViewSpec`` (shape, stride, offset); the
dispatcher makes the alias, sharing the storage and the version counter.
"""

from __future__ import annotations

import math

from refimpl._tensor import Tensor, contiguous_strides, wrap_dim
from refimpl.ops._registry import ViewSpec, defop


def infer_size(shape, numel: int) -> tuple:
    """Resolve one ``-1`` in ``shape`` against ``numel``, with torch's errors."""
    shape = tuple(int(s) for s in shape)
    infer = None
    known = 1
    for i, s in enumerate(shape):
        if s == -1:
            if infer is not None:
                raise RuntimeError("only one dimension can be inferred")
            infer = i
        elif s < 0:
            raise RuntimeError(f"invalid shape dimension {s}")
        else:
            known *= s
    if infer is not None:
        if known == 0 or numel % known:
            if known == 0:
                raise RuntimeError(
                    f"cannot reshape tensor of 0 elements into shape {list(shape)} because the "
                    "unspecified dimension size -1 can be any value and is ambiguous"
                )
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape = shape[:infer] + (numel // known,) + shape[infer + 1:]
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def view_strides(old_shape, old_stride, new_shape):
    """Strides that let ``new_shape`` alias a tensor of ``old_shape``/``old_stride``,
    or None when no such strides exist (torch's computeStride)."""
    numel = math.prod(old_shape)
    if numel == 0:
        return contiguous_strides(new_shape) if old_shape != tuple(new_shape) else old_stride
    new_stride = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = old_stride[-1] if old_stride else 1
    tensor_numel = 1
    view_numel = 1
    for tensor_d in range(len(old_shape) - 1, -1, -1):
        tensor_numel *= old_shape[tensor_d]
        if tensor_d == 0 or (
            old_shape[tensor_d - 1] != 1
            and old_stride[tensor_d - 1] != tensor_numel * chunk_base_stride
        ):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_stride[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = old_stride[tensor_d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(new_stride)


def _size_args(size) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return tuple(size[0])
    return tuple(size)


def _view_meta(self: Tensor, *size) -> ViewSpec:
    shape = infer_size(_size_args(size), self.numel())
    stride = view_strides(self._shape, self._stride, shape)
    if stride is None:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one "
            "dimension spans across two contiguous subspaces). Use .reshape(...) instead."
        )
    return ViewSpec(shape, stride, self._offset)


def _view_backward(ctx, grad):
    return (grad.reshape(ctx.args[0].shape),)


view = defop("view", kind="view", meta=_view_meta, backward=_view_backward,
             jvp=lambda ctx, t: t.view(ctx.outputs[0].shape))


def _transpose_meta(self: Tensor, dim0: int, dim1: int) -> ViewSpec:
    n = self.dim()
    d0, d1 = wrap_dim(dim0, n), wrap_dim(dim1, n)
    shape, stride = list(self._shape), list(self._stride)
    if n:
        shape[d0], shape[d1] = shape[d1], shape[d0]
        stride[d0], stride[d1] = stride[d1], stride[d0]
    return ViewSpec(tuple(shape), tuple(stride), self._offset)


transpose = defop("transpose", kind="view", meta=_transpose_meta,
                  backward=lambda ctx, g: (g.transpose(ctx.args[1], ctx.args[2]),))


def _t_meta(self: Tensor) -> ViewSpec:
    if self.dim() > 2:
        raise RuntimeError(
            f"t() expects a tensor with <= 2 dimensions, but self is {self.dim()}D"
        )
    return _transpose_meta(self, 0, self.dim() - 1 if self.dim() else 0)


t = defop("t", kind="view", meta=_t_meta, backward=lambda ctx, g: (g.t(),))

__all__ = ["view", "transpose", "t", "infer_size", "view_strides"]
