"""The ``*_copy`` twins of the views and the ``*_scatter`` ops (spec: TENSOR-004..008).

``permute_copy(x, dims)`` is ``x.permute(dims)`` written into a fresh contiguous tensor:
the view's meta function gives the geometry, the kernel copies the elements it selects
(numpy on the CPU, the device copy kernel on CUDA), and the derivative rules are the
view's own (the gradient of a copy of a view is the gradient of the view). torch's
functionalization uses these ops in place of views.

``slice_scatter(x, src, ...)`` is the inverse: a copy of ``x`` with ``src`` written
through the view ``x.slice(...)`` (likewise ``select_``, ``diagonal_`` and
``as_strided_scatter``). Gradient: the view's part of the output gradient goes to
``src``, the rest to ``x``.
"""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl._memory_format import preserve_layout, preserve_strides
from refimpl._tensor import Tensor, contiguous_strides, wrap_dim
from refimpl.ops import slicing as S
from refimpl.ops import views as V
from refimpl.ops._registry import OpDef, TensorSpec, ViewSpec, defop
from refimpl.ops.views_dtype import _dtype_view_geometry


def _geometry(self: Tensor) -> tuple:
    return self._shape, self._stride, self._offset


def _materialize(self: Tensor, spec: ViewSpec) -> Tensor | np.ndarray:
    """A contiguous copy of the elements the view ``spec`` of ``self``'s storage selects."""
    if self.device.type == "cuda":
        from refimpl.cuda import _movement

        return _movement.copy_view(self, spec)
    view = Tensor._make(self._storage, spec.shape, spec.stride, spec.offset, self.dtype)
    return np.array(view._np, copy=True, order="C")


def _spec_meta(spec, self: Tensor):
    if isinstance(spec, tuple) and not isinstance(spec, ViewSpec):
        return tuple(TensorSpec(s.shape, self.dtype, self.device) for s in spec)
    return TensorSpec(spec.shape, spec.dtype or self.dtype, self.device)


def _copies(spec, self: Tensor):
    if isinstance(spec, tuple) and not isinstance(spec, ViewSpec):
        return tuple(_materialize(self, s) for s in spec)
    return _materialize(self, spec)


def _cloned(t):
    if isinstance(t, (tuple, list)):
        return type(t)(None if x is None else x.clone() for x in t)
    return None if t is None else t.clone()


def copy_of(name: str, view: OpDef, geometry=None, *, method: bool = False,
            node: str | None = None) -> OpDef:
    """The ``*_copy`` op of ``view``: same signature, meta, backward and jvp rule (the
    tangent copied), a fresh contiguous output. ``geometry`` replaces the view's meta
    function where the copy's signature differs."""
    geometry = geometry or view.meta

    def kernel(self, *args, **kwargs):
        return _copies(geometry(self, *args, **kwargs), self)

    def jvp(ctx, *tangents):
        return _cloned(view.jvp(ctx, *tangents))

    return defop(name, meta=lambda self, *a, **k: _spec_meta(geometry(self, *a, **k), self),
                 cpu=kernel, cuda=kernel, backward=view.backward, jvp=jvp, saves=view.saves,
                 node=node or f"{view.node}_copy", diff_outputs=view.diff_outputs,
                 extra={"method": method, **{k: v for k, v in view.extra.items()
                                             if k == "save_needs"}})


alias_copy = copy_of("alias_copy", V.alias, node="AliasBackward0_copy")
as_strided_copy = copy_of("as_strided_copy", S.as_strided)
permute_copy = copy_of("permute_copy", V.permute)
t_copy = copy_of("t_copy", V.t)
transpose_copy = copy_of("transpose_copy", V.transpose)
unbind_copy = copy_of("unbind_copy", S.unbind)
unfold_copy = copy_of("unfold_copy", S.unfold)
unsqueeze_copy = copy_of("unsqueeze_copy", V.unsqueeze)
split_with_sizes_copy = copy_of("split_with_sizes_copy", S.split_with_sizes)


def _expand_copy_geometry(self: Tensor, size, *, implicit: bool = False) -> ViewSpec:
    return V.expand_geometry(self, V.int_list("expand_copy", "size", size))


expand_copy = copy_of("expand_copy", V.expand, _expand_copy_geometry)


def _squeeze_copy_geometry(self: Tensor, dim=None) -> ViewSpec:
    dims = V.squeeze_dims(self, dim)
    keep = [i for i in range(self.dim()) if i not in dims or self._shape[i] != 1]
    return ViewSpec(tuple(self._shape[i] for i in keep), tuple(self._stride[i] for i in keep),
                    self._offset)


squeeze_copy = copy_of("squeeze_copy", V.squeeze_all, _squeeze_copy_geometry)


def _view_copy_geometry(self: Tensor, size) -> ViewSpec:
    if isinstance(size, D.dtype):
        return ViewSpec(*_dtype_view_geometry(self, size), size)
    shape = V.infer_size(V.int_list("view_copy", "size", size), self.numel())
    # a copy never needs the strides to allow a view: read row-major, write row-major
    return ViewSpec(shape, contiguous_strides(shape), 0)


def _view_copy_kernel(self: Tensor, size):
    spec = _view_copy_geometry(self, size)
    if spec.dtype is not None:
        src = Tensor._make(self._storage, spec.shape, spec.stride, spec.offset, spec.dtype)
        return _materialize(src, ViewSpec(spec.shape, spec.stride, spec.offset))
    flat = _materialize(self, ViewSpec(self._shape, self._stride, self._offset))
    if isinstance(flat, np.ndarray):
        return flat.reshape(spec.shape)
    return Tensor._make(flat._storage, spec.shape, spec.stride, 0, flat.dtype)


view_copy = defop(
    "view_copy", meta=lambda self, size: _spec_meta(_view_copy_geometry(self, size), self),
    cpu=_view_copy_kernel, cuda=_view_copy_kernel, saves=(), node="ViewBackward0_copy",
    backward=lambda ctx, g: (None if isinstance(ctx.args[1], D.dtype)
                             else g.reshape(ctx.args[0].shape), None),
    jvp=lambda ctx, t, *_: None if t is None else view_copy(t, ctx.args[1]),
    extra={"method": False})


def _narrow_bounds(self: Tensor, dim: int, start, length: int) -> tuple:
    if self.dim() == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    start, length = S._index(start), S._index(length)
    if self.is_cuda:  # torch's CUDA narrow_copy is narrow(...).clone(): narrow's checks
        self.narrow(dim, start, length)
    if dim >= self.dim():
        raise RuntimeError("Expected dim < static_cast<int64_t>(self_sizes.size()) to be true, "
                           "but got false.  (Could this error message be improved?  If so, "
                           "please report an enhancement request to PyTorch.)")
    d = wrap_dim(dim, self.dim())
    size = self._shape[d]
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], "
                         f"but got {start})")
    if start < 0:
        start += size
    if length < 0 or start > size - length:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size "
                           f"({size}).")
    return d, start, start + length


def _narrow_copy_kernel(self: Tensor, dim: int, start, length: int):
    d, lo, hi = _narrow_bounds(self, dim, start, length)
    return _materialize(self, S.slice_geometry(*_geometry(self), d, lo, hi, 1))


narrow_copy = defop(
    "narrow_copy", cpu=_narrow_copy_kernel, cuda=_narrow_copy_kernel, saves=(),
    meta=lambda self, dim, start, length: TensorSpec(S.slice_geometry(
        *_geometry(self), *_narrow_bounds(self, dim, start, length), 1).shape, self.dtype,
        self.device),
    backward=lambda ctx, g: (S.slice_backward(g, ctx.args[0].shape, *_narrow_bounds(
        ctx.args[0], *ctx.args[1:4]), 1),),
    jvp=lambda ctx, t, *_: None if t is None else narrow_copy(t, *ctx.args[1:4]),
    node="NarrowCopyBackward0")


# -- the scatter ops ---------------------------------------------------------------------------

def _check_src(src: Tensor, spec: ViewSpec) -> None:
    if tuple(src._shape) != tuple(spec.shape):
        raise RuntimeError(
            "expected src to have a size equal to the slice of self. src size = "
            f"{list(src._shape)}, slice size = {list(spec.shape)}")


def _scatter_into(self: Tensor, src: Tensor, geometry, *args) -> Tensor:
    """A copy of ``self`` laid out as ``clone`` lays it out, with ``src`` written through
    ``geometry(shape, strides, offset, *args)`` of that copy."""
    strides = preserve_strides(self._shape, self._stride)
    span = 0 if 0 in self._shape else 1 + sum((n - 1) * s for n, s in zip(self._shape, strides))
    out = Tensor._make(Tensor._empty((span,), self.dtype, self._storage.device)._storage,
                       self._shape, strides, 0, self.dtype)
    spec = geometry(out, *args)
    _check_src(src, spec)
    target = Tensor._make(out._storage, spec.shape, spec.stride, spec.offset, self.dtype)
    if self.device.type == "cuda":
        from refimpl.cuda._index_ops import copy_into

        copy_into(out, self)
        if src.numel():
            copy_into(target, src)
    else:
        out._np[...] = self._np
        if src.numel():
            target._np[...] = src._np.astype(self.dtype.np, copy=False)
    return out


def scatter_op(name: str, names: tuple, defaults: tuple, geometry, view,
               self_grad_is_view: bool = False) -> OpDef:
    """``name(self, src, *args)``: a copy of ``self`` with ``src`` written through the view
    ``view(self, *args)``; ``geometry(tensor, *args)`` gives that view's metadata."""

    def full(args: tuple, kwargs: dict) -> tuple:
        vals = list(args) + [kwargs.get(n, d) for n, d in zip(names[len(args):],
                                                             defaults[len(args):])]
        return tuple(vals)

    def kernel(self, src, *args, **kwargs):
        return _scatter_into(self, src, geometry, *full(args, kwargs))

    def meta(self, src, *args, **kwargs):
        probe = Tensor._make(self._storage, self._shape, contiguous_strides(self._shape), 0,
                             self.dtype)
        _check_src(src, geometry(probe, *full(args, kwargs)))
        return TensorSpec(self._shape, self.dtype, self.device)

    def backward(ctx, g):
        rest = full(ctx.args[2:], ctx.kwargs)
        src = ctx.args[1]
        part = view(g, *rest).clone()
        g_self = None
        if ctx.needs_input_grad[0]:
            g_self = op(g.new_zeros(tuple(g.shape)), part, *rest) if self_grad_is_view else \
                op(g, g.new_zeros(tuple(src.shape)), *rest)
        g_src = part if ctx.needs_input_grad[1] else None
        return (g_self, g_src)

    def jvp(ctx, t_self, t_src=None, *_):
        if t_self is None and t_src is None:
            return None
        rest = full(ctx.args[2:], ctx.kwargs)
        src = ctx.args[1]
        base = t_self if t_self is not None else ctx.args[0].new_zeros(tuple(ctx.args[0].shape))
        part = t_src if t_src is not None else src.new_zeros(tuple(src.shape))
        return op(base, part, *rest)

    op = defop(name, meta=meta, cpu=kernel, cuda=kernel, backward=backward, jvp=jvp, saves=(),
               extra={"layout": preserve_layout})
    return op


slice_scatter = scatter_op(
    "slice_scatter", ("dim", "start", "end", "step"), (0, None, None, 1),
    lambda t, dim, start, end, step: S.slice_geometry(*_geometry(t), dim, start, end, step),
    lambda g, dim, start, end, step: S.slice_op(g, dim, start, end, step))
select_scatter = scatter_op(
    "select_scatter", ("dim", "index"), (None, None),
    lambda t, dim, index: S.select_geometry(*_geometry(t), dim, S._index(index)),
    lambda g, dim, index: g.select(dim, index))
diagonal_scatter = scatter_op(
    "diagonal_scatter", ("offset", "dim1", "dim2"), (0, 0, 1),
    lambda t, offset, dim1, dim2: S.diagonal_geometry(*_geometry(t), offset, dim1, dim2),
    lambda g, offset, dim1, dim2: g.diagonal(offset, dim1, dim2))
as_strided_scatter = scatter_op(
    "as_strided_scatter", ("size", "stride", "storage_offset"), (None, None, None),
    S.as_strided_geometry,
    lambda g, size, stride, storage_offset: g.as_strided(size, stride, storage_offset),
    # torch's as_strided_scatter_backward gives self the gradient's part inside the view
    # (zeros elsewhere), not outside it as the other scatters do: refimpl follows torch
    self_grad_is_view=True)


__all__ = [
    "alias_copy",
    "as_strided_copy",
    "as_strided_scatter",
    "diagonal_scatter",
    "expand_copy",
    "narrow_copy",
    "permute_copy",
    "select_scatter",
    "slice_scatter",
    "split_with_sizes_copy",
    "squeeze_copy",
    "t_copy",
    "transpose_copy",
    "unbind_copy",
    "unfold_copy",
    "unsqueeze_copy",
    "view_copy",
]
