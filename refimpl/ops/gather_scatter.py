"""Index ops along a dim (spec: TENSOR-407, TENSOR-406): gather, scatter, scatter_add,
index_select, index_add, index_copy, index_fill (the masked ops and take are in
``masked.py``).

Each op checks its arguments with torch's messages before touching data, so a failing
in-place call leaves ``self`` and its version untouched (TENSOR-604). In-place forms
(``scatter_``, ``index_add_``, ...) reuse the out-of-place op through ``inplace``.
"""

from __future__ import annotations

import warnings

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor, wrap_dim
from refimpl.ops._helpers import OUT_DTYPE, compute_np_dtype, np_result
from refimpl.ops._registry import TensorSpec, defop
from refimpl.ops.indexing import check_scalar_fits, inplace_of


def _zeros(shape, like) -> Tensor:
    from refimpl.ops.factories import zeros

    return zeros(tuple(shape), dtype=like.dtype, device=like.device)


def _same_meta(self: Tensor, *_, **__) -> TensorSpec:
    return TensorSpec(self._shape, self.dtype, self.device)


def _coords(index: np.ndarray, dim: int) -> tuple:
    """For each element of ``index``, its coordinate with dim ``dim`` replaced by the index
    value: the numpy index tuple of gather/scatter."""
    grids = list(np.indices(index.shape, sparse=True))
    grids[dim] = index
    return tuple(grids)


def _np1d(t: Tensor) -> np.ndarray:
    return t._np.reshape(1) if t.dim() == 0 else t._np


def _check_bounds(idx: np.ndarray, size: int, dim: int, negative_ok: bool = False) -> None:
    if idx.size:
        bad = (idx >= size) | (idx < (-size if negative_ok else 0))
        if bad.any():
            raise RuntimeError(f"index {int(idx[bad].flat[0])} is out of bounds for dimension "
                               f"{dim} with size {size}")


# -- gather / scatter / scatter_add --------------------------------------------------------------

def _gather_check(self: Tensor, dim: int, index: Tensor) -> int:
    d = wrap_dim(dim, self.dim())
    if index.numel() == 0:  # torch checks nothing more for an empty index
        return d
    if index.dtype not in (D.int64, D.int32):
        raise RuntimeError("gather(): Expected dtype int32/int64 for index")
    if max(index.dim(), 1) != max(self.dim(), 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    for k in range(index.dim()):
        if k != d and index.shape[k] > self.shape[k]:
            raise RuntimeError(
                f"Size does not match at dimension {k} expected index {list(index.shape)} to be "
                f"no larger than self {list(self.shape)} apart from dimension {d}")
    return d


def _gather_cpu(self: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False):
    d = _gather_check(self, dim, index)
    if index.numel() == 0:
        return np.empty(index._shape, self.dtype.np)
    idx = _np1d(index).astype(np.int64, copy=False)
    arr = _np1d(self)
    _check_bounds(idx, arr.shape[d], d)
    return arr[_coords(idx, d)].reshape(index.shape)


def _gather_cuda(self: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False):
    from refimpl.cuda import _index_ops

    d = _gather_check(self, dim, index)
    if index.numel() == 0:
        return Tensor._empty(index._shape, self.dtype, self._storage.device)
    return _index_ops.gather(self, d, index)


def _gather_backward(ctx, grad):
    inp, dim, idx = ctx.args[0], ctx.args[1], ctx.args[2]
    if idx.numel() == 0:
        return (_zeros(inp.shape, grad),)
    return (_zeros(inp.shape, grad).scatter_add(dim, idx, grad),)


gather = defop(
    "gather", cpu=_gather_cpu, cuda=_gather_cuda, backward=_gather_backward,
    meta=lambda self, dim, index, **_: TensorSpec(
        index._shape if _gather_check(self, dim, index) is not None else (), self.dtype,
        self.device),
    jvp=lambda ctx, t, *_: None if t is None else t.gather(ctx.args[1], ctx.args[2]),
    extra={"save_needs": {0: (2,)}, "out_overlap": True, "out_dtype": OUT_DTYPE})


def _scatter_check(self: Tensor, dim: int, index: Tensor, src=None) -> int:
    d = wrap_dim(dim, self.dim())
    if index.dtype not in (D.int64, D.int32):
        raise RuntimeError("scatter(): Expected dtype int32/int64 for index")
    if isinstance(src, Tensor) and src.dtype != self.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    if max(index.dim(), 1) != max(self.dim(), 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    if isinstance(src, Tensor) and max(index.dim(), 1) != max(src.dim(), 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    for k in range(index.dim()):
        too_big = k != d and index.shape[k] > self.shape[k]
        if isinstance(src, Tensor) and (too_big or index.shape[k] > src.shape[k]):
            raise RuntimeError(
                f"Expected index {list(index.shape)} to be no larger than self "
                f"{list(self.shape)} apart from dimension {d} and to be no larger size than "
                f"src {list(src.shape)}")
        if too_big:
            raise RuntimeError(f"Expected index {list(index.shape)} to be no larger than self "
                               f"{list(self.shape)} apart from dimension {d}")
    return d


def _scatter_into(self: Tensor, dim: int, index: Tensor, src, reduce=None) -> np.ndarray:
    d = _scatter_check(self, dim, index, src)
    if reduce is not None and reduce not in ("add", "multiply"):
        raise RuntimeError("reduce argument must be either add or multiply.")
    if not isinstance(src, Tensor):
        check_scalar_fits(src, self.dtype)
    idx = _np1d(index).astype(np.int64, copy=False)
    cd = compute_np_dtype(self.dtype)
    out = np.array(_np1d(self), dtype=cd, copy=True)
    _check_bounds(idx, out.shape[d], d)
    if isinstance(src, Tensor):
        vals = _np1d(src)[tuple(slice(0, n) for n in idx.shape)].astype(cd, copy=False)
    else:
        vals = np.broadcast_to(np.asarray(src).astype(cd), idx.shape)
    coords = _coords(idx, d)
    if reduce == "add":
        np.add.at(out, coords, vals)
    elif reduce == "multiply":
        np.multiply.at(out, coords, vals)
    else:
        out[coords] = vals
    return np_result(out.reshape(self._shape), self.dtype)


_CUDA_REDUCE = {None: None, "add": "sum", "multiply": "prod"}


def _scatter_cuda(self: Tensor, dim: int, index: Tensor, src, reduce=None) -> Tensor:
    """The CUDA kernel of every scatter form (tensor or scalar src, with or without
    reduce): the CPU kernel's checks, then the device scatter."""
    from refimpl.cuda import _index_ops

    d = _scatter_check(self, dim, index, src)
    if reduce is not None and reduce not in ("add", "multiply"):
        raise RuntimeError("reduce argument must be either add or multiply.")
    if not isinstance(src, Tensor):
        check_scalar_fits(src, self.dtype)
    return _index_ops.scatter(self, d, index, src, _CUDA_REDUCE[reduce])


def _scatter_src_cuda(self: Tensor, dim: int, index: Tensor, src: Tensor, *, reduce=None):
    if reduce is not None:
        warnings.warn(
            "The reduce argument of torch.scatter with Tensor src is deprecated and will be "
            "removed in a future PyTorch release. Use torch.scatter_reduce instead for more "
            "reduction options.", UserWarning, stacklevel=4)
    return _scatter_cuda(self, dim, index, src, reduce)


def _scatter_value_cuda(self: Tensor, dim: int, index: Tensor, value, *, reduce=None):
    return _scatter_cuda(self, dim, index, value, reduce)


def _scatter_src_backward(ctx, grad):
    # as in torch, the src gradient has the index's shape (a larger src is an error)
    _, dim, index, _src = ctx.args[:4]
    g_self = grad.scatter(dim, index, 0) if ctx.needs_input_grad[0] else None
    g_src = grad.gather(dim, index) if ctx.needs_input_grad[3] else None
    return g_self, None, None, g_src


def _no_derivative(ctx, *grads):
    raise NotImplementedError("the derivative for 'scatter' with reduce is not implemented.")


def _scatter_src_cpu(self: Tensor, dim: int, index: Tensor, src: Tensor, *, reduce=None):
    if reduce is not None:
        warnings.warn(
            "The reduce argument of torch.scatter with Tensor src is deprecated and will be "
            "removed in a future PyTorch release. Use torch.scatter_reduce instead for more "
            "reduction options.", UserWarning, stacklevel=4)
    return _scatter_into(self, dim, index, src, reduce)


def _scatter_meta(self: Tensor, dim: int, index: Tensor, src, **_) -> TensorSpec:
    _scatter_check(self, dim, index, src)
    return _same_meta(self)


scatter_src = defop(
    "scatter", cpu=_scatter_src_cpu, cuda=_scatter_src_cuda, backward=_scatter_src_backward,
    meta=lambda self, dim, index, src, **_: _same_meta(self) if _scatter_check(
        self, dim, index, src) is not None else None,
    jvp=lambda ctx, ts, _d, _i, tsrc: None if ts is None and tsrc is None else (
        ts if ts is not None else _zeros(ctx.args[0].shape, ctx.args[0])).scatter(
        ctx.args[1], ctx.args[2], tsrc if tsrc is not None else _zeros(ctx.args[3].shape,
                                                                       ctx.args[3])),
    extra={"method": False, "save_needs": {0: (2,), 3: (2,)}})
scatter_value = defop(
    "_scatter_value", node="ScatterBackward1", cuda=_scatter_value_cuda,
    cpu=lambda self, dim, index, value, *, reduce=None: _scatter_into(self, dim, index, value,
                                                                        reduce),
    meta=lambda self, dim, index, value, **_: _same_meta(self) if _scatter_check(
        self, dim, index) is not None else None,
    backward=lambda ctx, g: (g.scatter(ctx.args[1], ctx.args[2], 0),),
    jvp=lambda ctx, t, *_: None if t is None else t.scatter(ctx.args[1], ctx.args[2], 0),
    extra={"method": False, "save_needs": {0: (2,)}})
# scatter with reduce= has no derivative in torch: its node is "NotImplemented".
scatter_reduce_src = defop(
    "_scatter_reduce_src", cpu=_scatter_src_cpu, cuda=_scatter_src_cuda, meta=_scatter_meta,
    saves=(),
    backward=_no_derivative, node="NotImplemented", extra={"method": False})
scatter_reduce_value = defop(
    "_scatter_reduce_value", cpu=scatter_value.cpu, cuda=_scatter_value_cuda,
    meta=_scatter_meta, saves=(),
    backward=_no_derivative, node="NotImplemented", extra={"method": False})
_SCATTER = (scatter_src, scatter_value, scatter_reduce_src, scatter_reduce_value)
_SCATTER_ = tuple(inplace_of(op) for op in _SCATTER)
for _op in _SCATTER_:
    _op.extra["method"] = False


def _scatter_dispatch(ops, self: Tensor, dim: int, index: Tensor, src=None, value=None, *,
                      reduce=None):
    src = value if src is None else src
    pick = (0 if isinstance(src, Tensor) else 1) + (0 if reduce is None else 2)
    kwargs = {} if reduce is None else {"reduce": reduce}
    return ops[pick](self, dim, index, src, **kwargs)


def scatter(input: Tensor, dim: int, index: Tensor, src=None, value=None, *, reduce=None):
    """A copy of ``input`` with ``src`` (tensor or scalar ``value``) written at ``index``
    along ``dim``; ``reduce="add"``/``"multiply"`` combines instead of overwriting."""
    return _scatter_dispatch(_SCATTER, input, dim, index, src, value, reduce=reduce)


def scatter_(self: Tensor, dim: int, index: Tensor, src=None, value=None, *, reduce=None):
    """In-place ``scatter``."""
    return _scatter_dispatch(_SCATTER_, self, dim, index, src, value, reduce=reduce)


def _scatter_add_backward(ctx, grad):
    _, dim, index, _src = ctx.args[:4]
    g_src = grad.gather(dim, index) if ctx.needs_input_grad[3] else None
    return grad, None, None, g_src


scatter_add = defop(
    "scatter_add", cpu=lambda self, dim, index, src: _scatter_into(self, dim, index, src, "add"),
    cuda=lambda self, dim, index, src: _scatter_cuda(self, dim, index, src, "add"),
    meta=lambda self, dim, index, src: _same_meta(self) if _scatter_check(
        self, dim, index, src) is not None else None,
    backward=_scatter_add_backward, extra={"save_needs": {3: (2,)}},
    jvp=lambda ctx, ts, _d, _i, tsrc: None if ts is None and tsrc is None else (
        ts if ts is not None else _zeros(ctx.args[0].shape, ctx.args[0])).scatter_add(
        ctx.args[1], ctx.args[2], tsrc if tsrc is not None else _zeros(ctx.args[3].shape,
                                                                       ctx.args[3])))
scatter_add_ = inplace_of(scatter_add)


# -- index_select / index_add / index_copy / index_fill ------------------------------------------

def _vector_index(fn: str, index: Tensor) -> np.ndarray:
    return index._np.reshape(-1).astype(np.int64, copy=False)


def _index_select_check(self: Tensor, dim: int, index: Tensor) -> int:
    d = wrap_dim(dim, self.dim())
    if index.dim() > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    if index.dtype not in (D.int64, D.int32):
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    return d


def _index_select_shape(self: Tensor, dim: int, index: Tensor) -> tuple:
    d = _index_select_check(self, dim, index)
    if self.dim() == 0:
        return ()
    return self._shape[:d] + (index.numel(),) + self._shape[d + 1:]


def _index_select_cpu(self: Tensor, dim: int, index: Tensor) -> np.ndarray:
    d = _index_select_check(self, dim, index)
    idx = _vector_index("index_select", index)
    arr = _np1d(self)
    if idx.size and ((idx < 0) | (idx >= arr.shape[d])).any():
        raise IndexError("index out of range in self")
    return np.take(arr, idx, axis=d).reshape(
        _index_select_shape(self, dim, index))


def _index_select_cuda(self: Tensor, dim: int, index: Tensor) -> Tensor:
    from refimpl.cuda import _index_ops

    d = _index_select_check(self, dim, index)
    return _index_ops.index_select(self, d, index, _index_select_shape(self, dim, index))


index_select = defop(
    "index_select", cpu=_index_select_cpu, cuda=_index_select_cuda,
    meta=lambda self, dim, index: TensorSpec(_index_select_shape(self, dim, index), self.dtype,
                                             self.device),
    backward=lambda ctx, g: (_zeros(ctx.args[0].shape, g).index_add(
        ctx.args[1], ctx.args[2], g.reshape(_index_add_shape(ctx.args[0], ctx.args[1],
                                                             ctx.args[2]))),),
    jvp=lambda ctx, t, *_: None if t is None else t.index_select(ctx.args[1], ctx.args[2]),
    extra={"save_needs": {0: (2,)}, "out_overlap": True,
           "out_dtype": {"cpu": "index_select(): self and result must have the same scalar type",
                         "cuda": "expected scalar type {OUT} but found {RES}"}})


def _index_add_shape(self, dim: int, index) -> tuple:
    """Shape a source must have to be index_add'ed along ``dim`` with ``index``."""
    shape = list(self.shape)
    if shape:
        shape[wrap_dim(dim, len(shape))] = index.numel()
    return tuple(shape)


def _index_add_check(self: Tensor, dim: int, index: Tensor, source: Tensor) -> int:
    d = wrap_dim(dim, self.dim())
    if index.dim() > 1:
        raise IndexError(f"index_add_(): Index is supposed to be a vector, but got dim: "
                         f"{index.dim()} with type: {D.type_name(index.dtype)} and size: "
                         f"{list(index.shape)}")
    if index.dtype not in (D.int64, D.int32):
        raise RuntimeError("index_add_(): Expected dtype int32/int64 for index but got: "
                           f"{D.type_name(index.dtype)}")
    if self.dtype != source.dtype:
        raise RuntimeError(f"index_add_(): self ({D.type_name(self.dtype)}) and source "
                           f"({D.type_name(source.dtype)}) must have the same scalar type")
    if source.dim() and d >= source.dim():
        raise RuntimeError(f"index_add_(): Indexing dim {d} is out of bounds of the source "
                           f"tensor with dim {source.dim()}")
    n = source.shape[d] if source.dim() else 1
    if index.numel() != n:
        raise RuntimeError(f"index_add_(): Number of indices ({index.numel()}) should be equal "
                           f"to source.size(dim): ({n}), for dim: {d}")
    if source.dim() and tuple(source.shape[:d]) + tuple(source.shape[d + 1:]) != \
            tuple(self.shape[:d]) + tuple(self.shape[d + 1:]):
        raise RuntimeError("source tensor shape must match self tensor shape, excluding the "
                           f"specified dimension. Got self.shape = {list(self.shape)} "
                           f"source.shape = {list(source.shape)}")
    return d


def _index_add_cpu(self: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1):
    d = _index_add_check(self, dim, index, source)
    idx = _vector_index("index_add", index)
    cd = compute_np_dtype(self.dtype)
    out = np.array(_np1d(self), dtype=cd, copy=True)
    _check_bounds(idx, out.shape[d], d)
    src = source._np.astype(cd, copy=False).reshape(_index_add_shape(out, d, index))
    if alpha != 1:
        src = (src & bool(alpha) if self.dtype is D.bool_ else
               src * (int(alpha) if self.dtype.category < 2 else alpha))
    n = out.shape[d]
    if n and idx.size == n and np.bincount(idx, minlength=n).min() == 1:
        # idx is a permutation (max pooling's backward with non-overlapping windows):
        # out[idx[j]] += src[j] is out[i] += src[inv[i]], one addition per target, the
        # same sums as np.add.at makes, as one dense add of src gathered back in order
        inv = np.empty_like(idx)
        inv[idx] = np.arange(n)
        out += np.take(src, inv, axis=d)
    else:
        np.add.at(out, (slice(None),) * d + (idx,), src)
    return np_result(out.reshape(self._shape), self.dtype)


def _index_add_cuda(self: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha=1):
    from refimpl.cuda import _index_ops

    d = _index_add_check(self, dim, index, source)
    if alpha != 1:
        source = (source & bool(alpha) if self.dtype is D.bool_ else
                  source * (int(alpha) if self.dtype.category < 2 else alpha))
    out = _index_ops.clone(self)
    _index_ops.index_scatter(out, d, index, source, reduce="sum", wrap=False, err="bounds")
    return out


def _or_zeros(tangent, like):
    return tangent if tangent is not None else _zeros(like.shape, like)


def _index_add_jvp(ctx, t_self, _d, _i, t_src, *_):
    if t_self is None and t_src is None:
        return None
    inp, dim, index, src = ctx.args[:4]
    return _or_zeros(t_self, inp).index_add(dim, index, _or_zeros(t_src, src),
                                            alpha=ctx.kwargs.get("alpha", 1))


def _index_copy_jvp(ctx, t_self, _d, _i, t_src, *_):
    if t_self is None and t_src is None:
        return None
    inp, dim, index, src = ctx.args[:4]
    return _or_zeros(t_self, inp).index_copy(dim, index, _or_zeros(t_src, src))


def _index_fill_tensor_jvp(ctx, t_self, _d, _i, t_value, *_):
    if t_self is None and t_value is None:
        return None
    inp, dim, index, value = ctx.args[:4]
    return _or_zeros(t_self, inp).index_fill(dim, index, _or_zeros(t_value, value))


def _index_add_backward(ctx, grad):
    _, dim, index, source = ctx.args[:4]
    alpha = ctx.kwargs.get("alpha", 1)
    g_src = None
    if ctx.needs_input_grad[3]:
        g_src = grad.index_select(dim, index).reshape(source.shape)
        if alpha != 1:
            g_src = g_src * alpha
    return grad, None, None, g_src


index_add = defop(
    "index_add", cpu=_index_add_cpu, cuda=_index_add_cuda, backward=_index_add_backward,
    jvp=_index_add_jvp,
    meta=lambda self, dim, index, source, **_: _same_meta(self) if _index_add_check(
        self, dim, index, source) is not None else None,
    extra={"save_needs": {3: (2,)}})
index_add_ = inplace_of(index_add)


def _index_copy_check(self: Tensor, dim: int, index: Tensor, source: Tensor) -> int:
    d = wrap_dim(dim, self.dim())
    if index.dim() > 1:
        raise IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got "
                         f"{index.dim()})")
    if index.dtype is not D.int64:
        raise RuntimeError("index_copy_(): Expected a long tensor for index, but got "
                           f"{D.type_name(index.dtype)}")
    if self.dtype != source.dtype:
        raise RuntimeError("index_copy_(): self and source expected to have the same dtype, "
                           f"but got (self) {D.type_name(self.dtype)} and (source) "
                           f"{D.type_name(source.dtype)}")
    if source.dim() and self.dim() and source.dim() != self.dim():
        raise IndexError("index_copy_(): When source and destination are not scalars, their "
                         f"dimensionality must match. Source dimensionality ({source.dim()}), "
                         f"destination dimensionality ({self.dim()})")
    n = source.shape[d] if source.dim() else 1
    if index.numel() != n:
        raise IndexError(f"index_copy_(): Number of indices ({index.numel()}) should be equal "
                         f"to source.size(dim) ({n})")
    for k in range(source.dim()):
        if k != d and source.shape[k] != self.shape[k]:
            raise RuntimeError(
                "index_copy_(): Source/destination tensor must have same slice shapes. "
                f"Destination slice shape: {self.shape[k]} at dimension {d} and source slice "
                f"shape: {source.shape[k]} at dimension 0.")
    return d


def _index_copy_cpu(self: Tensor, dim: int, index: Tensor, source: Tensor) -> np.ndarray:
    d = _index_copy_check(self, dim, index, source)
    idx = _vector_index("index_copy", index)
    out = np.array(_np1d(self), copy=True)
    if idx.size and ((idx < 0) | (idx >= out.shape[d])).any():
        bad = int(idx[(idx < 0) | (idx >= out.shape[d])][0])
        raise IndexError(f"index_copy_(): index {bad} is out of bounds for dimension {d} with "
                         f"size {out.shape[d]}")
    out[(slice(None),) * d + (idx,)] = source._np.reshape(_index_add_shape(out, d, index))
    return out.reshape(self._shape)


def _index_copy_cuda(self: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    from refimpl.cuda import _index_ops

    d = _index_copy_check(self, dim, index, source)
    out = _index_ops.clone(self)
    _index_ops.index_scatter(out, d, index, source, reduce=None, wrap=False, err="copy")
    return out


def _index_copy_backward(ctx, grad):
    _, dim, index, source = ctx.args[:4]
    g_self = grad.index_fill(dim, index, 0) if ctx.needs_input_grad[0] else None
    g_src = grad.index_select(dim, index).reshape(source.shape) \
        if ctx.needs_input_grad[3] else None
    return g_self, None, None, g_src


index_copy = defop(
    "index_copy", cpu=_index_copy_cpu, cuda=_index_copy_cuda, backward=_index_copy_backward,
    jvp=_index_copy_jvp,
    meta=lambda self, dim, index, source: _same_meta(self) if _index_copy_check(
        self, dim, index, source) is not None else None,
    extra={"save_needs": {0: (2,), 3: (2,)}})
index_copy_ = inplace_of(index_copy)


def _index_fill_check(self: Tensor, dim: int, index: Tensor, value) -> int:
    d = wrap_dim(dim, self.dim())
    if index.dim() > 1:
        raise RuntimeError("Index has to be a vector/scalar")
    if index.dtype is not D.int64:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    if isinstance(value, Tensor) and value.dim():
        raise RuntimeError("index_fill_ only supports a 0-dimensional value tensor, but got "
                           f"tensor with {value.dim()} dimension(s).")
    return d


def _index_fill_cpu(self: Tensor, dim: int, index: Tensor, value) -> np.ndarray:
    d = _index_fill_check(self, dim, index, value)
    value = value.item() if isinstance(value, Tensor) else value
    check_scalar_fits(value, self.dtype)
    idx = _vector_index("index_fill", index)
    out = np.array(_np1d(self), copy=True)
    size = out.shape[d]
    if idx.size and ((idx < -size) | (idx >= size)).any():
        bad = int(idx[(idx < -size) | (idx >= size)][0])
        raise IndexError(f"index {bad} is out of bounds for dimension {d} with size {size}")
    with np.errstate(all="ignore"):
        out[(slice(None),) * d + (idx,)] = np.asarray(
            value.real if isinstance(value, complex) and not self.dtype.is_complex else value
        ).astype(self.dtype.np)
    from refimpl.ops.shape import layout_like

    return layout_like(out.reshape(self._shape), self)


def _index_fill_cuda(self: Tensor, dim: int, index: Tensor, value) -> Tensor:
    from refimpl.cuda import _index_ops

    d = _index_fill_check(self, dim, index, value)
    if not isinstance(value, Tensor):
        check_scalar_fits(value, self.dtype)
        if isinstance(value, complex) and not self.dtype.is_complex:
            value = value.real
    out = _index_ops.clone(self)
    _index_ops.index_scatter(out, d, index, value, reduce=None, wrap=True, err="index")
    return out


def _index_fill_meta(self: Tensor, dim: int, index: Tensor, value) -> TensorSpec:
    _index_fill_check(self, dim, index, value)
    return _same_meta(self)


def _filled_sum(g: Tensor, dim: int, index: Tensor) -> Tensor:
    """The sum of ``g`` over the filled positions, each counted once (repeated indices too)."""
    return (g - g.index_fill(dim, index, 0)).sum()


index_fill_scalar = defop(
    "index_fill", cpu=_index_fill_cpu, cuda=_index_fill_cuda, meta=_index_fill_meta,
    backward=lambda ctx, g: (g.index_fill(ctx.args[1], ctx.args[2], 0),),
    jvp=lambda ctx, t, *_: None if t is None else t.index_fill(ctx.args[1], ctx.args[2], 0),
    extra={"method": False, "save_needs": {0: (2,)}})
index_fill_tensor = defop(
    "_index_fill_tensor", cpu=_index_fill_cpu, cuda=_index_fill_cuda, meta=_index_fill_meta,
    node="IndexFillBackward1", jvp=_index_fill_tensor_jvp,
    backward=lambda ctx, g: (g.index_fill(ctx.args[1], ctx.args[2], 0), None, None,
                             _filled_sum(g, ctx.args[1], ctx.args[2])),
    extra={"method": False, "save_needs": {0: (2,), 3: (2,)}})
index_fill_scalar_ = inplace_of(index_fill_scalar)
index_fill_tensor_ = inplace_of(index_fill_tensor)
index_fill_scalar_.extra["method"] = index_fill_tensor_.extra["method"] = False


def index_fill(input: Tensor, dim: int, index: Tensor, value) -> Tensor:
    """A copy with every slice ``index`` along ``dim`` set to ``value``."""
    op = index_fill_tensor if isinstance(value, Tensor) else index_fill_scalar
    return op(input, dim, index, value)


def index_fill_(self: Tensor, dim: int, index: Tensor, value) -> Tensor:
    """In-place ``index_fill``."""
    op = index_fill_tensor_ if isinstance(value, Tensor) else index_fill_scalar_
    return op(self, dim, index, value)


__all__ = [
    "gather",
    "index_add",
    "index_copy",
    "index_fill",
    "index_select",
    "scatter",
    "scatter_add",
]
TENSOR_METHODS = ("scatter", "scatter_", "index_fill", "index_fill_")
