"""Reshaping views: outputs alias input 0's storage (spec: TENSOR-004..008, TENSOR-303).

A view op's meta function returns a ``ViewSpec`` (shape, stride, offset); the dispatcher
makes the alias, sharing the storage and the version counter and setting ``_base``. The
meta functions read metadata only, so fake tensors run them unchanged.

This module holds the views that rearrange or regroup dims (view, reshape, transpose,
permute, expand, squeeze, unsqueeze, movedim, flatten, unflatten). Views that pick a
subset of the elements (select, slicing, split, diagonal, as_strided, ...) are in
``slicing.py``; views that change the dtype (``view(dtype)``, ``view_as_real``, real/imag)
in ``views_dtype.py``.
"""

from __future__ import annotations

import math

from refimpl import _dtype as D
from refimpl._tensor import Size, Tensor, contiguous_strides, wrap_dim
from refimpl.ops._registry import TensorSpec, ViewSpec, defop
from refimpl.ops.views_dtype import view_dtype


def type_str(t: Tensor) -> str:
    """torch's legacy type string of a tensor (``torch.FloatTensor``, ``torch.cuda....``)."""
    prefix = "torch.cuda." if t.device.type == "cuda" else "torch."
    return f"{prefix}{D.legacy_type_name(t.dtype)}"


def int_list(fn: str, arg: str, values) -> tuple:
    """``values`` as a tuple of Python ints, with torch's TypeError for non-integers."""
    out = []
    for i, v in enumerate(values):
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise TypeError(
                f"{fn}(): argument '{arg}' failed to unpack the object at pos {i + 1} with "
                f"error \"type must be tuple of ints,but got {type(v).__name__}\""
            )
        out.append(v.__index__())
    return tuple(out)


def size_args(size, fn: str = "view", arg: str = "size") -> tuple:
    """Sizes given as varargs (``view(2, 3)``) or as one sequence (``view((2, 3))``)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    return int_list(fn, arg, size)


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
            raise RuntimeError(f"invalid shape dimension {s} at index {i} of shape {list(shape)}")
        else:
            known *= s
    if infer is not None:
        if known == 0 or numel % known:
            if known == 0 and numel == 0:
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
    if not old_shape:
        return (1,) * len(new_shape)
    if type(old_shape) is tuple and old_stride == contiguous_strides(old_shape):
        # a dense row-major tensor takes any shape of its size with row-major strides
        return contiguous_strides(tuple(new_shape))
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


def _same_view(ctx, tangent, name: str, *args):
    return None if tangent is None else getattr(tangent, name)(*args)


# -- view / view_as / reshape / flatten / unflatten --------------------------------------

# (shape, strides, offset, requested sizes) -> the ViewSpec of a view that succeeded:
# a model asks for the same few views every step, and sizes, -1 resolution and strides
# are a pure function of this key (kept only for sizes given as plain ints)
_VIEW_SPECS: dict = {}


_SEQ = (tuple, list, Size)


def _spec_key(self: Tensor, size: tuple):
    """The memo key of ``view(*size)`` on ``self``, or None when a size is not a plain int
    (a 0-d tensor's value may change; a bool is refused)."""
    if len(size) == 1 and type(size[0]) in _SEQ:
        size = size[0]
    for v in size:
        if type(v) is not int:
            return None
    return (self._shape, self._stride, self._offset, tuple(size))


def _view_meta(self: Tensor, *size) -> ViewSpec:
    key = _spec_key(self, size)
    spec = _VIEW_SPECS.get(key) if key is not None else None
    if spec is not None:
        return spec
    shape = infer_size(size_args(size), self.numel())
    stride = view_strides(self._shape, self._stride, shape)
    if stride is None:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one "
            "dimension spans across two contiguous subspaces). Use .reshape(...) instead."
        )
    spec = ViewSpec(shape, stride, self._offset)
    if key is not None:
        if len(_VIEW_SPECS) > 1024:
            _VIEW_SPECS.clear()
        _VIEW_SPECS[key] = spec
    return spec


view_op = defop("view", kind="view", meta=_view_meta, saves=(),
                backward=lambda ctx, g: (g.reshape(ctx.args[0].shape),),
                jvp=lambda ctx, t, *_: None if t is None else t.reshape(ctx.outputs[0].shape),
                extra={"method": False})


def view(self: Tensor, *size) -> Tensor:
    """A view with a new shape (TENSOR-008), or ``view(dtype)``: the same bytes read as
    another dtype (the last dim scales with the element size ratio)."""
    if len(size) == 1 and isinstance(size[0], D.dtype):
        return view_dtype(self, size[0])
    if not size:
        raise TypeError(
            "view() received an invalid combination of arguments - got (), but expected one "
            "of:\n * (torch.dtype dtype)\n * (tuple of ints size)\n")
    return view_op(self, *size)


def view_as(self: Tensor, other: Tensor) -> Tensor:
    """``self.view(other.shape)``."""
    return view_op(self, other.shape)


def _unsafe_view_kernel(self: Tensor, *size) -> Tensor:
    shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    return Tensor._make(self._storage, shape, contiguous_strides(shape), self._offset,
                        self.dtype)


# reshape of a non-viewable input: a view of a private contiguous copy that autograd does
# not track as a view (torch's _unsafe_view).
unsafe_view = defop(
    "_unsafe_view", meta=lambda self, *size: TensorSpec(size_args(size), self.dtype,
                                                        self.device),
    cpu=_unsafe_view_kernel, cuda=_unsafe_view_kernel, saves=(),
    backward=lambda ctx, g: (g.reshape(ctx.args[0].shape),),
    jvp=lambda ctx, t, *_: t.reshape(ctx.outputs[0].shape), extra={"method": False})


def reshape(self: Tensor, *shape) -> Tensor:
    """A view when the strides allow it, else a contiguous copy (TENSOR-006)."""
    key = _spec_key(self, shape)
    if key is not None and key in _VIEW_SPECS:  # a view of these sizes was made before
        return view_op(self, *shape)
    shape = infer_size(size_args(shape, "reshape", "shape"), self.numel())
    if view_strides(self._shape, self._stride, shape) is not None:
        return view_op(self, shape)
    from refimpl._memory_format import contiguous_format
    from refimpl.ops.copy import clone

    return unsafe_view(clone(self, memory_format=contiguous_format), shape)


def reshape_as(self: Tensor, other: Tensor) -> Tensor:
    """``self.reshape(other.shape)``."""
    return reshape(self, other.shape)


def flatten(self: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge dims ``start_dim..end_dim`` into one (a view when possible, TENSOR-006)."""
    if self.dim() == 0:
        return reshape(self, 1)
    start, end = wrap_dim(start_dim, self.dim()), wrap_dim(end_dim, self.dim())
    if start > end:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if start == end:
        return self
    shape = self._shape[:start] + (math.prod(self._shape[start:end + 1]),) + \
        self._shape[end + 1:]
    return reshape(self, shape)


def unflatten(self: Tensor, dim: int, sizes) -> Tensor:
    """Split dim ``dim`` into ``sizes`` (one of them may be -1); a view."""
    if self.dim() == 0:
        raise RuntimeError("unflatten got an unexpected error:\nDimension specified as 0 but "
                           "tensor has no dimensions")
    d = wrap_dim(dim, self.dim())
    sizes = int_list("unflatten", "sizes", sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    if sizes.count(-1) > 1:
        raise RuntimeError("unflatten got an unexpected error:\nonly one dimension can be "
                           "inferred")
    size = self._shape[d]
    known = math.prod(s for s in sizes if s != -1)
    if -1 in sizes:
        ok = known != 0 and size % known == 0
        sizes = tuple(size // known if s == -1 else s for s in sizes) if ok else sizes
    else:
        ok = known == size
    if not ok:
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the "
                           f"size of dim {dim} ({size}) in the input tensor")
    return view_op(self, self._shape[:d] + sizes + self._shape[d + 1:])


# -- transpose / permute / movedim ---------------------------------------------------------

def transpose_geometry(self: Tensor, dim0: int, dim1: int) -> ViewSpec:
    """The metadata of ``self.transpose(dim0, dim1)``."""
    n = self.dim()
    d0, d1 = wrap_dim(dim0, n), wrap_dim(dim1, n)
    shape, stride = list(self._shape), list(self._stride)
    if n:
        shape[d0], shape[d1] = shape[d1], shape[d0]
        stride[d0], stride[d1] = stride[d1], stride[d0]
    return ViewSpec(tuple(shape), tuple(stride), self._offset)


transpose = defop("transpose", kind="view", meta=transpose_geometry, saves=(),
                  backward=lambda ctx, g: (g.transpose(ctx.args[1], ctx.args[2]),),
                  jvp=lambda ctx, t, *_: _same_view(ctx, t, "transpose", *ctx.args[1:3]))


def swapaxes(self: Tensor, axis0: int, axis1: int) -> Tensor:
    """Alias of ``transpose``."""
    return transpose(self, axis0, axis1)


swapdims = swapaxes


def t_geometry(self: Tensor, name: str = "t") -> ViewSpec:
    """The metadata of ``self.t()`` (at most 2 dims)."""
    if self.dim() > 2:
        raise RuntimeError(
            f"{name}() expects a tensor with <= 2 dimensions, but self is {self.dim()}D"
        )
    return transpose_geometry(self, 0, self.dim() - 1 if self.dim() else 0)


t = defop("t", kind="view", meta=t_geometry, saves=(), backward=lambda ctx, g: (g.t(),),
          jvp=lambda ctx, tg: _same_view(ctx, tg, "t"))


def dims_args(dims) -> tuple:
    """Dims given as varargs or as one sequence."""
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        return tuple(dims[0])
    return tuple(dims)


def _permute_meta(self: Tensor, *dims) -> ViewSpec:
    dims = dims_args(dims)
    n = self.dim()
    if len(dims) != n:
        raise RuntimeError(
            "permute(sparse_coo): number of dimensions in the tensor input does not match the "
            f"length of the desired ordering of dimensions i.e. input.dim() = {n} is not "
            f"equal to len(dims) = {len(dims)}")
    wrapped = [wrap_dim(d, n) for d in dims]
    if len(set(wrapped)) != n:
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return ViewSpec(tuple(self._shape[d] for d in wrapped),
                    tuple(self._stride[d] for d in wrapped), self._offset)


def _permute_backward(ctx, g):
    n = len(ctx.args[0].shape)
    wrapped = [d % n for d in dims_args(ctx.args[1:])] if n else []
    inverse = [0] * n
    for i, d in enumerate(wrapped):
        inverse[d] = i
    return (g.permute(inverse),)


permute = defop("permute", kind="view", meta=_permute_meta, saves=(),
                backward=_permute_backward,
                jvp=lambda ctx, t, *_: _same_view(ctx, t, "permute", *ctx.args[1:]))


def movedim(self: Tensor, source, destination) -> Tensor:
    """Move dims ``source`` to positions ``destination`` (a permute view)."""
    n = self.dim()
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(src) != len(dst):
        raise RuntimeError(
            f"movedim: Invalid source or destination dims: source ({list(src)} dims) should "
            f"contain the same number of dims as destination ({list(dst)} dims)")
    src_w = [wrap_dim(d, n) for d in src]
    dst_w = [wrap_dim(d, n) for d in dst]
    if len(set(src_w)) != len(src_w):
        raise RuntimeError(f"movedim: repeated dim in `source` ({list(src)})")
    if len(set(dst_w)) != len(dst_w):
        raise RuntimeError(f"movedim: repeated dim in `destination` ({list(dst)})")
    order = [-1] * n
    for s, d in zip(src_w, dst_w):
        order[d] = s
    rest = iter(d for d in range(n) if d not in src_w)
    order = [next(rest) if o == -1 else o for o in order]
    return permute(self, order)


moveaxis = movedim


# -- expand / squeeze / unsqueeze ----------------------------------------------------------

def expand_geometry(self: Tensor, sizes) -> ViewSpec:
    """The metadata of ``self.expand(sizes)`` with torch's errors (TENSOR-303)."""
    sizes = tuple(sizes)
    n, m = self.dim(), len(sizes)
    if m < n:
        raise RuntimeError(
            f"expand({type_str(self)}{{{list(self._shape)}}}, size={list(sizes)}): the number "
            f"of sizes provided ({m}) must be greater or equal to the number of dimensions in "
            f"the tensor ({n})")
    shape, stride = [0] * m, [0] * m
    for i in range(m - 1, -1, -1):
        j = i - (m - n)
        size = sizes[i]
        if j < 0:
            if size < 0:
                raise RuntimeError(f"The expanded size of the tensor ({size}) isn't allowed in "
                                   f"a leading, non-existing dimension {i}")
            shape[i] = size
            stride[i] = shape[i + 1] * stride[i + 1] if size == 1 and i + 1 < m else 0
            continue
        have = self._shape[j]
        if size == -1:
            size = have
        if have == size:
            shape[i], stride[i] = size, self._stride[j]
        elif have == 1:
            shape[i], stride[i] = size, 0
        else:
            raise RuntimeError(
                f"The expanded size of the tensor ({size}) must match the existing size "
                f"({have}) at non-singleton dimension {i}.  Target sizes: {list(sizes)}.  "
                f"Tensor sizes: {list(self._shape)}")
    return ViewSpec(tuple(shape), tuple(stride), self._offset)


def _expand_meta(self: Tensor, *sizes, implicit: bool = False) -> ViewSpec:
    return expand_geometry(self, size_args(sizes, "expand"))


def _sum_to_input(ctx, g):
    from refimpl.ops._helpers import sum_to

    return (sum_to(g, ctx.args[0].shape),)


expand = defop("expand", kind="view", meta=_expand_meta, saves=(), backward=_sum_to_input,
               jvp=lambda ctx, t, *_: _same_view(ctx, t, "expand", ctx.outputs[0].shape))


def expand_as(self: Tensor, other: Tensor) -> Tensor:
    """``self.expand(other.shape)``."""
    return expand(self, other.shape)


def broadcast_to(self: Tensor, size) -> Tensor:
    """``self.expand(size)``: a stride-0 view (TENSOR-005)."""
    return expand(self, tuple(size))


def _squeeze_geometry(self: Tensor, dims) -> ViewSpec:
    keep = [i for i in range(self.dim()) if i not in dims or self._shape[i] != 1]
    return ViewSpec(tuple(self._shape[i] for i in keep), tuple(self._stride[i] for i in keep),
                    self._offset)


def squeeze_dims(self: Tensor, dim) -> tuple:
    """``dim`` (None, int or sequence) as a set of non-negative dims, torch's errors."""
    n = self.dim()
    if dim is None:
        return tuple(range(n))
    if isinstance(dim, int):
        return (wrap_dim(dim, n),)
    seen: list = []
    for d in dim:
        w = wrap_dim(d, n)
        if w in seen:
            raise RuntimeError(f"dim {w} appears multiple times in the list of dims")
        seen.append(w)
    return tuple(seen)


def _squeeze_backward(ctx, g):
    return (g.reshape(ctx.args[0].shape),)


def _squeeze_jvp(ctx, tg, *_):
    return None if tg is None else tg.reshape(ctx.outputs[0].shape)


squeeze_all = defop("squeeze", kind="view", saves=(), backward=_squeeze_backward,
                    meta=lambda self: _squeeze_geometry(self, squeeze_dims(self, None)),
                    jvp=_squeeze_jvp, extra={"method": False})
squeeze_dim = defop("_squeeze_dim", kind="view", saves=(), backward=_squeeze_backward,
                    meta=lambda self, dim: _squeeze_geometry(self, squeeze_dims(self, dim)),
                    jvp=_squeeze_jvp, node="SqueezeBackward1", extra={"method": False})
squeeze_multi = defop("_squeeze_dims", kind="view", saves=(), backward=_squeeze_backward,
                      meta=lambda self, dim: _squeeze_geometry(self, squeeze_dims(self, dim)),
                      jvp=_squeeze_jvp, node="SqueezeBackward2", extra={"method": False})


def squeeze(self: Tensor, dim=None) -> Tensor:
    """Remove size-1 dims (all, one, or those in a tuple); other dims are kept."""
    if dim is None:
        return squeeze_all(self)
    if isinstance(dim, int):
        return squeeze_dim(self, dim)
    return squeeze_multi(self, tuple(dim))


def unsqueeze_geometry(self: Tensor, dim: int) -> ViewSpec:
    """The metadata of ``self.unsqueeze(dim)``."""
    n = self.dim()
    d = wrap_dim(dim, n + 1)
    stride = 1 if d >= n else self._shape[d] * self._stride[d]
    return ViewSpec(self._shape[:d] + (1,) + self._shape[d:],
                    self._stride[:d] + (stride,) + self._stride[d:], self._offset)


unsqueeze = defop("unsqueeze", kind="view", meta=unsqueeze_geometry, saves=(),
                  backward=lambda ctx, g: (g.squeeze(wrap_dim(ctx.args[1], g.dim())),),
                  jvp=lambda ctx, t, *_: _same_view(ctx, t, "unsqueeze", ctx.args[1]))


def _alias_meta(self: Tensor) -> ViewSpec:
    return ViewSpec(self._shape, self._stride, self._offset)


# x[...] and x[()] return an alias: a view with the same metadata.
alias = defop("alias", kind="view", meta=_alias_meta, saves=(), backward=lambda ctx, g: (g,),
              jvp=lambda ctx, tg: tg, extra={"method": False})


__all__ = [
    "broadcast_to",
    "expand_as",
    "flatten",
        "infer_size",
    "moveaxis",
    "movedim",
    "permute",
    "reshape",
    "squeeze",
    "swapaxes",
    "swapdims",
    "t",
    "transpose",
    "unflatten",
    "unsqueeze",
    "view_as",
    "view_strides",
]
TENSOR_METHODS = (
    "view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "swapaxes", "swapdims",
    "movedim", "moveaxis", "expand_as", "broadcast_to", "squeeze",
)
