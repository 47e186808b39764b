"""Views that reinterpret the dtype: ``view(dtype)``, ``view_as_real``,
``view_as_complex``, ``real`` and ``imag`` (spec: TENSOR-004, TENSOR-005).

A ``ViewSpec`` cannot change the dtype, so these are "compute" ops whose kernels return
the aliasing tensor themselves. ``view_as_real``/``view_as_complex`` set ``_base`` (autograd
treats them as views); ``view(dtype)``, as in torch, is not tracked as a view and is not
differentiable, but shares the storage and the version counter.
"""

from __future__ import annotations

from refimpl import _dtype as D
from refimpl._math_views import copy_bits
from refimpl._tensor import Tensor
from refimpl.ops._pointwise import mark_pointwise
from refimpl.ops._registry import TensorSpec, defop


def alias_as(src: Tensor, shape, stride, offset: int, dtype: D.dtype) -> Tensor:
    """A view of ``src`` read as ``dtype`` (same storage, version counter and root base)."""
    base = src._base if src._base is not None else src
    out = Tensor._make(src._storage, shape, stride, offset, dtype, src._version_counter, base)
    out._is_inference = src._is_inference
    return copy_bits(out, src)


def _check_last_stride(self: Tensor, what: str) -> None:
    if self._stride[-1] != 1:
        raise RuntimeError(f"self.stride(-1) must be 1 {what}, but got {self._stride[-1]}")


def _dtype_view_geometry(self: Tensor, dtype: D.dtype):
    """Shape, strides and offset of ``self`` reinterpreted as ``dtype`` (torch's view.dtype)."""
    old, new = self.dtype.itemsize, dtype.itemsize
    if old == new:
        return self._shape, self._stride, self._offset
    what = (f"to view {D.type_name(self.dtype)} as {D.type_name(dtype)} "
            "(different element sizes)")
    if self.dim() == 0:
        raise RuntimeError(f"self.dim() cannot be 0 {what}")
    shape, stride = list(self._shape), list(self._stride)
    if new > old:
        ratio = new // old
        if shape[-1] % ratio:
            raise RuntimeError(
                f"self.size(-1) must be divisible by {ratio} {what}, but got {shape[-1]}")
        if self._offset % ratio:
            raise RuntimeError(
                f"self.storage_offset() must be divisible by {ratio} {what}, but got "
                f"{self._offset}")
        _check_last_stride(self, what)
        for i in range(len(stride) - 1):
            if stride[i] % ratio:
                raise RuntimeError(
                    f"self.stride({i}) must be divisible by {ratio} {what}, but got {stride[i]}")
            stride[i] //= ratio
        shape[-1] //= ratio
        return tuple(shape), tuple(stride), self._offset // ratio
    _check_last_stride(self, what)
    ratio = old // new
    shape[-1] *= ratio
    stride = [s * ratio for s in stride[:-1]] + [1]
    return tuple(shape), tuple(stride), self._offset * ratio


def _view_dtype_kernel(self: Tensor, dtype: D.dtype) -> Tensor:
    shape, stride, offset = _dtype_view_geometry(self, dtype)
    return Tensor._make(self._storage, shape, stride, offset, dtype, self._version_counter)


def _view_dtype_meta(self: Tensor, dtype: D.dtype) -> TensorSpec:
    return TensorSpec(_dtype_view_geometry(self, dtype)[0], dtype, self.device)


# torch does not track view(dtype) as a view (no _base) and it is not differentiable, but
# the result shares the storage and the version counter.
view_dtype = defop("_view_dtype", meta=_view_dtype_meta, cpu=_view_dtype_kernel,
                   cuda=_view_dtype_kernel, differentiable=False, extra={"method": False})


# -- complex <-> real views ------------------------------------------------------------
# These views change the dtype, which a ViewSpec cannot say: they are "compute" ops whose
# kernels return the aliasing tensor themselves (with ``_base`` set, so autograd still
# treats the result as a view of the input).

def _view_as_real_geometry(self: Tensor) -> tuple:
    if not self.dtype.is_complex:
        raise RuntimeError("view_as_real is only supported for complex tensors")
    if self._conj_bit:
        raise RuntimeError(
            "view_as_real doesn't work on unresolved conjugated tensors.  To resolve the "
            "conjugate tensor so you can view it as real, use self.resolve_conj(); however, "
            "be warned that the resulting tensor will NOT alias the original.")
    return (self._shape + (2,), tuple(s * 2 for s in self._stride) + (1,), self._offset * 2,
            self.dtype.to_real())


def _view_as_complex_geometry(self: Tensor) -> tuple:
    if self.dtype not in (D.float32, D.float64, D.float16):
        raise RuntimeError(
            "view_as_complex is only supported for half, float and double tensors, but got a "
            f"tensor of scalar type: {D.type_name(self.dtype)}")
    if self.dtype is D.float16:
        raise NotImplementedError("refimpl does not implement complex32 tensors")
    if not self._shape or self._shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    if self._stride[-1] != 1:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if any(s % 2 for s in self._stride[:-1]):
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last dimension")
    if self._offset % 2:
        raise RuntimeError("Tensor must have a storage_offset divisible by 2")
    return (self._shape[:-1], tuple(s // 2 for s in self._stride[:-1]), self._offset // 2,
            self.dtype.to_complex())


def _dtype_view_op(name: str, geometry, backward, jvp):
    def kernel(self: Tensor) -> Tensor:
        return alias_as(self, *geometry(self))

    def meta(self: Tensor) -> TensorSpec:
        shape, _, _, dtype = geometry(self)
        return TensorSpec(shape, dtype, self.device)

    return defop(name, meta=meta, cpu=kernel, cuda=kernel, saves=(), backward=backward,
                 jvp=jvp, extra={"method": False, "dtype_view": True})


view_as_real = _dtype_view_op(
    "view_as_real", _view_as_real_geometry,
    lambda ctx, g: (view_as_complex(g.contiguous()),),
    lambda ctx, tg: None if tg is None else view_as_real(tg))
view_as_complex = _dtype_view_op(
    "view_as_complex", _view_as_complex_geometry,
    lambda ctx, g: (view_as_real(g),),
    lambda ctx, tg: None if tg is None else view_as_complex(tg))


def real(input: Tensor) -> Tensor:
    """The real part as a view (the input itself for a real tensor); a conjugated input's
    real part is that of its memory (TENSOR-025)."""
    if not input.dtype.is_complex:
        return input
    if input._conj_bit:
        input = input.conj()  # the stored values: same real part
    return view_as_real(input).select(-1, 0)


def imag(input: Tensor) -> Tensor:
    """The imaginary part of a complex tensor, as a view; of a conjugated input, a
    negative view of its memory's imaginary part (TENSOR-025)."""
    if not input.dtype.is_complex:
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    if input._conj_bit:
        return view_as_real(input.conj()).select(-1, 1)._neg_view()
    return view_as_real(input).select(-1, 1)


def _complex_meta(real: Tensor, imag: Tensor) -> TensorSpec:
    from refimpl.ops._helpers import broadcast_shapes

    ok = (D.float16, D.float32, D.float64)
    if real.dtype not in ok or imag.dtype not in ok:
        raise RuntimeError(
            "Expected both inputs to be Half, Float or Double tensors but got "
            f"{D.type_name(real.dtype)} and {D.type_name(imag.dtype)}")
    if real.dtype is not imag.dtype:
        raise RuntimeError(
            f"Expected object of scalar type {D.type_name(real.dtype)} but got scalar type "
            f"{D.type_name(imag.dtype)} for second argument")
    if real.dtype is D.float16:
        raise NotImplementedError("refimpl does not implement complex32 tensors")
    return TensorSpec(broadcast_shapes(real._shape, imag._shape), real.dtype.to_complex(),
                      real.device)


def _complex_cpu(real: Tensor, imag: Tensor):
    import numpy as np

    spec = _complex_meta(real, imag)
    out = np.empty(spec.shape, dtype=spec.dtype.np)
    out.real = real._np
    out.imag = imag._np
    return out


def _complex_cuda(real: Tensor, imag: Tensor) -> Tensor:
    # the two halves written through the real view of a fresh complex tensor, on the device
    from refimpl.cuda import _tensor_ops

    spec = _complex_meta(real, imag)
    out = Tensor._empty(spec.shape, spec.dtype, real.device)
    pairs = view_as_real(out)
    _tensor_ops.copy_(pairs.select(-1, 0), real.expand(spec.shape))
    _tensor_ops.copy_(pairs.select(-1, 1), imag.expand(spec.shape))
    return out


def _complex_backward(ctx, grad):
    from refimpl.ops._helpers import sum_to

    re, im = ctx.args[0], ctx.args[1]
    return (sum_to(grad.real, re.shape) if ctx.needs_input_grad[0] else None,
            sum_to(grad.imag, im.shape) if ctx.needs_input_grad[1] else None)


def _complex_jvp(ctx, t_re, t_im=None):
    from refimpl.ops.factories import zeros_like

    out = ctx.outputs[0]
    t_re = zeros_like(ctx.args[0]) if t_re is None else t_re
    t_im = zeros_like(ctx.args[1]) if t_im is None else t_im
    return complex_op(t_re, t_im).expand(out.shape)


# torch.complex(real, imag): a fresh complex tensor from two real ones (not a view)
complex_op = defop("complex", meta=_complex_meta, cpu=_complex_cpu, cuda=_complex_cuda,
                   backward=_complex_backward,
                   jvp=_complex_jvp, saves=(),
                   extra={"method": False, "out_dtype": "Expected object of scalar type {RES} "
                          "but got scalar type {OUT} for argument 'out'"})


def complex(real: Tensor, imag: Tensor, *, out: Tensor | None = None) -> Tensor:
    """``real + 1j * imag`` (broadcast) as a new complex tensor."""
    return complex_op(real, imag) if out is None else complex_op(real, imag, out=out)


__all__ = ["complex", "imag", "real", "view_as_complex", "view_as_real"]

# fresh outputs follow their inputs' layout (TENSOR-014)
mark_pointwise("complex")
