"""Views of a subset of the elements (spec: TENSOR-004, TENSOR-005, TENSOR-308).

select, slice (``x[a:b:c]``), narrow, split/split_with_sizes/chunk/tensor_split, unbind,
diagonal, as_strided and unfold. Each is a view op: the meta function computes the
``ViewSpec`` from metadata alone, the dispatcher aliases the storage.

Their gradients scatter back into a zero tensor of the input's shape. Those scatters are
ops of their own (``select_backward``, ``slice_backward``, ...), as in torch, so that the
gradient of a gradient is again a view op.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from refimpl._tensor import Tensor, contiguous_strides, wrap_dim
from refimpl.ops._helpers import compute_np_dtype, np_result
from refimpl.ops._registry import TensorSpec, ViewSpec, defop
from refimpl.ops.views import int_list


def _index(v) -> int:
    return v.__index__() if not isinstance(v, int) else v


# -- geometry helpers: pure functions of (shape, stride, offset) ---------------------------

def select_geometry(shape, stride, offset, dim: int, index: int) -> ViewSpec:
    """``select(dim, index)`` of a tensor with this metadata, torch's errors."""
    if not shape:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, len(shape))
    size = shape[d]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(shape)} at dimension {d}")
    if index < 0:
        index += size
    return ViewSpec(shape[:d] + shape[d + 1:], stride[:d] + stride[d + 1:],
                    offset + index * stride[d])


def slice_bounds(size: int, start, end, step: int) -> tuple:
    """Clamp ``start:end`` to ``[0, size]`` like torch's slice; returns (start, length)."""
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    start = 0 if start is None else _index(start)
    end = size if end is None else _index(end)
    if start < 0:
        start += size
    if end < 0:
        end += size
    start = min(max(start, 0), size)
    end = min(max(end, start), size)
    return start, (end - start + step - 1) // step


def slice_geometry(shape, stride, offset, dim: int, start, end, step: int) -> ViewSpec:
    """``slice(dim, start, end, step)`` of a tensor with this metadata."""
    d = wrap_dim(dim, len(shape))
    begin, length = slice_bounds(shape[d], start, end, step)
    return ViewSpec(shape[:d] + (length,) + shape[d + 1:],
                    stride[:d] + (stride[d] * step,) + stride[d + 1:],
                    offset + begin * stride[d])


def diagonal_geometry(shape, stride, offset, diag: int, dim1: int, dim2: int) -> ViewSpec:
    """``diagonal(diag, dim1, dim2)`` of a tensor with this metadata."""
    n = len(shape)
    d1, d2 = wrap_dim(dim1, n), wrap_dim(dim2, n)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    if diag >= 0:
        size = max(min(shape[d1], shape[d2] - diag), 0)
    else:
        size = max(min(shape[d1] + diag, shape[d2]), 0)
    if size:
        offset += diag * stride[d2] if diag >= 0 else -diag * stride[d1]
    keep = [i for i in range(n) if i not in (d1, d2)]
    return ViewSpec(tuple(shape[i] for i in keep) + (size,),
                    tuple(stride[i] for i in keep) + (stride[d1] + stride[d2],), offset)


def unfold_geometry(shape, stride, offset, dim: int, size: int, step: int) -> ViewSpec:
    """``unfold(dim, size, step)`` of a tensor with this metadata."""
    d = wrap_dim(dim, len(shape))
    have = shape[d] if shape else 1
    if size > have:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {have} but size is "
                           f"{size}")
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if not shape:
        return ViewSpec((size,), (1,), offset)
    return ViewSpec(shape[:d] + ((have - size) // step + 1,) + shape[d + 1:] + (size,),
                    stride[:d] + (stride[d] * step,) + stride[d + 1:] + (stride[d],), offset)


def _geom(t: Tensor) -> tuple:
    return t._shape, t._stride, t._offset


def _view_positions(shape, stride, offset) -> np.ndarray:
    """Storage positions of every element of a strided view, in row-major order."""
    pos = np.full(tuple(shape), offset, dtype=np.int64)
    for d, (n, s) in enumerate(zip(shape, stride)):
        idx = np.arange(n, dtype=np.int64) * s
        pos = pos + idx.reshape((n,) + (1,) * (len(shape) - d - 1))
    return pos


def _scatter_view(grad: Tensor, sizes, spec: ViewSpec, accumulate: bool) -> np.ndarray:
    """Zeros of ``sizes`` with ``grad`` written (or added) through the view ``spec`` taken
    of a contiguous tensor of ``sizes``."""
    cd = compute_np_dtype(grad.dtype)
    flat = np.zeros(math.prod(sizes), dtype=cd)
    if grad.numel():
        pos = _view_positions(spec.shape, spec.stride, spec.offset)
        g = grad._np.astype(cd, copy=False)
        if accumulate:
            np.add.at(flat, pos, g)
        else:
            flat[pos] = g
    return np_result(flat.reshape(tuple(sizes)), grad.dtype)


def _scatter_view_cuda(geometry, accumulate: bool = False):
    """The CUDA kernel of a view's backward op: ``geometry(contiguous geometry, *args)``
    gives the view the gradient is written (or summed) through."""
    def kernel(grad: Tensor, sizes, *args) -> Tensor:
        from refimpl.cuda import _movement

        spec = geometry(*_contiguous_geom(sizes), *args)
        return _movement.scatter_view(grad, sizes, spec, accumulate)

    return kernel


def _grad_meta(grad: Tensor, sizes, *_, **__) -> TensorSpec:
    return TensorSpec(tuple(sizes), grad.dtype, grad.device)


def _contiguous_geom(sizes) -> tuple:
    sizes = tuple(sizes)
    return sizes, contiguous_strides(sizes), 0


# -- select ------------------------------------------------------------------------------------

def _select_backward_cpu(grad: Tensor, sizes, dim: int, index: int) -> np.ndarray:
    spec = select_geometry(*_contiguous_geom(sizes), dim, _index(index))
    return _scatter_view(grad, sizes, spec, False)


select_backward = defop(
    "select_backward", meta=_grad_meta, cpu=_select_backward_cpu, saves=(),
    cuda=_scatter_view_cuda(lambda sh, st, off, dim, index: select_geometry(
        sh, st, off, dim, _index(index))),
    backward=lambda ctx, g: (g.select(ctx.args[2], ctx.args[3]),),
    jvp=lambda ctx, t, *_: select_backward(t, *ctx.args[1:]), extra={"method": False})

# An index given as a 0-dim tensor is read again by the backward: it is saved.
select = defop(
    "select", kind="view", extra={"save_needs": {0: (2,)}},
    meta=lambda self, dim, index: select_geometry(*_geom(self), dim, _index(index)),
    backward=lambda ctx, g: (select_backward(g, ctx.args[0].shape, ctx.args[1],
                                             _index(ctx.args[2])),),
    jvp=lambda ctx, t, *_: None if t is None else t.select(ctx.args[1], ctx.args[2]))


# -- slice / narrow ---------------------------------------------------------------------------

def _slice_backward_cpu(grad: Tensor, sizes, dim: int, start, end, step: int) -> np.ndarray:
    spec = slice_geometry(*_contiguous_geom(sizes), dim, start, end, step)
    return _scatter_view(grad, sizes, spec, False)


slice_backward = defop(
    "slice_backward", meta=_grad_meta, cpu=_slice_backward_cpu, saves=(),
    cuda=_scatter_view_cuda(slice_geometry),
    backward=lambda ctx, g: (slice_op(g, *ctx.args[2:6]),),
    jvp=lambda ctx, t, *_: slice_backward(t, *ctx.args[1:]), extra={"method": False})


def _slice_meta(self: Tensor, dim: int = 0, start=None, end=None, step: int = 1) -> ViewSpec:
    return slice_geometry(*_geom(self), dim, start, end, step)


def _slice_args(ctx) -> tuple:
    names = ("dim", "start", "end", "step")
    vals = list(ctx.args[1:]) + [ctx.kwargs.get(k) for k in names[len(ctx.args) - 1:]]
    dim, start, end, step = vals
    return 0 if dim is None else dim, start, end, 1 if step is None else step


slice_op = defop(
    "slice", kind="view", meta=_slice_meta, saves=(),
    backward=lambda ctx, g: (slice_backward(g, ctx.args[0].shape, *_slice_args(ctx)),),
    jvp=lambda ctx, t, *_: None if t is None else slice_op(t, *_slice_args(ctx)),
    extra={"method": False})


def narrow(self: Tensor, dim: int, start, length: int) -> Tensor:
    """The ``length`` elements of dim ``dim`` from ``start``: a view (SliceBackward0)."""
    if self.dim() == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    if isinstance(start, Tensor) and (start.dim() != 0 or start.dtype.category != 1):
        raise RuntimeError("start must be an 0-dim integral Tensor.")
    start, length = _index(start), _index(length)
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    d = wrap_dim(dim, self.dim())
    size = self._shape[d]
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], "
                         f"but got {start})")
    if start < 0:
        start += size
    if start > size - length:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size "
                           f"({size}).")
    return slice_op(self, d, start, start + length, 1)


# -- split / chunk / tensor_split / unbind -------------------------------------------------------

def _cat_grads(ctx, grads, sizes, dim: int):
    from refimpl.ops.factories import zeros
    from refimpl.ops.shape import cat

    inp = ctx.args[0]
    d = wrap_dim(dim, len(inp.shape))
    parts = []
    for g, n in zip(grads, sizes):
        if g is None:
            shape = tuple(inp.shape[:d]) + (n,) + tuple(inp.shape[d + 1:])
            g = zeros(shape, dtype=inp.dtype, device=inp.device)
        parts.append(g)
    return (cat(parts, d),)


def _split_with_sizes_meta(self: Tensor, split_sizes, dim: int = 0) -> tuple:
    if self.dim() == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = wrap_dim(dim, self.dim())
    sizes = int_list("split_with_sizes", "split_sizes", split_sizes)
    if any(s < 0 for s in sizes):
        raise RuntimeError("split_with_sizes expects split_sizes have only non-negative "
                           f"entries, but got split_sizes={list(sizes)}")
    if sum(sizes) != self._shape[d]:
        raise RuntimeError(
            f"split_with_sizes expects split_sizes to sum exactly to {self._shape[d]} (input "
            f"tensor's size at dimension {d}), but got split_sizes={list(sizes)}")
    out, start = [], 0
    for n in sizes:
        out.append(slice_geometry(*_geom(self), d, start, start + n, 1))
        start += n
    return tuple(out)


def _split_sizes(self: Tensor, split_size: int, dim: int) -> list:
    if self.dim() == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    size = self._shape[wrap_dim(dim, self.dim())]
    if split_size < 0:
        raise RuntimeError(f"split expects split_size be non-negative, but got "
                           f"split_size={split_size}")
    if split_size == 0 and size != 0:
        raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got "
                           f"dimension size of {size}")
    count = max((size + split_size - 1) // split_size, 1) if split_size else 1
    return [min(split_size, size - i * split_size) for i in range(count)]


def _split_meta(self: Tensor, split_size, dim: int = 0) -> tuple:
    sizes = _split_sizes(self, _index(split_size), dim)
    return _split_with_sizes_meta(self, sizes, dim)


split_with_sizes = defop(
    "split_with_sizes", kind="view", meta=_split_with_sizes_meta,
    extra={"save_needs": {0: (1,)}},
    backward=lambda ctx, *gs: _cat_grads(ctx, gs, ctx.args[1], _dim_arg(ctx, 2)),
    jvp=lambda ctx, t, *_: None if t is None else split_with_sizes(
        t, ctx.args[1], _dim_arg(ctx, 2)))


def _dim_arg(ctx, pos: int) -> int:
    if len(ctx.args) > pos:
        return ctx.args[pos]
    return ctx.kwargs.get("dim", 0)


split_op = defop(
    "split", kind="view", meta=_split_meta,
    backward=lambda ctx, *gs: _cat_grads(
        ctx, gs, _split_sizes(ctx.args[0], _index(ctx.args[1]), _dim_arg(ctx, 2)),
        _dim_arg(ctx, 2)),
    jvp=lambda ctx, t, *_: None if t is None else split_op(t, ctx.args[1], _dim_arg(ctx, 2)),
    extra={"method": False, "save_needs": {0: (1,)}})


def split(self: Tensor, split_size_or_sections, dim: int = 0) -> tuple:
    """Views of consecutive pieces: of size ``split_size`` (the last may be smaller), or of
    the listed sizes."""
    if isinstance(split_size_or_sections, (list, tuple)):
        return split_with_sizes(self, list(split_size_or_sections), dim)
    return split_op(self, split_size_or_sections, dim)


def chunk(self: Tensor, chunks: int, dim: int = 0) -> tuple:
    """At most ``chunks`` views of equal size (``ceil(size / chunks)``, the last smaller)."""
    if self.dim() == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    chunks = _index(chunks)
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    size = self._shape[wrap_dim(dim, self.dim())]
    split_size = (size + chunks - 1) // chunks
    if split_size == 0 and size == 0:
        return split_with_sizes(self, [0] * chunks, dim)
    return split_op(self, split_size, dim)


# unsafe_split / unsafe_split_with_sizes / unsafe_chunk: the pieces of split, but not views
# as far as autograd is concerned (no _base, each with a version counter of its own), so an
# in-place op on one of them is allowed; they still share the input's memory.

def _unsafe_pieces(self: Tensor, specs) -> tuple:
    pieces = []
    for spec in specs:
        t = Tensor._make(self._storage, spec.shape, spec.stride, spec.offset, self.dtype)
        t._is_inference = self._is_inference
        pieces.append(t)
    return tuple(pieces)


def _unsafe_meta(specs, self: Tensor) -> tuple:
    return tuple(TensorSpec(s.shape, self.dtype, self.device) for s in specs)


def _int_arg(fn: str, arg: str, value, pos: int = 2) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{fn}(): argument '{arg}' (position {pos}) must be int, not "
                        f"{type(value).__name__}")
    return value.__index__()


def _int_list_arg(fn: str, arg: str, value) -> tuple:
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{fn}(): argument '{arg}' (position 2) must be tuple of ints, not "
                        f"{type(value).__name__}")
    return int_list(fn, arg, value)


def _unsafe_split_specs(self: Tensor, split_size, dim: int = 0) -> tuple:
    size = _int_arg("unsafe_split", "split_size", split_size)
    return _split_meta(self, size, _int_arg("unsafe_split", "dim", dim, 3))


def _unsafe_split_with_sizes_specs(self: Tensor, split_sizes, dim: int = 0) -> tuple:
    sizes = _int_list_arg("unsafe_split_with_sizes", "split_sizes", split_sizes)
    return _split_with_sizes_meta(self, sizes, _int_arg("unsafe_split_with_sizes", "dim", dim, 3))


def _arg1(ctx, name: str):
    return ctx.args[1] if len(ctx.args) > 1 else ctx.kwargs[name]


def _unsafe_split_backward(ctx, *gs):
    dim = _dim_arg(ctx, 2)
    size = _index(_arg1(ctx, "split_size"))
    return _cat_grads(ctx, gs, _split_sizes(ctx.args[0], size, dim), dim)


unsafe_split = defop(
    "unsafe_split", extra={"save_needs": {0: ()}}, backward=_unsafe_split_backward,
    meta=lambda self, split_size, dim=0: _unsafe_meta(
        _unsafe_split_specs(self, split_size, dim), self),
    cpu=lambda self, split_size, dim=0: _unsafe_pieces(
        self, _unsafe_split_specs(self, split_size, dim)),
    jvp=lambda ctx, t, *_: None if t is None else unsafe_split(
        t, _arg1(ctx, "split_size"), _dim_arg(ctx, 2)))
# the pieces alias the input whatever its device: no kernel runs
unsafe_split.cuda = unsafe_split.cpu

unsafe_split_with_sizes = defop(
    "unsafe_split_with_sizes", extra={"save_needs": {0: ()}},
    backward=lambda ctx, *gs: _cat_grads(ctx, gs, _arg1(ctx, "split_sizes"), _dim_arg(ctx, 2)),
    meta=lambda self, split_sizes, dim=0: _unsafe_meta(
        _unsafe_split_with_sizes_specs(self, split_sizes, dim), self),
    cpu=lambda self, split_sizes, dim=0: _unsafe_pieces(
        self, _unsafe_split_with_sizes_specs(self, split_sizes, dim)),
    jvp=lambda ctx, t, *_: None if t is None else unsafe_split_with_sizes(
        t, _arg1(ctx, "split_sizes"), _dim_arg(ctx, 2)))
unsafe_split_with_sizes.cuda = unsafe_split_with_sizes.cpu


def unsafe_chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    """``chunk`` whose pieces may be modified in place (see ``unsafe_split``)."""
    chunks = _int_arg("unsafe_chunk", "chunks", chunks)
    dim = _int_arg("unsafe_chunk", "dim", dim, 3)
    if input.dim() == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    size = input._shape[wrap_dim(dim, input.dim())]
    split_size = (size + chunks - 1) // chunks
    if split_size == 0 and size == 0:
        return unsafe_split_with_sizes(input, [0] * chunks, dim)
    return unsafe_split(input, split_size, dim)


def tensor_split(self: Tensor, indices_or_sections=None, dim: int = 0, *, sections=None,
                 indices=None, tensor_indices_or_sections=None) -> tuple:
    """Views split into ``sections`` near-equal parts, or at the given ``indices``."""
    arg = next((a for a in (indices_or_sections, sections, indices, tensor_indices_or_sections)
                if a is not None), None)
    if self.dim() == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a "
                           f"tensor with {self.dim()} dims")
    if isinstance(arg, Tensor):
        if arg.dtype.name != "int64":
            from refimpl import _dtype as D

            raise RuntimeError("tensor_split expected tensor_indices_or_sections to have dtype "
                               f"of long, but got {D.type_name(arg.dtype)}")
        if arg.dim() > 1:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a "
                               "zero-dimensional or one-dimensional tensor, but got a tensor "
                               f"with {arg.dim()} dims")
        arg = arg.item() if arg.dim() == 0 else arg.tolist()
    d = wrap_dim(dim, self.dim())
    size = self._shape[d]
    if isinstance(arg, (list, tuple)):
        bounds = [0] + [_index(i) for i in arg] + [size]
    else:
        n = _index(arg)
        if n <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {n}")
        small, extra = divmod(size, n)
        bounds = [0]
        for i in range(n):
            bounds.append(bounds[-1] + small + (1 if i < extra else 0))
    return tuple(slice_op(self, d, a, b, 1) for a, b in itertools.pairwise(bounds))


def _unbind_meta(self: Tensor, dim: int = 0) -> tuple:
    if self.dim() == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    d = wrap_dim(dim, self.dim())
    return tuple(select_geometry(*_geom(self), d, i) for i in range(self._shape[d]))


def _unbind_backward(ctx, *grads):
    from refimpl.ops.factories import zeros
    from refimpl.ops.shape import stack

    inp = ctx.args[0]
    d = wrap_dim(_dim_arg(ctx, 1), len(inp.shape))
    shape = tuple(inp.shape[:d]) + tuple(inp.shape[d + 1:])
    parts = [g if g is not None else zeros(shape, dtype=inp.dtype, device=inp.device)
             for g in grads]
    return (stack(parts, d),)


unbind = defop("unbind", kind="view", meta=_unbind_meta, saves=(), backward=_unbind_backward,
               jvp=lambda ctx, t, *_: None if t is None else t.unbind(_dim_arg(ctx, 1)))


# -- diagonal ----------------------------------------------------------------------------------

def _diag_args(ctx, first: int) -> tuple:
    names, defaults = ("offset", "dim1", "dim2"), (0, 0, 1)
    out = []
    for i, (name, dflt) in enumerate(zip(names, defaults)):
        pos = first + i
        out.append(ctx.args[pos] if len(ctx.args) > pos else ctx.kwargs.get(name, dflt))
    return tuple(out)


def _diagonal_backward_cpu(grad: Tensor, sizes, offset: int, dim1: int, dim2: int):
    spec = diagonal_geometry(*_contiguous_geom(sizes), offset, dim1, dim2)
    return _scatter_view(grad, sizes, spec, False)


diagonal_backward = defop(
    "diagonal_backward", meta=_grad_meta, cpu=_diagonal_backward_cpu, saves=(),
    cuda=_scatter_view_cuda(diagonal_geometry),
    backward=lambda ctx, g: (g.diagonal(*ctx.args[2:5]),),
    jvp=lambda ctx, t, *_: diagonal_backward(t, *ctx.args[1:]), extra={"method": False})

diagonal = defop(
    "diagonal", kind="view", saves=(),
    meta=lambda self, offset=0, dim1=0, dim2=1: diagonal_geometry(*_geom(self), offset, dim1,
                                                                  dim2),
    backward=lambda ctx, g: (diagonal_backward(g, ctx.args[0].shape, *_diag_args(ctx, 1)),),
    jvp=lambda ctx, t, *_: None if t is None else t.diagonal(*_diag_args(ctx, 1)))


# -- as_strided ----------------------------------------------------------------------------------

def as_strided_geometry(self: Tensor, size, stride, storage_offset=None) -> ViewSpec:
    """Checked metadata of ``as_strided`` (sizes, strides and offset into the storage)."""
    size = int_list("as_strided", "size", size)
    stride = int_list("as_strided", "stride", stride)
    offset = self._offset if storage_offset is None else _index(storage_offset)
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    if any(s < 0 for s in stride):
        raise RuntimeError("as_strided: Negative strides are not supported at the moment, got "
                           f"strides: {list(stride)}")
    if any(s < 0 for s in size):
        raise RuntimeError(f"Storage size calculation overflowed with sizes={list(size)} and "
                           f"strides={list(stride)}")
    if offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {offset}")
    item = self.dtype.itemsize
    need = 0 if 0 in size else (offset + 1 + sum((n - 1) * s for n, s in zip(size, stride)))
    have = self._storage.nbytes()
    if need * item > have:
        raise RuntimeError(
            f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, "
            f"and itemsize {item} requiring a storage size of {need * item} are out of bounds "
            f"for storage of size {have}")
    return ViewSpec(size, stride, offset)


def _as_strided_backward_cpu(grad: Tensor, in_geom, size, stride, offset) -> np.ndarray:
    in_shape, in_stride, in_offset = in_geom
    cd = compute_np_dtype(grad.dtype)
    in_pos = _view_positions(in_shape, in_stride, in_offset)
    out_pos = _view_positions(size, stride, offset)
    lo = min(in_pos.min(initial=0), out_pos.min(initial=0))
    hi = max(in_pos.max(initial=0), out_pos.max(initial=0)) + 1
    flat = np.zeros(hi - lo, dtype=cd)
    np.add.at(flat, out_pos - lo, grad._np.astype(cd, copy=False))
    counts = np.bincount((in_pos - lo).ravel(), minlength=hi - lo)
    if counts.max(initial=0) > 1:
        # an overlapping input (e.g. expanded) shares each gradient among its aliases
        flat = flat / np.maximum(counts, 1)
    return np_result(flat[in_pos - lo], grad.dtype)


def _cuda_movement():
    from refimpl.cuda import _movement

    return _movement


def _as_strided_double_backward(ctx, g):
    # exact for a non-overlapping contiguous input, the common case
    in_offset = ctx.args[1][2]
    size, stride, offset = ctx.args[2:5]
    return (g.as_strided(size, stride, offset - in_offset),)


as_strided_backward = defop(
    "as_strided_backward", meta=lambda g, in_geom, *a: TensorSpec(tuple(in_geom[0]), g.dtype,
                                                                  g.device),
    cpu=_as_strided_backward_cpu, saves=(), backward=_as_strided_double_backward,
    cuda=lambda *args: _cuda_movement().as_strided_backward(*args),
    jvp=lambda ctx, t, *_: as_strided_backward(t, *ctx.args[1:]), extra={"method": False})


def _as_strided_args(ctx) -> tuple:
    off = ctx.args[3] if len(ctx.args) > 3 else ctx.kwargs.get("storage_offset")
    return (tuple(ctx.args[1]), tuple(ctx.args[2]),
            ctx.args[0].storage_offset() if off is None else _index(off))


def _input_geometry(t) -> tuple:
    return tuple(t.shape), tuple(t.stride()), t.storage_offset()


# The backward needs the input's strides and offset, not only its shape: self is saved.
as_strided = defop(
    "as_strided", kind="view", meta=as_strided_geometry, extra={"save_needs": {0: (0, 3)}},
    backward=lambda ctx, g: (as_strided_backward(g, _input_geometry(ctx.args[0]),
                                                 *_as_strided_args(ctx)),),
    jvp=lambda ctx, t, *_: None if t is None else t.as_strided(*_as_strided_args(ctx)))


# -- unfold ------------------------------------------------------------------------------------

def _unfold_backward_cpu(grad: Tensor, sizes, dim: int, size: int, step: int) -> np.ndarray:
    spec = unfold_geometry(*_contiguous_geom(sizes), dim, size, step)
    if not sizes or not grad.numel():
        return _scatter_view(grad, sizes, spec, True)
    # The sum _scatter_view would make with np.add.at, one strided slice per window
    # offset k (col2im): element k of window w lands on w * step + k. np.add.at adds
    # in grad's row-major order (w ascending for each target); taking k descending adds
    # the same terms in that same order, so the sums are bitwise equal.
    cd = compute_np_dtype(grad.dtype)
    out = np.zeros(tuple(sizes), dtype=cd)
    d = wrap_dim(dim, len(sizes))
    g = np.moveaxis(grad._np, d, -2)  # (..., windows, size)
    target = np.moveaxis(out, d, -1)
    span = step * (g.shape[-2] - 1) + 1
    for k in reversed(range(size)):
        target[..., k:k + span:step] += g[..., k].astype(cd, copy=False)
    return np_result(out, grad.dtype)


unfold_backward = defop(
    "unfold_backward", meta=_grad_meta, cpu=_unfold_backward_cpu, saves=(),
    cuda=_scatter_view_cuda(unfold_geometry, accumulate=True),
    backward=lambda ctx, g: (g.unfold(*ctx.args[2:5]),),
    jvp=lambda ctx, t, *_: unfold_backward(t, *ctx.args[1:]), extra={"method": False})

unfold = defop(
    "unfold", kind="view", saves=(),
    meta=lambda self, dimension, size, step: unfold_geometry(*_geom(self), dimension, size,
                                                             step),
    backward=lambda ctx, g: (unfold_backward(g, ctx.args[0].shape, *ctx.args[1:4]),),
    jvp=lambda ctx, t, *_: None if t is None else t.unfold(*ctx.args[1:4]))

__all__ = [
    "as_strided",
    "chunk",
    "diagonal",
    "diagonal_backward",
    "narrow",
    "select",
    "select_backward",
    "slice_backward",
    "split",
    "split_with_sizes",
    "tensor_split",
    "unbind",
    "unsafe_chunk",
    "unsafe_split",
    "unsafe_split_with_sizes",
]
TENSOR_METHODS = ("narrow", "split", "chunk", "tensor_split", "unsafe_chunk")
