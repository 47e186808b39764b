"""Tensor-level CUDA indexing: the geometry that maps each indexing op onto the generic
index kernel of ``_index`` (see its docstring for the kernel and for index bounds).

The functions take CUDA tensors whose arguments the op has already checked (the op's
own check functions run first, so messages match the CPU kernels) and return fresh
tensors; nothing is read on the host. A 0-dim tensor takes part as a 1-element 1-D one.
"""

from __future__ import annotations

import ctypes

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor, contiguous_strides
from refimpl.cuda import _index, _kernels, _nvrtc, _tensor_ops, streams
from refimpl.cuda._index import IndexArg


def device_index(t: Tensor) -> int:
    """The ordinal of the CUDA device holding ``t``."""
    return t._storage.device.index if t._storage.device.index is not None else \
        t._storage._data.device_index


def stream(index: int) -> int:
    """The raw handle of the current stream of device ``index``."""
    return streams.current_stream_handle(index)


def ptr(t: Tensor) -> int:
    """Address of ``t``'s element 0 (0 for a tensor without storage bytes)."""
    if not t._storage._nbytes:
        return 0
    return t._storage._data.ptr + t._offset * t.dtype.itemsize


def empty(shape, dtype: D.dtype, like: Tensor) -> Tensor:
    """A fresh contiguous tensor on ``like``'s device."""
    return Tensor._empty(tuple(shape), dtype, like._storage.device)


def scalar(value, dtype: D.dtype, like: Tensor) -> Tensor:
    """A 0-dim tensor of ``dtype`` on ``like``'s device holding ``value`` (torch's fill
    conversion). A tensor value is copied on the device."""
    out = empty((), dtype, like)
    if isinstance(value, Tensor):
        _tensor_ops.copy_(out, value)
    else:
        _tensor_ops.fill_(out, value)
    return out


def copy_into(dst: Tensor, src: Tensor) -> None:
    """``dst[...] = src`` (broadcast, cast) on the device, without a version bump."""
    _tensor_ops.copy_(dst, src)


def contiguous(t: Tensor, dtype: D.dtype | None = None) -> Tensor:
    """``t`` itself when contiguous with ``dtype``, else a contiguous device copy."""
    dtype = dtype or t.dtype
    if t.dtype is dtype and t.is_contiguous():
        return t
    out = empty(t._shape, dtype, t)
    copy_into(out, t)
    return out


def clone(t: Tensor) -> Tensor:
    """A fresh contiguous copy of ``t``."""
    out = empty(t._shape, t.dtype, t)
    copy_into(out, t)
    return out


def as_index(t: Tensor, like: Tensor) -> Tensor:
    """An int64 index tensor on ``like``'s device (int32 widened, CPU copied over)."""
    if t._storage.device != like._storage.device:
        out = empty(t._shape, D.int64, like)
        copy_into(out, t)
        return out
    return t if t.dtype is D.int64 else contiguous(t, D.int64)


def geometry(t: Tensor) -> tuple:
    """(shape, strides) with a 0-dim tensor seen as a 1-element 1-D tensor."""
    return (t._shape, t._stride) if t._shape else ((1,), (0,))


def _run(mode, out: Tensor, out_strides, src: Tensor, src_strides, shape, indices, **kw):
    dev = device_index(out)
    _index.launch(mode, out.dtype, ptr(out), out_strides, ptr(src), src_strides, shape,
                  indices, device=dev, stream=stream(dev), **kw)


# -- along one dim: gather / scatter / index_select / index_add ... ------------------------------

def gather(self: Tensor, d: int, index: Tensor) -> Tensor:
    """``out[..i..] = self[..index[..i..]..]`` along ``d`` (torch.gather)."""
    out = empty(index._shape, self.dtype, self)
    idx = as_index(index, self)
    shape, istr = geometry(idx)
    sshape, sstr = geometry(self)
    src_strides = [0 if k == d else sstr[k] for k in range(len(shape))]
    arg = IndexArg(ptr(idx), istr, sshape[d], sstr[d], d)
    _run("gather", out, geometry(out)[1], self, src_strides, shape, [arg], wrap=False,
         err="bounds")
    return out


def scatter(self: Tensor, d: int, index: Tensor, src, reduce: str | None = None) -> Tensor:
    """A copy of ``self`` with ``src`` (tensor or number) written or reduced at ``index``
    along ``d`` (scatter, scatter_add, scatter(reduce=...))."""
    out = clone(self)
    if index.numel() == 0:
        return out
    scatter_into(out, d, index, src, reduce)
    return out


def scatter_into(out: Tensor, d: int, index: Tensor, src, reduce: str | None = None,
                 err: str = "bounds") -> None:
    """In place on the contiguous ``out``: the scatter kernel of :func:`scatter`."""
    idx = as_index(index, out)
    shape, istr = geometry(idx)
    oshape, ostr = geometry(out)
    if isinstance(src, Tensor) and src.dim():
        src_strides = list(src._stride)
    else:
        src = src if isinstance(src, Tensor) else scalar(src, out.dtype, out)
        src_strides = [0] * len(shape)
    out_strides = [0 if k == d else ostr[k] for k in range(len(shape))]
    arg = IndexArg(ptr(idx), istr, oshape[d], ostr[d], d)
    _run("scatter", out, out_strides, src, src_strides, shape, [arg], wrap=False, err=err,
         reduce=reduce)


def _along(t_shape, t_strides, d: int, idx: Tensor) -> tuple:
    """Iteration geometry of the index_* ops: ``t``'s shape with dim ``d`` replaced by the
    index vector; ``t``'s strides with 0 at ``d``; the index strides (only along ``d``)."""
    shape = list(t_shape)
    shape[d] = idx.numel()
    strides = list(t_strides)
    strides[d] = 0
    istr = [0] * len(shape)
    istr[d] = idx._stride[0] if idx.dim() else 0
    return shape, strides, istr


def index_select(self: Tensor, d: int, index: Tensor, out_shape) -> Tensor:
    """``self`` at the vector ``index`` along ``d`` (torch.index_select)."""
    out = empty(out_shape, self.dtype, self)
    idx = as_index(index, self)
    sshape, sstr = geometry(self)
    shape, src_strides, istr = _along(sshape, sstr, d, idx)
    arg = IndexArg(ptr(idx), istr, sshape[d], sstr[d], d)
    _run("gather", out, _contig(shape), self, src_strides, shape, [arg], wrap=False,
         err="select")
    return out


def _contig(shape) -> list:
    return list(contiguous_strides(tuple(shape)))


def index_scatter(out: Tensor, d: int, index: Tensor, source, *, reduce: str | None,
                  wrap: bool, err: str) -> None:
    """In place on the contiguous ``out``: slice ``i`` of ``source`` (tensor shaped like
    ``out`` with ``index.numel()`` at ``d``, or a number) goes to slice ``index[i]`` along
    ``d`` (index_add, index_copy, index_fill, index_reduce)."""
    if index.numel() == 0:
        return
    idx = as_index(index, out)
    oshape, ostr = geometry(out)
    shape, out_strides, istr = _along(oshape, ostr, d, idx)
    if isinstance(source, Tensor) and source.dim():
        src = source.reshape(shape) if tuple(source._shape) != tuple(shape) else source
        src_strides = list(src._stride)
    else:
        src = source if isinstance(source, Tensor) else scalar(source, out.dtype, out)
        src_strides = [0] * len(shape)
    arg = IndexArg(ptr(idx), istr, oshape[d], ostr[d], d)
    _run("scatter", out, out_strides, src, src_strides, shape, [arg], wrap=wrap, err=err,
         reduce=reduce)


def take(self: Tensor, index: Tensor) -> Tensor:
    """``self.flatten()[index]`` (negative indices count from the end)."""
    flat = contiguous(self)
    out = empty(index._shape, self.dtype, self)
    idx = as_index(index, self)
    shape, istr = geometry(idx)
    arg = IndexArg(ptr(idx), istr, self.numel(), 1, 0)
    _run("gather", out, geometry(out)[1], flat, [0] * len(shape), shape, [arg], wrap=True,
         err="take")
    return out


# -- advanced indexing: index / index_put ---------------------------------------------------------

def _advanced(t: Tensor, indices: list) -> tuple:
    """The iteration geometry of ``t[indices]`` (indices: int64 device tensors or None, one
    per leading dim of ``t``): (shape, t's strides over it, index args)."""
    from refimpl.ops._helpers import broadcast_shapes

    adv = [k for k, i in enumerate(indices) if i is not None]
    bshape = broadcast_shapes(*(indices[k]._shape for k in adv))
    nb = len(bshape)
    consecutive = adv == list(range(adv[0], adv[-1] + 1))
    rest = list(range(len(indices), t.dim()))
    sliced = [k for k, i in enumerate(indices) if i is None]
    if consecutive:
        before, after = list(range(adv[0])), [k for k in sliced if k > adv[-1]] + rest
    else:
        before, after = [], sliced + rest
    shape = [t._shape[k] for k in before] + list(bshape) + [t._shape[k] for k in after]
    strides = [t._stride[k] for k in before] + [0] * nb + [t._stride[k] for k in after]
    lead = len(before)
    args = []
    for ordinal, k in enumerate(adv):
        i = indices[k]
        pad = nb - i.dim()
        bstr = [0] * pad + [0 if n == 1 and b != 1 else s for n, s, b in
                            zip(i._shape, i._stride, bshape[pad:])]
        istr = [0] * lead + bstr + [0] * len(after)
        args.append(IndexArg(ptr(i), istr, t._shape[k], t._stride[k], ordinal))
    return shape, strides, args


def _index_tensors(self: Tensor, indices) -> list:
    """torch's index list as int64 device tensors: bool masks become their nonzero
    coordinates (a synchronization, as in torch)."""
    out: list = []
    for i in indices:
        if i is None:
            out.append(None)
        elif i.dtype in (D.bool_, D.uint8):
            from refimpl.cuda import _compact

            mask = i if i._storage.device == self._storage.device else as_index(i, self)
            out.extend(_compact.nonzero_columns(mask))
        else:
            out.append(as_index(i, self))
    if len(out) > self.dim():
        raise IndexError(f"too many indices for tensor of dimension {self.dim()} (got "
                         f"{len(out)})")
    return out


def index(self: Tensor, indices) -> Tensor:
    """``self[indices]`` for torch's aten::index (integer tensors, masks, None)."""
    idx = _index_tensors(self, indices)
    if all(i is None for i in idx):
        return clone(self)
    shape, strides, args = _advanced(self, idx)
    out = empty(shape, self.dtype, self)
    _run("gather", out, _contig(shape), self, strides, shape, args, wrap=True, err="index")
    return out


def index_put(self: Tensor, indices, values: Tensor, accumulate: bool, check) -> Tensor:
    """A copy of ``self`` with ``values`` (broadcast) written, or summed when
    ``accumulate``, at ``indices``; ``check(shape)`` validates the indexed shape.

    float16/bfloat16 sums accumulate in float32 and round once per element, as torch's
    CUDA kernel does (it sorts by index and sums each index's values in float32)."""
    if accumulate and self.dtype in (D.float16, D.bfloat16):
        from refimpl.autograd.grad_mode import no_grad

        with no_grad():
            wide = index_put(self.float(), indices, values.float(), True, check)
            return wide.to(self.dtype)
    out = clone(self)
    idx = _index_tensors(self, indices)
    if all(i is None for i in idx):
        check(out._shape)
        if accumulate:
            raise NotImplementedError("refimpl has no CUDA index_put without index tensors")
        copy_into(out, values)
        return out
    shape, strides, args = _advanced(out, idx)
    check(shape)
    vals = values if values._storage.device == out._storage.device else as_value(values, out)
    lead = len(shape) - vals.dim()
    vstr = [0] * lead + [0 if n == 1 and s != 1 else st for n, st, s in
                         zip(vals._shape, vals._stride, shape[lead:])]
    _run("scatter", out, strides, vals, vstr, shape, args, wrap=True, err="index",
         reduce="sum" if accumulate else None)
    return out


def as_value(t: Tensor, like: Tensor) -> Tensor:
    """``t`` copied to ``like``'s device (a CPU 0-dim value with a CUDA tensor)."""
    out = empty(t._shape, t.dtype, like)
    copy_into(out, t)
    return out


# -- masked_fill --------------------------------------------------------------------------------

_MASKED_FILL = r"""
extern "C" __global__ void masked_fill(T* out, const unsigned char* mask, const T* value,
                                       Meta m) {
  T v = *value;
  GRID_LOOP(i, m.n) { long long d, s; offsets(m, i, d, s); if (mask[s]) out[d] = v; } }
"""


def masked_fill(self: Tensor, mask: Tensor, value, shape) -> Tensor:
    """``self`` broadcast to ``shape`` with ``value`` where ``mask`` (broadcast) is True."""
    out = empty(shape, self.dtype, self)
    copy_into(out, self)
    n = out.numel()
    if n == 0:
        return out
    mask = mask if mask._storage.device == out._storage.device else as_value(mask, out)
    val = scalar(value, self.dtype, self)
    dev = device_index(out)
    name = _kernels._name(self.dtype)
    source = _kernels._PRELUDE + _index.dtype_defs(name) + _MASKED_FILL
    fn = _nvrtc.get_function(source, "masked_fill", dev)
    mstr = _tensor_ops._expanded_strides(mask, tuple(shape))
    cshape, (ostr, mstr) = _kernels._coalesce(list(shape), _contig(shape), mstr)
    meta = _kernels._meta(n, cshape, ostr, mstr)
    _kernels._launch(fn, dev, stream(dev), n, [ctypes.c_uint64(ptr(out)),
                                               ctypes.c_uint64(ptr(mask)),
                                               ctypes.c_uint64(ptr(val)), meta])
    return out


# -- scatter_reduce / index_reduce -----------------------------------------------------------------

_MEAN = r"""
extern "C" __global__ void mean_kernel(T* out, const long long* count, long long n) {
  GRID_LOOP(i, n) {
    long long c = count[i] > 0 ? count[i] : 1;
#ifdef INTEGRAL
    long long a = (long long)ld(out[i]); long long q = a / c;
    if ((a % c != 0) && ((a < 0) != (c < 0))) q -= 1;
    out[i] = st((A)q);
#else
    out[i] = st(ld(out[i]) / (A)c);
#endif
  } }
"""


def reduce_into(self: Tensor, d: int, index: Tensor, src: Tensor, reduce: str,
                include_self: bool, along: str) -> Tensor:
    """A copy of ``self`` with ``src`` combined at ``index`` along ``d`` by ``reduce``
    (sum, prod, mean, amax, amin); ``along`` is "scatter" (scatter_reduce: index shaped
    like src) or "index" (index_reduce: slices of src go to slices index[i])."""
    from refimpl.ops.scatter_reduce import _identity

    out = clone(self)
    if index.numel() == 0:
        return out
    err = "bounds" if along == "scatter" else "select"

    def put(target: Tensor, values, red) -> None:
        if along == "scatter":
            scatter_into(target, d, index, values, red, err=err)
        else:
            index_scatter(target, d, index, values, reduce=red, wrap=False, err=err)

    if not include_self:
        ident = _identity(reduce, np.dtype(np.float32) if self.dtype in (
            D.float16, D.bfloat16) else np.dtype(self.dtype.np))
        put(out, ident.item() if hasattr(ident, "item") else ident, None)
    put(out, src, reduce)
    if reduce != "mean":
        return out
    count = empty(out._shape, D.int64, out)
    _tensor_ops.fill_(count, 1 if include_self else 0)
    if along == "scatter":
        ones = scalar(1, D.int64, out)
        scatter_into(count, d, index, ones, "sum", err=err)
    else:
        index_scatter(count, d, index, 1, reduce="sum", wrap=False, err=err)
    name = _kernels._name(out.dtype)
    integral = self.dtype.category < 2
    source = (_index.INDEX_PRELUDE + _index.dtype_defs(name)
              + ("#define INTEGRAL\n" if integral else "") + _MEAN)
    dev = device_index(out)
    fn = _nvrtc.get_function(source, "mean_kernel", dev)
    n = out.numel()
    _kernels._launch(fn, dev, stream(dev), n, [ctypes.c_uint64(ptr(out)),
                                               ctypes.c_uint64(ptr(count)), ctypes.c_longlong(n)])
    return out
