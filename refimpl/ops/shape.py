"""Shape ops with fresh outputs: cat, stack, flip, roll, repeat, tril/triu, diag, ...
(spec: TENSOR-012, TENSOR-306, TENSOR-309). The helpers that return views
(``broadcast_tensors``, ``atleast_*d``, ``meshgrid``) are in ``broadcast.py``.

cat and stack promote dtypes across their inputs (TENSOR-105); cat skips the legacy
empty 1-D tensors (shape ``[0]``) for every shape check, as torch does.
"""

from __future__ import annotations

import math

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor, contiguous_strides, wrap_dim
from refimpl.ops._helpers import np_result
from refimpl.ops._registry import TensorSpec, defop
from refimpl.ops.broadcast import atleast_1d, atleast_2d, atleast_3d
from refimpl.ops.slicing import _view_positions, diagonal_backward, diagonal_geometry
from refimpl.ops.views import dims_args, int_list, reshape, size_args, unsqueeze


def _tensor_list(fn: str, tensors) -> list:
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{fn}(): argument 'tensors' (position 1) must be tuple of Tensors, "
                        f"not {type(tensors).__name__}")
    for i, x in enumerate(tensors):
        if not isinstance(x, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got "
                            f"{type(x).__name__}")
    return list(tensors)


def _promote(tensors) -> D.dtype:
    dtype = tensors[0].dtype
    for x in tensors[1:]:
        dtype = D.promote_types(dtype, x.dtype)
    return dtype


def layout_like(values: np.ndarray, like: Tensor) -> Tensor:
    """A fresh tensor of ``values`` laid out in memory in ``like``'s dim order (its dims
    sorted by stride), as torch's TensorIterator allocates outputs: a transposed input
    gives a transposed result."""
    n = values.ndim
    order = sorted(range(n), key=lambda d: (-like._stride[d], d))
    if order == list(range(n)):
        return Tensor._from_array(np.array(values, copy=True, order="C"))
    buf = np.array(values.transpose(order), copy=True, order="C")
    stride = [0] * n
    for k, st in zip(order, contiguous_strides(buf.shape)):
        stride[k] = st
    flat = Tensor._from_array(buf)
    return Tensor._make(flat._storage, values.shape, tuple(stride), 0, flat.dtype)


def _zeros(shape, like) -> Tensor:
    from refimpl.ops.factories import zeros

    return zeros(tuple(shape), dtype=like.dtype, device=like.device)


def _cast_grad(g: Tensor, inp) -> Tensor:
    if g.dtype.category == 3 and inp.dtype.category < 3:
        g = g.real  # a real input of a complex result gets the real part
    return g.to(inp.dtype) if g.dtype != inp.dtype else g


# -- cat -------------------------------------------------------------------------------------

def _skipped(x) -> bool:
    """torch's legacy rule: 1-D empty tensors take no part in cat's shape checks."""
    return tuple(x.shape) == (0,)


def _cat_geometry(tensors, dim: int) -> tuple:
    """(output shape, wrapped dim) of ``cat``, with torch's checks in torch's order."""
    if not tensors:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    for i, x in enumerate(tensors):
        if x.dim() == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be "
                               "concatenated")
    kept = [(i, x) for i, x in enumerate(tensors) if not _skipped(x)]
    if not kept:
        return (0,), 0
    first = kept[0][1]
    d = wrap_dim(dim, first.dim())
    shape = list(first.shape)
    total = 0
    for i, x in kept:
        if x.dim() != first.dim():
            raise RuntimeError("Tensors must have same number of dimensions: got "
                               f"{first.dim()} and {x.dim()}")
        for k in range(first.dim()):
            if k != d and x.shape[k] != shape[k]:
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {d}. Expected size "
                    f"{shape[k]} but got size {x.shape[k]} for tensor number {i} in the list.")
        total += x.shape[d]
    shape[d] = total
    return tuple(shape), d


def _cat_meta(tensors, dim: int = 0) -> TensorSpec:
    tensors = _tensor_list("cat", tensors)
    shape, _ = _cat_geometry(tensors, dim)
    return TensorSpec(shape, _promote(tensors), tensors[0].device)


def _cat_cpu(tensors, dim: int = 0) -> np.ndarray:
    shape, d = _cat_geometry(tensors, dim)
    dtype = _promote(tensors)
    parts = [x._np.astype(dtype.np, copy=False) for x in tensors if not _skipped(x)]
    if not parts:
        return np.zeros(shape, dtype.np)
    return np_result(np.concatenate(parts, axis=d), dtype)


def _cat_cuda(tensors, dim: int = 0) -> Tensor:
    from refimpl.cuda import _movement

    shape, d = _cat_geometry(tensors, dim)
    return _movement.cat(tensors, d, shape, _promote(tensors))


def _cat_backward(ctx, grad):
    tensors = ctx.args[0]
    _, d = _cat_geometry(tensors, ctx.args[1] if len(ctx.args) > 1 else ctx.kwargs.get("dim", 0))
    grads, start = [], 0
    for x in tensors:
        if _skipped(x):
            grads.append(_zeros((0,), x))
            continue
        n = x.shape[d]
        grads.append(_cast_grad(grad.narrow(d, start, n), x))
        start += n
    return (grads,)


def _cat_jvp(ctx, tangents, *_):
    tensors = ctx.args[0]
    if tangents is None or all(t is None for t in tangents):
        return None
    parts = [t if t is not None else _zeros(x.shape, x) for t, x in zip(tangents, tensors)]
    return cat_op(parts, ctx.args[1] if len(ctx.args) > 1 else ctx.kwargs.get("dim", 0))


def _cat_layout(shape, args: tuple, kwargs: dict):
    """cat's output takes the memory format its inputs all suggest (row-major when they
    disagree); legacy empty 1-d inputs have no say (TENSOR-014)."""
    from refimpl._memory_format import contiguous_format, format_strides, suggest_format

    formats = {suggest_format(x._shape, x._stride) for x in args[0] if not _skipped(x)}
    if len(formats) != 1:
        return None
    fmt = formats.pop()
    if fmt is contiguous_format:
        return None
    return format_strides(shape if shape is not None else _cat_meta(*args, **kwargs).shape, fmt)


cat_op = defop("cat", meta=_cat_meta, cpu=_cat_cpu, cuda=_cat_cuda, backward=_cat_backward,
               jvp=_cat_jvp,
               saves=(), extra={"method": False, "layout": _cat_layout, "out_overlap": True,
                                "device_check": ("cat", ("tensors",))})


def cat(tensors, dim: int = 0, *, axis: int | None = None, out: Tensor | None = None) -> Tensor:
    """Concatenate along ``dim``, promoting dtypes; 1-D empty tensors are skipped."""
    if out is not None and isinstance(tensors, (list, tuple)):  # skipped inputs count too
        from refimpl._dispatch import assert_no_input_overlap

        assert_no_input_overlap(out, [x for x in tensors if isinstance(x, Tensor)])
    tensors = _tensor_list("cat", tensors)
    d = axis if axis is not None else dim
    return cat_op(tensors, d) if out is None else cat_op(tensors, d, out=out)


concat = concatenate = cat


# -- stack and the *stack family ---------------------------------------------------------------

def _stack_meta(tensors, dim: int = 0) -> TensorSpec:
    tensors = _tensor_list("stack", tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    first = tensors[0]
    d = wrap_dim(dim, first.dim() + 1)
    for i, x in enumerate(tensors[1:], 1):
        if x.shape != first.shape:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                               f"{list(first.shape)} at entry 0 and {list(x.shape)} at entry {i}")
    shape = tuple(first.shape[:d]) + (len(tensors),) + tuple(first.shape[d:])
    return TensorSpec(shape, _promote(tensors), first.device)


def _stack_cpu(tensors, dim: int = 0) -> np.ndarray:
    spec = _stack_meta(tensors, dim)
    d = wrap_dim(dim, tensors[0].dim() + 1)
    return np_result(np.stack([x._np.astype(spec.dtype.np, copy=False) for x in tensors],
                              axis=d), spec.dtype)


def _stack_cuda(tensors, dim: int = 0) -> Tensor:
    from refimpl.cuda import _movement

    spec = _stack_meta(tensors, dim)
    return _movement.stack(tensors, wrap_dim(dim, tensors[0].dim() + 1), spec.shape, spec.dtype)


def _stack_dim(ctx) -> int:
    dim = ctx.args[1] if len(ctx.args) > 1 else ctx.kwargs.get("dim", 0)
    return wrap_dim(dim, len(ctx.args[0][0].shape) + 1)


def _stack_jvp(ctx, tangents, *_):
    if tangents is None or all(t is None for t in tangents):
        return None
    parts = [t if t is not None else _zeros(x.shape, x) for t, x in zip(tangents, ctx.args[0])]
    return stack(parts, _stack_dim(ctx))


stack = defop(
    "stack", meta=_stack_meta, cpu=_stack_cpu, cuda=_stack_cuda, saves=(), jvp=_stack_jvp,
    backward=lambda ctx, g: ([_cast_grad(gi, x) for gi, x in
                              zip(g.unbind(_stack_dim(ctx)), ctx.args[0])],),
    extra={"method": False, "device_check": ("cat", ("tensors",))})  # torch's stack runs cat


def _nonempty(fn: str, tensors) -> list:
    tensors = _tensor_list(fn, tensors)
    if not tensors:
        raise RuntimeError(f"{fn} expects a non-empty TensorList")
    return tensors


def hstack(tensors, *, out: Tensor | None = None) -> Tensor:
    """Concatenate column-wise (dim 1; dim 0 for 1-D inputs)."""
    tensors = [atleast_1d(x) for x in _nonempty("hstack", tensors)]
    return cat(tensors, 0 if tensors[0].dim() == 1 else 1, out=out)


def vstack(tensors, *, out: Tensor | None = None) -> Tensor:
    """Concatenate row-wise after ``atleast_2d``."""
    return cat([atleast_2d(x) for x in _nonempty("vstack", tensors)], 0, out=out)


row_stack = vstack


def dstack(tensors, *, out: Tensor | None = None) -> Tensor:
    """Concatenate depth-wise (dim 2) after ``atleast_3d``."""
    return cat([atleast_3d(x) for x in _nonempty("dstack", tensors)], 2, out=out)


def column_stack(tensors, *, out: Tensor | None = None) -> Tensor:
    """Stack 0-D/1-D inputs as columns, then ``hstack``."""
    cols = [reshape(x, (x.numel(), 1)) if x.dim() <= 1 else x
            for x in _nonempty("column_stack", tensors)]
    return hstack(cols, out=out)


# -- flip / roll -----------------------------------------------------------------------------

def _flip_dims(self: Tensor, dims) -> tuple:
    n = self.dim()
    wrapped = []
    for d in dims:
        w = wrap_dim(d, n)
        if w in wrapped:
            raise RuntimeError(f"dim {w} appears multiple times in the list of dims")
        wrapped.append(w)
    return tuple(wrapped)


def _flip_cpu(self: Tensor, *dims) -> np.ndarray:
    axes = _flip_dims(self, dims_args(dims))
    arr = self._np
    return layout_like(np.flip(arr, axes) if arr.ndim else arr, self)


def _flip_cuda(self: Tensor, *dims) -> Tensor:
    from refimpl.cuda import _movement

    return _movement.flip(self, _flip_dims(self, dims_args(dims)))


_flip = defop(
    "flip", meta=lambda self, *dims: TensorSpec(
        self._shape if _flip_dims(self, dims_args(dims)) is not None else (), self.dtype,
        self.device),
    cpu=_flip_cpu, cuda=_flip_cuda, saves=(),
    backward=lambda ctx, g: (g.flip(dims_args(ctx.args[1:])),),
    jvp=lambda ctx, t, *_: None if t is None else t.flip(dims_args(ctx.args[1:])),
    extra={"method": False})


def flip(input: Tensor, *dims, **kwargs) -> Tensor:
    """Reverse the order of elements along ``dims`` (``flip(x, dims)``, ``x.flip(*dims)``
    or ``flip(x, dims=...)``)."""
    if "dims" in kwargs:
        if dims:
            raise TypeError("flip() got multiple values for argument 'dims'")
        dims = (kwargs.pop("dims"),)
    if not dims:
        raise TypeError('flip() missing 1 required positional arguments: "dims"')
    if kwargs:
        raise TypeError(f"flip() got an unexpected keyword argument '{next(iter(kwargs))}'")
    return _flip(input, *dims)


def fliplr(input: Tensor) -> Tensor:
    """Flip dim 1 (needs at least 2 dims)."""
    if input.dim() < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, 1)


def flipud(input: Tensor) -> Tensor:
    """Flip dim 0 (needs at least 1 dim)."""
    if input.dim() < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, 0)


def _roll_args(self: Tensor, shifts, dims) -> tuple:
    shifts = (shifts,) if isinstance(shifts, int) else tuple(int_list("roll", "shifts", shifts))
    dims = () if dims is None else (dims,) if isinstance(dims, int) else tuple(dims)
    if not shifts:
        raise RuntimeError("`shifts` required")
    if len(shifts) != len(dims) and not (not dims and len(shifts) == 1):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                           f"dims:{len(dims)}")
    if dims and self.dim() == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    return shifts, tuple(wrap_dim(d, self.dim()) for d in dims)


def _roll_cpu(self: Tensor, shifts, dims=None) -> np.ndarray:
    shifts, dims = _roll_args(self, shifts, dims)
    arr = self._np
    if not dims:
        return np.roll(arr.reshape(-1), shifts[0]).reshape(arr.shape)
    return np.roll(arr, shifts, dims)


def _roll_cuda(self: Tensor, shifts, dims=None) -> Tensor:
    from refimpl.cuda import _movement

    shifts, dims = _roll_args(self, shifts, dims)
    return _movement.roll(self, shifts, dims)


def _roll_inverse(ctx) -> tuple:
    shifts = ctx.args[1]
    dims = ctx.args[2] if len(ctx.args) > 2 else ctx.kwargs.get("dims")
    neg = -shifts if isinstance(shifts, int) else [-s for s in shifts]
    return neg, dims


def _roll_jvp(ctx, t, *_):
    if t is None:
        return None
    dims = ctx.args[2] if len(ctx.args) > 2 else ctx.kwargs.get("dims")
    return t.roll(ctx.args[1], dims)


roll = defop(
    "roll", meta=lambda self, shifts, dims=None: TensorSpec(
        self._shape if _roll_args(self, shifts, dims) else (), self.dtype, self.device),
    cpu=_roll_cpu, cuda=_roll_cuda, saves=(), backward=lambda ctx, g: (g.roll(*_roll_inverse(ctx)),),
    jvp=_roll_jvp)


# -- repeat / tile / repeat_interleave -------------------------------------------------------

def _repeat_shape(self: Tensor, repeats) -> tuple:
    if len(repeats) < self.dim():
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    padded = (1,) * (len(repeats) - self.dim()) + tuple(self._shape)
    shape = tuple(p * r for p, r in zip(padded, repeats))
    if any(s < 0 for s in shape):
        bad = next(s for s in shape if s < 0)
        raise RuntimeError(f"Trying to create tensor with negative dimension {bad}: "
                           f"{list(shape)}")
    return shape


def _repeat_cpu(self: Tensor, *repeats) -> np.ndarray:
    repeats = size_args(repeats, "repeat", "repeats")
    _repeat_shape(self, repeats)
    arr = self._np.reshape((1,) * (len(repeats) - self.dim()) + tuple(self._shape))
    return np.tile(arr, repeats)


def _repeat_cuda(self: Tensor, *repeats) -> Tensor:
    from refimpl.cuda import _movement

    repeats = size_args(repeats, "repeat", "repeats")
    return _movement.repeat(self, repeats, _repeat_shape(self, repeats))


def _repeat_backward(ctx, grad):
    inp = ctx.args[0]
    repeats = size_args(ctx.args[1:], "repeat", "repeats")
    padded = (1,) * (len(repeats) - len(inp.shape)) + tuple(inp.shape)
    if grad.numel() == 0:
        return (_zeros(inp.shape, grad),)
    split = []
    for r, s in zip(repeats, padded):
        split += [r, s]
    g = grad.reshape(split).sum(list(range(0, 2 * len(repeats), 2)))
    return (g.reshape(inp.shape),)


repeat = defop(
    "repeat", meta=lambda self, *repeats: TensorSpec(
        _repeat_shape(self, size_args(repeats, "repeat", "repeats")), self.dtype, self.device),
    cpu=_repeat_cpu, cuda=_repeat_cuda, saves=(), backward=_repeat_backward,
    jvp=lambda ctx, t, *_: None if t is None else t.repeat(*ctx.args[1:]))


def tile(input: Tensor, *dims) -> Tensor:
    """``repeat`` with ``dims`` padded by leading ones to the input's rank."""
    dims = size_args(dims, "tile", "dims")
    dims = (1,) * (input.dim() - len(dims)) + dims
    return repeat(input, dims)


def _repeats_to_indices(repeats: Tensor, output_size=None) -> Tensor:
    from refimpl.ops.factories import tensor

    if repeats.dim() != 1:
        raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
    if repeats.dtype not in (D.int32, D.int64):
        raise NotImplementedError(
            f"\"repeat_interleave_cpu\" not implemented for '{D.type_name(repeats.dtype)}'")
    if repeats.is_cuda:
        # built on the device; refimpl does not check for negative counts on CUDA
        from refimpl.cuda import _compact

        return _compact.repeat_indices(repeats, output_size).to(repeats.dtype)
    counts = repeats._np
    if (counts < 0).any():
        raise RuntimeError("repeats can not be negative")
    idx = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    return tensor(idx.astype(repeats.dtype.np), device=repeats.device)


def repeat_interleave(input: Tensor, repeats=None, dim: int | None = None, *,
                      output_size: int | None = None) -> Tensor:
    """Repeat each element ``repeats`` times along ``dim`` (the flattened input when None);
    ``repeat_interleave(counts)`` alone gives the index vector ``[0]*c0 + [1]*c1 + ...``."""
    if repeats is None:
        return _repeats_to_indices(input, output_size)
    x = input.flatten() if dim is None else input
    d = wrap_dim(0 if dim is None else dim, input.dim())
    if isinstance(repeats, Tensor) and repeats.dim() == 0:
        repeats = repeats.reshape(1).expand(x.shape[d])
    if not isinstance(repeats, Tensor):
        if repeats < 0:
            raise RuntimeError("Repeats must be non-negative")
        shape = list(x.shape)
        shape.insert(d + 1, repeats)
        from refimpl._memory_format import contiguous_format
        from refimpl.ops.copy import clone

        return clone(unsqueeze(x, d + 1).expand(shape),
                     memory_format=contiguous_format).flatten(d, d + 1)
    if repeats.dim() != 1:
        raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
    if repeats.shape[0] != x.shape[d]:
        raise RuntimeError("repeats must have the same size as input along dim, but got "
                           f"repeats.size(0) = {repeats.shape[0]} and input.size({d}) = "
                           f"{x.shape[d]}")
    return x.index_select(d, _repeats_to_indices(repeats))


# -- tril / triu -----------------------------------------------------------------------------

def _tri(name: str, fn):
    def check(self: Tensor, diagonal=0) -> int:
        if self.dim() < 2:
            raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
        if isinstance(diagonal, bool) or not isinstance(diagonal, int):
            raise TypeError(f"{name}(): argument 'diagonal' (position 1) must be int, not "
                            f"{type(diagonal).__name__}")
        return diagonal

    def cpu(self: Tensor, diagonal=0) -> np.ndarray:
        return fn(self._np, check(self, diagonal))

    def cuda(self: Tensor, diagonal=0) -> Tensor:
        from refimpl.cuda import _movement

        return _movement.tri(self, check(self, diagonal), name == "tril")

    def k(ctx) -> int:
        return ctx.args[1] if len(ctx.args) > 1 else ctx.kwargs.get("diagonal", 0)

    return defop(
        name, meta=lambda self, diagonal=0: TensorSpec(
            self._shape if check(self, diagonal) is not None else (), self.dtype, self.device),
        cpu=cpu, cuda=cuda, saves=(), backward=lambda ctx, g: (getattr(g, name)(k(ctx)),),
        jvp=lambda ctx, t, *_: None if t is None else getattr(t, name)(k(ctx)))


tril = _tri("tril", np.tril)
triu = _tri("triu", np.triu)


# -- diag / diag_embed / diagonal_copy ---------------------------------------------------------

def _diag_embed_geometry(self: Tensor, offset: int, dim1: int, dim2: int) -> tuple:
    n = self.dim() + 1
    d1, d2 = wrap_dim(dim1, n), wrap_dim(dim2, n)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    size = self._shape[-1] + abs(offset)
    rest = iter(self._shape[:-1])
    shape = tuple(size if i in (d1, d2) else next(rest) for i in range(n))
    return shape, d1, d2


def _diag_embed_cpu(self: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1):
    shape, d1, d2 = _diag_embed_geometry(self, offset, dim1, dim2)
    out = np.zeros(math.prod(shape), self.dtype.np)
    spec = diagonal_geometry(shape, contiguous_strides(shape), 0, offset, d1, d2)
    if self.numel():
        out[_view_positions(spec.shape, spec.stride, spec.offset)] = self._np
    return out.reshape(shape)


def _diag_embed_cuda(self: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    from refimpl.cuda import _movement

    shape, d1, d2 = _diag_embed_geometry(self, offset, dim1, dim2)
    spec = diagonal_geometry(shape, contiguous_strides(shape), 0, offset, d1, d2)
    return _movement.diag_embed(self, shape, spec)


def _diag_embed_args(ctx) -> tuple:
    names, defaults = ("offset", "dim1", "dim2"), (0, -2, -1)
    return tuple(ctx.args[i + 1] if len(ctx.args) > i + 1 else ctx.kwargs.get(n, dflt)
                 for i, (n, dflt) in enumerate(zip(names, defaults)))


diag_embed = defop(
    "diag_embed", meta=lambda self, offset=0, dim1=-2, dim2=-1: TensorSpec(
        _diag_embed_geometry(self, offset, dim1, dim2)[0], self.dtype, self.device),
    cpu=_diag_embed_cpu, cuda=_diag_embed_cuda, saves=(),
    backward=lambda ctx, g: (g.diagonal(*_diag_embed_args(ctx)),),
    jvp=lambda ctx, t, *_: None if t is None else diag_embed(t, *_diag_embed_args(ctx)))


def _diagonal_copy_cpu(self: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1):
    spec = diagonal_geometry(self._shape, self._stride, self._offset, offset, dim1, dim2)
    view = Tensor._make(self._storage, spec.shape, spec.stride, spec.offset, self.dtype)
    return np.array(view._np, copy=True, order="C")


def _diagonal_copy_cuda(self: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1):
    from refimpl.cuda import _movement

    spec = diagonal_geometry(self._shape, self._stride, self._offset, offset, dim1, dim2)
    return _movement.copy_view(self, spec)


def _diagonal_args(ctx) -> tuple:
    """``(offset, dim1, dim2)`` of a diagonal_copy call, given positionally or by name."""
    given = dict(zip(("offset", "dim1", "dim2"), ctx.args[1:4]), **ctx.kwargs)
    return given.get("offset", 0), given.get("dim1", 0), given.get("dim2", 1)


diagonal_copy = defop(
    "diagonal_copy", meta=lambda self, offset=0, dim1=0, dim2=1: TensorSpec(
        diagonal_geometry(self._shape, self._stride, 0, offset, dim1, dim2).shape, self.dtype,
        self.device),
    cpu=_diagonal_copy_cpu, cuda=_diagonal_copy_cuda, saves=(), node="DiagonalBackward0_copy",
    backward=lambda ctx, g: (diagonal_backward(g, ctx.args[0].shape, *_diagonal_args(ctx)),),
    jvp=lambda ctx, t, *_: None if t is None else diagonal_copy(t, *_diagonal_args(ctx)),
    extra={"method": False})


def diag(input: Tensor, diagonal: int = 0) -> Tensor:
    """A 1-D input becomes a diagonal matrix; a 2-D input gives a copy of its diagonal."""
    if input.dim() == 1:
        return diag_embed(input, diagonal, 0, 1)
    if input.dim() == 2:
        return diagonal_copy(input, diagonal, 0, 1)
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.dim()}D")


__all__ = [
    "cat",
    "column_stack",
    "concat",
    "concatenate",
    "diag",
    "diag_embed",
    "diagonal_copy",
    "dstack",
    "flip",
    "fliplr",
    "flipud",
    "hstack",
    "repeat",
    "repeat_interleave",
    "roll",
    "row_stack",
    "stack",
    "tile",
    "tril",
    "triu",
    "vstack",
]
TENSOR_METHODS = ("fliplr", "flipud", "tile", "repeat_interleave", "diag", "flip")
