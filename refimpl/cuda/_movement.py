"""Tensor-level CUDA data movement: cat, stack, flip, roll, repeat, tril/triu, diag_embed,
diagonal copies and the backward ops of views.

Most of these are strided copies: the output (or the input) is looked at through a
view whose shape and strides make the op a plain element-by-element copy, and the
copy kernel of ``_kernels`` moves the data on the device (a flip is a copy from a view
with negated strides, a repeat a copy into a view of the output split as
``[r0, s0, r1, s1, ...]`` from the input expanded over the ``r`` dims, a cat one copy
per input into its slice of the output). tril/triu have a kernel of their own; the
view backward ops scatter the gradient through the view with the index kernel (summing
with atomics where the view overlaps itself, as unfold's windows do).
"""

from __future__ import annotations

import ctypes
import math

from refimpl import _dtype as D
from refimpl._tensor import Tensor, contiguous_strides
from refimpl.cuda import _index, _kernels, _nvrtc
from refimpl.cuda._index_ops import copy_into, device_index, empty, ptr, stream


def view(t: Tensor, shape, strides, offset: int) -> Tensor:
    """A view of ``t``'s storage (internal: no autograd, no version sharing needed)."""
    return Tensor._make(t._storage, tuple(shape), tuple(strides), offset, t.dtype)


def zeros(shape, dtype: D.dtype, like: Tensor) -> Tensor:
    """A zero-filled contiguous tensor on ``like``'s device."""
    from refimpl.cuda import _tensor_ops

    out = empty(shape, dtype, like)
    _tensor_ops.fill_(out, 0)
    return out


# -- cat / stack ---------------------------------------------------------------------------------

def cat(tensors, d: int, shape, dtype: D.dtype) -> Tensor:
    """Concatenate (already checked) ``tensors`` along ``d``; 1-D empty ones are skipped."""
    out = empty(shape, dtype, tensors[0])
    start = 0
    for x in tensors:
        if tuple(x._shape) == (0,) and len(shape) != 1:
            continue
        n = x._shape[d]
        if n and out.numel():
            copy_into(view(out, x._shape, out._stride, start * out._stride[d]), x)
        start += n
    return out


def stack(tensors, d: int, shape, dtype: D.dtype) -> Tensor:
    """Stack equal-shaped ``tensors`` along a new dim ``d``."""
    out = empty(shape, dtype, tensors[0])
    if not out.numel():
        return out
    strides = out._stride[:d] + out._stride[d + 1:]
    for i, x in enumerate(tensors):
        copy_into(view(out, x._shape, strides, i * out._stride[d]), x)
    return out


# -- flip / roll / repeat ------------------------------------------------------------------------

def flip(self: Tensor, dims) -> Tensor:
    """A copy with the order of ``dims`` reversed (read through negated strides)."""
    out = empty(self._shape, self.dtype, self)
    if not out.numel():
        return out
    strides, offset = list(self._stride), self._offset
    for d in dims:
        offset += (self._shape[d] - 1) * strides[d]
        strides[d] = -strides[d]
    copy_into(out, view(self, self._shape, strides, offset))
    return out


def _roll_dim(src: Tensor, out: Tensor, d: int, shift: int) -> None:
    n = src._shape[d]
    s = shift % n if n else 0

    def part(t: Tensor, start: int, length: int) -> Tensor:
        shape = list(t._shape)
        shape[d] = length
        return view(t, shape, t._stride, t._offset + start * t._stride[d])

    if n - s:
        copy_into(part(out, s, n - s), part(src, 0, n - s))
    if s:
        copy_into(part(out, 0, s), part(src, n - s, s))


def roll(self: Tensor, shifts, dims) -> Tensor:
    """Elements shifted cyclically along ``dims`` (the flattened tensor when empty)."""
    if not self.numel():
        return empty(self._shape, self.dtype, self)
    if not dims:
        flat = empty((self.numel(),), self.dtype, self)
        copy_into(view(flat, self._shape, contiguous_strides(self._shape), 0), self)
        out = empty((self.numel(),), self.dtype, self)
        _roll_dim(flat, out, 0, shifts[0])
        return view(out, self._shape, contiguous_strides(self._shape), 0)
    src = self
    for shift, d in zip(shifts, dims):
        out = empty(self._shape, self.dtype, self)
        _roll_dim(src, out, d, shift)
        src = out
    return src


def repeat(self: Tensor, repeats, shape) -> Tensor:
    """``self`` tiled ``repeats`` times along each (leading-padded) dim."""
    out = empty(shape, self.dtype, self)
    if not out.numel():
        return out
    pad = len(repeats) - self.dim()
    in_shape = (1,) * pad + tuple(self._shape)
    in_stride = (0,) * pad + tuple(self._stride)
    split_shape, dst, src = [], [], []
    for r, n, st, ost in zip(repeats, in_shape, in_stride, out._stride):
        split_shape += [r, n]
        dst += [n * ost, ost]
        src += [0, st]
    copy_into(view(out, split_shape, dst, 0), view(self, split_shape, src, self._offset))
    return out


# -- tril / triu ---------------------------------------------------------------------------------

_TRI = r"""
extern "C" __global__ void tri_kernel(T* out, const T* src, Meta m, long long rows,
                                      long long cols, long long k, int lower) {
  GRID_LOOP(i, m.n) { long long d, s; offsets(m, i, d, s);
    long long c = i % cols, r = (i / cols) % rows;
    bool keep = lower ? (c - r <= k) : (c - r >= k);
    out[d] = keep ? src[s] : T{}; } }
"""


def tri(self: Tensor, k: int, lower: bool) -> Tensor:
    """tril (``lower``) or triu of the last two dims, diagonal offset ``k``."""
    out = empty(self._shape, self.dtype, self)
    n = out.numel()
    if not n:
        return out
    name = _kernels._name(self.dtype)
    source = _kernels._PRELUDE + f"typedef {_kernels._DTYPES[name][0]} T;\n" + _TRI
    dev = device_index(out)
    fn = _nvrtc.get_function(source, "tri_kernel", dev)
    cshape, (dstr, sstr) = _kernels._coalesce(list(self._shape), list(out._stride),
                                              list(self._stride))
    meta = _kernels._meta(n, cshape, dstr, sstr)
    rows, cols = self._shape[-2], self._shape[-1]
    _kernels._launch(fn, dev, stream(dev), n, [
        ctypes.c_uint64(ptr(out)), ctypes.c_uint64(ptr(self)), meta, ctypes.c_longlong(rows),
        ctypes.c_longlong(cols), ctypes.c_longlong(k), ctypes.c_int(int(lower))])
    return out


# -- diagonals and the backward ops of views -----------------------------------------------------

def diag_embed(self: Tensor, shape, spec) -> Tensor:
    """Zeros of ``shape`` with ``self`` written through the diagonal view ``spec``."""
    out = zeros(shape, self.dtype, self)
    if self.numel():
        copy_into(view(out, spec.shape, spec.stride, spec.offset), self)
    return out


def copy_view(self: Tensor, spec) -> Tensor:
    """A contiguous copy of the view ``spec`` of ``self``'s storage."""
    src = view(self, spec.shape, spec.stride, spec.offset)
    out = empty(spec.shape, self.dtype, self)
    copy_into(out, src)
    return out


def scatter_view(grad: Tensor, sizes, spec, accumulate: bool) -> Tensor:
    """Zeros of ``sizes`` with ``grad`` written (summed when ``accumulate``: the view may
    overlap itself) through ``spec``, a view of a contiguous tensor of ``sizes``."""
    out = zeros(tuple(sizes), grad.dtype, grad)
    if not grad.numel():
        return out
    dev = device_index(out)
    base = ptr(out) + spec.offset * out.dtype.itemsize
    _index.launch("scatter", out.dtype, base, list(spec.stride), ptr(grad), list(grad._stride),
                  list(spec.shape), [], wrap=False, err="bounds",
                  reduce="sum" if accumulate else None, device=dev, stream=stream(dev))
    return out


def _overlapping(shape, stride) -> bool:
    expected = 1
    for s, n in sorted((abs(s), n) for s, n in zip(stride, shape) if n != 1):
        if s < expected:
            return True
        expected = s * n
    return False


def _span(shape, stride, offset) -> tuple:
    lo = hi = offset
    for n, s in zip(shape, stride):
        if n == 0:
            return offset, offset
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    return lo, hi


def as_strided_backward(grad: Tensor, in_geom, size, stride, offset) -> Tensor:
    """The gradient of ``as_strided``: ``grad`` summed into the storage positions of the
    output view, read back through the input's geometry."""
    in_shape, in_stride, in_offset = in_geom
    if _overlapping(in_shape, in_stride) and math.prod(in_shape):
        raise NotImplementedError(
            "refimpl has no CUDA kernel for as_strided_backward of an input whose elements "
            "overlap in memory")
    lo1, hi1 = _span(in_shape, in_stride, in_offset)
    lo2, hi2 = _span(size, stride, offset)
    lo, hi = min(lo1, lo2), max(hi1, hi2) + 1
    flat = zeros((hi - lo,), grad.dtype, grad)
    dev = device_index(flat)
    if grad.numel():
        _index.launch("scatter", grad.dtype, ptr(flat) + (offset - lo) * grad.dtype.itemsize,
                      list(stride), ptr(grad), list(grad._stride), list(size), [],
                      wrap=False, err="bounds", reduce="sum", device=dev, stream=stream(dev))
    out = empty(in_shape, grad.dtype, grad)
    copy_into(out, view(flat, in_shape, in_stride, in_offset - lo))
    return out
