"""Reducing index ops (spec: TENSOR-407): ``scatter_reduce`` ("sum", "prod", "mean",
"amax", "amin") and ``index_reduce`` ("prod", "mean", "amax", "amin"), with their
in-place forms.

Both combine the values sent to one position of ``self`` with the reduction, ``self``'s
own value included unless ``include_self=False``. ``mean`` divides by the number of
values combined (floor division for integer dtypes); ``amax``/``amin`` propagate NaN.

The checks run in torch's order, each with torch's message: argument checks first, then
(in-place forms) the memory-overlap checks, then the reduction name (scatter_reduce), the
dtypes the kernel supports and finally the index bounds. A failing call leaves ``self``
and its version untouched.

Gradients (ScatterReduceBackward0 / IndexReduceBackward0) are written in refimpl ops so
that they are differentiable again:

* sum: the gradient itself for ``self``, gathered for ``src``;
* mean: the gradient divided by the count of each position;
* amax/amin: the gradient of a position is shared evenly by every element equal to the
  result (``self`` counted in that share even with ``include_self=False``, as torch
  does);
* prod: the product of the *other* factors, computed so that zeros work; when two or
  more zeros of ``src`` land on one position, the gradient for ``src`` can not be
  differentiated again: doing so raises torch's error.

With ``include_self=False`` the gradient for ``self`` is zero at every written position.
"""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor, wrap_dim
from refimpl.ops._helpers import compute_np_dtype, np_result
from refimpl.ops._registry import OpDef, TensorSpec, defop
from refimpl.ops.gather_scatter import _check_bounds, _coords, _index_add_shape, _np1d

SCATTER_REDUCES = ("sum", "prod", "mean", "amax", "amin")
INDEX_REDUCES = ("prod", "mean", "amax", "amin")

_INTERNAL_OVERLAP = (
    "unsupported operation: more than one element of the written-to tensor refers to a single "
    "memory location. Please clone() the tensor before performing the operation.")
_PARTIAL_OVERLAP = (
    "unsupported operation: some elements of the input tensor and the written-to tensor refer "
    "to a single memory location. Please clone() the tensor before performing the operation.")


# -- shared helpers -----------------------------------------------------------------------------

def _type_error(fn: str, arg: str, pos: int, want: str, got) -> TypeError:
    return TypeError(f"{fn}(): argument '{arg}' (position {pos}) must be {want}, not "
                     f"{type(got).__name__}")


def _check_types(fn: str, src_name: str, self, index, src) -> None:
    for name, pos, value in (("input", 1, self), ("index", 3, index), (src_name, 4, src)):
        if not isinstance(value, Tensor):
            raise _type_error(fn, name, pos, "Tensor", value)


def _check_reduce_type(fn: str, reduce) -> None:
    if not isinstance(reduce, str):
        raise _type_error(fn, "reduce", 5, "str", reduce)


def _user_stacklevel() -> int:
    """The ``stacklevel`` that attributes a warning to the first caller outside refimpl."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    level, frame = 1, sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(root):
        frame = frame.f_back
        level += 1
    return level


def _dense(t: Tensor) -> bool:
    """Non-overlapping and dense: the strides are a permutation of contiguous strides."""
    expected = 1
    for s, n in sorted((s, n) for s, n in zip(t._stride, t._shape) if n != 1):
        if s != expected:
            return False
        expected *= n
    return True


def _byte_range(t: Tensor) -> tuple:
    item = t.dtype.itemsize
    return t._offset * item, (t._offset + t.numel()) * item


def check_overlap(self: Tensor, *others: Tensor) -> None:
    """torch's overlap checks of an in-place write into ``self`` that reads ``others``:
    ``self`` may not have aliased elements (a zero stride over a dim of size > 1), and no
    other operand may share memory with it (where both are dense enough to tell)."""
    if any(s == 0 and n > 1 for s, n in zip(self._stride, self._shape)):
        raise RuntimeError(_INTERNAL_OVERLAP)
    if not self.numel() or not _dense(self):
        return
    lo, hi = _byte_range(self)
    for o in others:
        if o._storage is not self._storage or not o.numel() or not _dense(o):
            continue
        olo, ohi = _byte_range(o)
        if olo < hi and lo < ohi:
            raise RuntimeError(_PARTIAL_OVERLAP)


def _identity(reduce: str, cd: np.dtype):
    """The value a position starts from when ``self`` is left out of the reduction."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    big = reduce == "amin"
    if cd.kind == "b":
        return big
    if cd.kind in "iu":
        info = np.iinfo(cd)
        return info.max if big else info.min
    return np.inf if big else -np.inf


_UFUNC = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.maximum,
          "amin": np.minimum}


def _reduce_into(out: np.ndarray, where: tuple, vals: np.ndarray, reduce: str,
                 include_self: bool) -> np.ndarray:
    """Combine ``vals`` into ``out[where]`` (in place) and return the result: the mean is
    divided by the number of values combined at each position."""
    if not include_self:
        out[where] = _identity(reduce, out.dtype)
    with np.errstate(all="ignore"):
        _UFUNC[reduce].at(out, where, vals)
        if reduce != "mean":
            return out
        count = np.full(out.shape, 1 if include_self else 0, dtype=np.int64)
        np.add.at(count, where, 1)
        count[count == 0] = 1
        if out.dtype.kind in "iu":
            return np.floor_divide(out, count.astype(out.dtype))
        return out / count.astype(out.real.dtype)


def _opts(args: tuple, kwargs: dict) -> tuple:
    reduce = args[4] if len(args) > 4 else kwargs["reduce"]
    return reduce, (kwargs or {}).get("include_self", True)


def _same_meta(self: Tensor) -> TensorSpec:
    return TensorSpec(self._shape, self.dtype, self.device)


# -- scatter_reduce -----------------------------------------------------------------------------

def _size(t: Tensor, k: int) -> int:
    """``ensure_nonempty_size``: 1 for a 0-dim tensor, else ``t.size(k)`` (which raises
    IndexError past the last dim)."""
    return 1 if t.dim() == 0 else t.size(k)


def _scatter_reduce_check(self: Tensor, dim: int, index: Tensor, src: Tensor) -> int:
    """The argument checks of scatter_reduce before any data is read; returns the dim."""
    _check_types("scatter_reduce", "src", self, index, src)
    d = wrap_dim(dim, self.dim())
    if index.dtype not in (D.int64, D.int32):
        raise RuntimeError("scatter(): Expected dtype int32/int64 for index")
    if src.dtype != self.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    if index.numel() == 0:
        return d
    n = max(self.dim(), 1)
    if max(index.dim(), 1) != n:
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    wrong = any(k != d and _size(index, k) > _size(self, k) for k in range(n))
    if not wrong:
        # a src with fewer dims fails here, on reading the size of its first missing dim
        wrong = any(_size(index, k) > _size(src, k) for k in range(n))
    if max(src.dim(), 1) != n:
        raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    if wrong:
        raise RuntimeError(
            f"Expected index {list(index.shape)} to be no larger than self {list(self.shape)} "
            f"apart from dimension {d} and to be no larger size than src {list(src.shape)}")
    return d


def _scatter_reduce_meta(self, dim, index, src, reduce, *, include_self=True) -> TensorSpec:
    _scatter_reduce_check(self, dim, index, src)
    _check_reduce_type("scatter_reduce", reduce)
    if reduce not in SCATTER_REDUCES:  # torch's meta function words it without the name
        raise RuntimeError("reduce argument must be either sum, prod, mean, amax or amin.")
    return _same_meta(self)


def _scatter_reduce_checks(self: Tensor, dim: int, index: Tensor, src: Tensor, reduce,
                           inplace: bool) -> int:
    """torch's checks of scatter_reduce (both devices); returns the wrapped dim."""
    d = _scatter_reduce_check(self, dim, index, src)
    _check_reduce_type("scatter_reduce", reduce)
    if inplace:
        check_overlap(self, index, src)
    if reduce not in SCATTER_REDUCES:
        raise RuntimeError("reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    return d


def _scatter_reduce_compute(self: Tensor, dim: int, index: Tensor, src: Tensor, reduce,
                            include_self: bool, inplace: bool) -> np.ndarray:
    d = _scatter_reduce_checks(self, dim, index, src, reduce, inplace)
    empty = index.numel() == 0
    idx = _np1d(index).astype(np.int64, copy=False)
    size = self._shape[d] if self._shape else 1
    if not include_self:
        # torch first scatters the identity into the written positions: that scatter's
        # bounds check comes before the reduction's dtype checks
        _check_bounds(idx, size, d)
    if self.dtype.is_complex and reduce in ("amax", "amin") and not empty:
        raise NotImplementedError(f'"scatter_gather_tensor_cpu_reduce_{reduce}" not '
                                  f"implemented for '{D.type_name(self.dtype)}'")
    if self.dtype is D.bool_ and reduce == "mean":
        kernel = "div_floor_cpu" if empty else "scatter_gather_tensor_cpu_reduce_mean"
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")
    cd = compute_np_dtype(self.dtype)
    out = np.array(_np1d(self), dtype=cd, copy=True)
    if empty:
        return np_result(out.reshape(self._shape), self.dtype)
    _check_bounds(idx, size, d)
    vals = _np1d(src)[tuple(slice(0, n) for n in idx.shape)].astype(cd, copy=False)
    out = _reduce_into(out, _coords(idx, d), vals, reduce, include_self)
    return np_result(out.reshape(self._shape), self.dtype)


def _scatter_reduce_cpu(self, dim, index, src, reduce, *, include_self=True):
    return _scatter_reduce_compute(self, dim, index, src, reduce, include_self, False)


def _scatter_reduce_inplace_cpu(self, dim, index, src, reduce, *, include_self=True):
    return _scatter_reduce_compute(self, dim, index, src, reduce, include_self, True)


# -- index_reduce -------------------------------------------------------------------------------

def _index_reduce_check(self: Tensor, dim: int, index: Tensor, source: Tensor, reduce) -> int:
    """The argument checks of index_reduce before any data is read; returns the dim."""
    _check_types("index_reduce", "source", self, index, source)
    _check_reduce_type("index_reduce", reduce)
    if reduce not in INDEX_REDUCES:
        raise RuntimeError("index_reduce(): Expected reduce to be one of prod, mean, amax or "
                           f"amin but got {reduce}.")
    d = wrap_dim(dim, self.dim())
    if index.dim() > 1:
        raise IndexError(f"index_reduce_(): Index is supposed to be a vector, but got dim: "
                         f"{index.dim()} with type: {D.type_name(index.dtype)} and size: "
                         f"{list(index.shape)}")
    if index.dtype not in (D.int64, D.int32):
        raise RuntimeError("index_reduce_(): Expected dtype int32/int64 for index but got: "
                           f"{D.type_name(index.dtype)}")
    if self.dtype != source.dtype:
        raise RuntimeError(f"index_reduce_(): self ({D.type_name(self.dtype)}) and source "
                           f"({D.type_name(source.dtype)}) must have the same scalar type")
    if not (d == 0 or d < source.dim()):
        raise RuntimeError(f"index_reduce_(): Indexing dim {d} is out of bounds of the source "
                           f"tensor with dim {source.dim()}")
    if index.numel() != (source.shape[d] if source.dim() else 1):
        if not source.dim():
            raise IndexError("Dimension specified as 0 but tensor has no dimensions")
        raise RuntimeError(f"index_reduce_(): Number of indices ({index.numel()}) should be "
                           f"equal to source.size(dim): ({source.shape[d]}), for dim: {d}")
    self_sizes, source_sizes = list(self.shape), list(source.shape)
    if self_sizes and source_sizes:
        del self_sizes[d], source_sizes[d]
    if self_sizes != source_sizes:
        raise RuntimeError("source tensor shape must match self tensor shape, excluding the "
                           f"specified dimension. Got self.shape = {list(self.shape)} "
                           f"source.shape = {list(source.shape)}")
    return d


def _index_reduce_meta(self, dim, index, source, reduce, *, include_self=True) -> TensorSpec:
    # torch's meta function checks nothing: the output is like self
    _check_types("index_reduce", "source", self, index, source)
    return _same_meta(self)


_beta_warned: list = []


def _index_reduce_compute(self: Tensor, dim: int, index: Tensor, source: Tensor, reduce,
                          include_self: bool, inplace: bool) -> np.ndarray:
    d = _index_reduce_check(self, dim, index, source, reduce)
    if inplace:
        check_overlap(self, index, source)
    if not _beta_warned:  # torch warns once per process (TORCH_WARN_ONCE)
        _beta_warned.append(True)
        warnings.warn("index_reduce() is in beta and the API may change at any time.",
                      UserWarning, stacklevel=_user_stacklevel())
    name = D.type_name(self.dtype)
    unsupported = self.dtype is D.bool_ or self.dtype.is_complex
    if unsupported and not include_self:
        raise NotImplementedError("\"index_reduce_func_exclude_input_init\" not implemented "
                                  f"for '{name}'")
    if unsupported and self.dim() <= 1:
        raise NotImplementedError(f"\"index_func_\" not implemented for '{name}'")
    cd = compute_np_dtype(self.dtype)
    out = np.array(_np1d(self), dtype=cd, copy=True)
    idx = index._np.reshape(-1).astype(np.int64, copy=False)
    if not include_self:
        # torch first fills the written slices with the identity (index_fill: its bounds
        # check lets negative indices through, the reduction then rejects them)
        size = out.shape[d]
        bad = (idx < -size) | (idx >= size)
        if bad.any():
            raise IndexError(f"index {int(idx[bad][0])} is out of bounds for dimension {d} "
                             f"with size {size}")
    if not idx.size:
        return np_result(out.reshape(self._shape), self.dtype)
    # torch reduces slice by slice for self.dim() > 1: bool and complex work there, except
    # with the ufuncs complex numbers do not have, which fail on the first slice
    bad = (idx < 0) | (idx >= out.shape[d])
    if bad[0]:
        raise IndexError("index out of range in self")
    if self.dtype.is_complex and reduce in ("amax", "amin"):
        kernel = "maximum_cpu" if reduce == "amax" else "minimum_cpu"
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{name}'")
    if bad.any():
        raise IndexError("index out of range in self")
    if self.dtype is D.bool_ and reduce == "mean":
        raise NotImplementedError("\"div_floor_cpu\" not implemented for 'Bool'")
    shape = list(out.shape)
    shape[d] = idx.size
    vals = source._np.astype(cd, copy=False).reshape(shape)
    out = _reduce_into(out, (slice(None),) * d + (idx,), vals, reduce, include_self)
    return np_result(out.reshape(self._shape), self.dtype)


def _index_reduce_cpu(self, dim, index, source, reduce, *, include_self=True):
    return _index_reduce_compute(self, dim, index, source, reduce, include_self, False)


def _index_reduce_inplace_cpu(self, dim, index, source, reduce, *, include_self=True):
    return _index_reduce_compute(self, dim, index, source, reduce, include_self, True)


# -- CUDA kernels ---------------------------------------------------------------------------------

def _scatter_reduce_cuda_compute(self, dim, index, src, reduce, include_self, inplace):
    from refimpl.cuda import _index_ops

    d = _scatter_reduce_checks(self, dim, index, src, reduce, inplace)
    if self.dtype is D.bool_ and reduce == "mean":
        raise NotImplementedError("\"scatter_gather_tensor_cuda_reduce_mean\" not implemented "
                                  "for 'Bool'")
    return _index_ops.reduce_into(self, d, index, src, reduce, include_self, "scatter")


def _scatter_reduce_cuda(self, dim, index, src, reduce, *, include_self=True):
    return _scatter_reduce_cuda_compute(self, dim, index, src, reduce, include_self, False)


def _scatter_reduce_inplace_cuda(self, dim, index, src, reduce, *, include_self=True):
    return _scatter_reduce_cuda_compute(self, dim, index, src, reduce, include_self, True)


def _index_reduce_cuda_compute(self, dim, index, source, reduce, include_self, inplace):
    from refimpl.cuda import _index_ops

    d = _index_reduce_check(self, dim, index, source, reduce)
    if inplace:
        check_overlap(self, index, source)
    if not _beta_warned:
        _beta_warned.append(True)
        warnings.warn("index_reduce() is in beta and the API may change at any time.",
                      UserWarning, stacklevel=_user_stacklevel())
    if self.dtype is D.bool_ or self.dtype.is_complex:
        raise NotImplementedError(f"\"index_reduce_cuda\" not implemented for "
                                  f"'{D.type_name(self.dtype)}'")
    return _index_ops.reduce_into(self, d, index, source, reduce, include_self, "index")


def _index_reduce_cuda(self, dim, index, source, reduce, *, include_self=True):
    return _index_reduce_cuda_compute(self, dim, index, source, reduce, include_self, False)


def _index_reduce_inplace_cuda(self, dim, index, source, reduce, *, include_self=True):
    return _index_reduce_cuda_compute(self, dim, index, source, reduce, include_self, True)


# -- derivatives ----------------------------------------------------------------------------------

_PROD_GRADGRAD = ("{fn}(): Double backward is unsupported for {src} when >1 zeros in {src} are "
                  "scattered to the same position in self")


class _Along:
    """How values move between ``self``-shaped and ``src``-shaped tensors for one of the
    two ops: scatter_reduce (scatter_add / gather / scatter) or index_reduce (index_add /
    index_select / index_fill)."""

    def __init__(self, op, dim: int, index: Tensor, reduce: str, include_self: bool) -> None:
        self.op, self.dim, self.index = op, dim, index
        self.reduce, self.include_self = reduce, include_self
        self.scattering = op.name.startswith("scatter")

    def add(self, base: Tensor, vals: Tensor) -> Tensor:
        """``vals`` summed into ``base`` at their positions."""
        if not self.index.numel():
            return base
        if self.scattering:
            return base.scatter_add(self.dim, self.index, vals)
        return base.index_add(self.dim, self.index, vals)

    def take(self, t: Tensor) -> Tensor:
        """The values of ``t`` at the positions the sources go to (src-shaped)."""
        if not self.index.numel():
            from refimpl.ops.factories import zeros

            shape = self.index.shape if self.scattering else _index_add_shape(t, self.dim,
                                                                              self.index)
            return zeros(tuple(shape), dtype=t.dtype, device=t.device)
        if self.scattering:
            return t.gather(self.dim, self.index)
        return t.index_select(self.dim, self.index)

    def clear(self, t: Tensor) -> Tensor:
        """``t`` with zeros at every written position."""
        if not self.index.numel():
            return t
        if self.scattering:
            return t.scatter(self.dim, self.index, 0)
        return t.index_fill(self.dim, self.index, 0)

    def again(self, base: Tensor, src: Tensor) -> Tensor:
        """The forward op again (recorded, so that it is differentiable)."""
        return self.op(base, self.dim, self.index, src, self.reduce,
                       include_self=self.include_self)


def _const(like: Tensor, value) -> Tensor:
    from refimpl.ops.factories import full_like

    return full_like(like, value)


def _mean_grads(a: _Along, grad: Tensor, src: Tensor, needs) -> tuple:
    count = a.add(_const(grad, 1 if a.include_self else 0), _const(src, 1))
    count = count.masked_fill(count == 0, 1)
    g_self = grad / count if needs[0] else None
    g_src = a.take(grad) / a.take(count) if needs[3] else None
    return g_self, g_src


def _extreme_grads(a: _Along, grad: Tensor, self: Tensor, src: Tensor, result: Tensor,
                   needs) -> tuple:
    self_hits = (self == result).to(grad.dtype)
    src_hits = (src == a.take(result)).to(grad.dtype)
    share = grad / a.add(self_hits, src_hits)
    g_self = self_hits * share if needs[0] else None
    g_src = src_hits * a.take(share) if needs[3] else None
    return g_self, g_src


def _prod_grads(a: _Along, grad: Tensor, self: Tensor, src: Tensor, result: Tensor,
                needs) -> tuple:
    from refimpl.autograd._functions import DelayedError
    from refimpl.ops.elementwise_binary import where

    g_self = g_src = None
    if needs[0]:
        # the product of the other factors: self's zeros are divided out as ones
        self_or_one = self.masked_fill(self == 0, 1)
        g_self = grad * a.again(self_or_one, src) / self_or_one
    if needs[3]:
        zero = src == 0
        zeros_there = a.take(a.add(_const(self, 0), zero.to(self.dtype)))
        lone_zero = zero.bitwise_and(zeros_there == 1)
        # a lone zero's gradient is the product of the rest: recompute it with a one there
        others = a.take(grad * a.again(self, src.masked_fill(lone_zero, 1)))
        g_src = where(lone_zero, others, a.take(grad * result) / src.masked_fill(zero, 1))
        if bool((zeros_there > 1).any()):
            fn = "scatter_reduce" if a.scattering else "index_reduce"
            name = "src" if a.scattering else "source"
            g_src = DelayedError(_PROD_GRADGRAD.format(fn=fn, src=name), 1)(g_src)
    return g_self, g_src


def _make_backward(op_ref: list):
    def backward(ctx, grad):
        self, dim, index, src = ctx.args[:4]
        reduce, include_self = _opts(ctx.args, ctx.kwargs)
        needs = ctx.needs_input_grad
        a = _Along(op_ref[0], dim, index, reduce, include_self)
        if reduce == "sum":
            g_self = grad if needs[0] else None
            g_src = a.take(grad) if needs[3] else None
        elif reduce == "mean":
            g_self, g_src = _mean_grads(a, grad, src, needs)
        elif reduce == "prod":
            g_self, g_src = _prod_grads(a, grad, self, src, ctx.outputs[0], needs)
        else:
            g_self, g_src = _extreme_grads(a, grad, self, src, ctx.outputs[0], needs)
        if g_self is not None and not include_self:
            g_self = a.clear(g_self)
        return g_self, None, None, g_src

    return backward


def _scatter_reduce_jvp(ctx, t_self, _d, _i, t_src, *_):
    """Forward mode (torch has none for prod: the output gets no tangent)."""
    if t_self is None and t_src is None:
        return None
    self, dim, index, src = ctx.args[:4]
    reduce, include_self = _opts(ctx.args, ctx.kwargs)
    if reduce == "prod":
        return None
    t_self = t_self if t_self is not None else _const(self, 0)
    t_src = t_src if t_src is not None else _const(src, 0)
    if reduce in ("sum", "mean"):
        return scatter_reduce_op(t_self, dim, index, t_src, reduce, include_self=include_self)
    result = ctx.outputs[0]
    self_hits = (self == result).to(self.dtype)
    if not include_self:
        self_hits = self_hits.scatter(dim, index, 0)
    src_hits = (src == result.gather(dim, index)).to(self.dtype)
    count = self_hits.scatter_add(dim, index, src_hits)
    return (t_self * self_hits).scatter_add(dim, index, t_src * src_hits) / count


def _index_reduce_jvp(ctx, *tangents):
    raise NotImplementedError(
        "Trying to use forward AD with index_reduce that does not support it because it has "
        "not been implemented yet.\nPlease file an issue to PyTorch at "
        "https://github.com/pytorch/pytorch/issues/new?template=feature-request.yml so that "
        "we can prioritize its implementation or submit a PR adding the implementation to "
        "derivatives.yaml")


# -- the ops ------------------------------------------------------------------------------------

def _ops(name: str, meta, cpu, inplace_cpu, cuda, inplace_cuda, jvp) -> tuple:
    """The out-of-place op and its in-place form (whose kernel adds the overlap checks).
    Like torch, both save self, index, src and the result whatever needs a gradient."""
    ref: list = []
    backward = _make_backward(ref)
    op = defop(name, meta=meta, cpu=cpu, cuda=cuda, backward=backward, jvp=jvp,
               saves=("inputs", "outputs"), extra={"method": False})
    ref.append(op)
    base = OpDef(name, meta=meta, cpu=inplace_cpu, cuda=inplace_cuda, node=op.node,
                 extra=op.extra)
    op_ = defop(name + "_", kind="inplace", base=base, meta=meta, backward=backward, jvp=jvp,
                node=op.node, saves=op.saves, extra={"method": False})
    return op, op_


scatter_reduce_op, scatter_reduce_op_ = _ops(
    "scatter_reduce", _scatter_reduce_meta, _scatter_reduce_cpu, _scatter_reduce_inplace_cpu,
    _scatter_reduce_cuda, _scatter_reduce_inplace_cuda, _scatter_reduce_jvp)
index_reduce_op, index_reduce_op_ = _ops(
    "index_reduce", _index_reduce_meta, _index_reduce_cpu, _index_reduce_inplace_cpu,
    _index_reduce_cuda, _index_reduce_inplace_cuda, _index_reduce_jvp)


def _no_complex_autograd(fn: str, result: Tensor, out) -> None:
    # as torch, checked once the output exists (so kernel errors come first); the in-place
    # forms do not check
    if out is None and result.requires_grad and result.dtype.is_complex:
        raise RuntimeError(f"{fn} does not support automatic differentiation for outputs with "
                           "complex dtype.")


def scatter_reduce(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                   include_self: bool = True, out=None) -> Tensor:
    """A copy of ``input`` where the values of ``src`` are combined into the positions
    ``index`` gives along ``dim`` with ``reduce`` (sum, prod, mean, amax or amin)."""
    kwargs = {"include_self": include_self}
    if out is not None:
        kwargs["out"] = out
    result = scatter_reduce_op(input, dim, index, src, reduce, **kwargs)
    _no_complex_autograd("scatter_reduce", result, out)
    return result


def scatter_reduce_(self: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                    include_self: bool = True) -> Tensor:
    """In-place ``scatter_reduce``."""
    return scatter_reduce_op_(self, dim, index, src, reduce, include_self=include_self)


def index_reduce(input: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                 include_self: bool = True, out=None) -> Tensor:
    """A copy of ``input`` where slice ``i`` of ``source`` along ``dim`` is combined into
    slice ``index[i]`` with ``reduce`` (prod, mean, amax or amin)."""
    kwargs = {"include_self": include_self}
    if out is not None:
        kwargs["out"] = out
    result = index_reduce_op(input, dim, index, source, reduce, **kwargs)
    _no_complex_autograd("index_reduce", result, out)
    return result


def index_reduce_(self: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                  include_self: bool = True) -> Tensor:
    """In-place ``index_reduce``."""
    return index_reduce_op_(self, dim, index, source, reduce, include_self=include_self)


__all__ = ["index_reduce", "scatter_reduce"]
TENSOR_METHODS = ("scatter_reduce", "scatter_reduce_", "index_reduce", "index_reduce_")
