"""The three discrete Fourier transform primitives behind ``refimpl.fft``
(spec TENSOR-FFT-001 to TENSOR-FFT-003).

Every public transform of ``refimpl.fft`` (and ``stft``/``istft``) is a composite of
these, as in torch, so the graph nodes are torch's (``FftC2CBackward0``,
``FftR2CBackward0``, ``FftC2RBackward0``):

``_fft_c2c(self, dim, normalization, forward)``
    complex to complex over the dims ``dim``; ``forward`` picks the sign of the
    exponent (forward: ``exp(-2 pi i jk/n)``).
``_fft_r2c(self, dim, normalization, onesided)``
    real to complex, always forward; ``onesided`` keeps only the ``n // 2 + 1``
    non-redundant entries of the last dim of ``dim``.
``_fft_c2r(self, dim, normalization, last_dim_size)``
    the Hermitian half-spectrum back to a real signal (always the inverse direction);
    the last dim of ``dim`` grows to ``last_dim_size``. The imaginary parts of the
    entries that must be real (zero frequency, Nyquist) are ignored.

``normalization`` is torch's ``fft_norm_mode``: 0 no scaling, 1 by ``1/sqrt(n)``, 2 by
``1/n``, with ``n`` the product of the signal sizes. All three are linear, so each
derivative is a transform again: the adjoint of a forward transform is the
unnormalized inverse one with the same scale, the adjoint of the one-sided r2c pads the
gradient with zeros and takes the real part, and the adjoint of c2r is a one-sided r2c
whose doubly-counted entries are doubled.

The CPU kernels call ``numpy.fft`` (pocketfft); the CUDA kernels call cuFFT
(``refimpl.cuda._cufft``).
"""

from __future__ import annotations

import math

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.ops._registry import TensorSpec, defop

__all__ = ["_fft_c2c", "_fft_c2r", "_fft_r2c"]

NONE, BY_ROOT_N, BY_N = 0, 1, 2

_REAL_OF = {"complex64": D.float32, "complex128": D.float64}
_COMPLEX_OF = {"float32": D.complex64, "float64": D.complex128}


def complex_of(dtype: D.dtype) -> D.dtype:
    """The complex dtype whose parts are ``dtype`` (float32 -> complex64)."""
    return _COMPLEX_OF[dtype.name]


def real_of(dtype: D.dtype) -> D.dtype:
    """The real dtype of a complex dtype's parts (complex128 -> float64)."""
    return _REAL_OF[dtype.name]


def scale_of(normalization: int, sizes) -> float:
    """The factor a transform over signal ``sizes`` is multiplied by."""
    n = math.prod(sizes)
    if normalization == BY_N:
        return 1.0 / n
    if normalization == BY_ROOT_N:
        return 1.0 / math.sqrt(n)
    return 1.0


def _check_dtype(x: Tensor, want_complex: bool, name: str) -> None:
    if x.dtype.is_complex != want_complex or x.dtype.name not in (
            "complex64", "complex128", "float32", "float64"):
        kind = "complex" if want_complex else "real floating point"
        raise RuntimeError(f"{name} expects a {kind} input tensor, but got "
                           f"{D.type_name(x.dtype)}")


def _np_norm(normalization: int, forward: bool) -> str:
    """numpy's ``norm=`` giving ``normalization`` for a transform in that direction."""
    if normalization == BY_ROOT_N:
        return "ortho"
    scaled = normalization == BY_N
    if forward:
        return "forward" if scaled else "backward"
    return "backward" if scaled else "forward"


def _wide(x: Tensor) -> np.ndarray:
    """The input in double precision: single-precision transforms are computed in double
    and rounded once, which lands within float32 rounding of torch's (MKL's) results."""
    arr = x._np
    return arr.astype(np.complex128 if arr.dtype.kind == "c" else np.float64)


def _dims(dim) -> tuple:
    return tuple(int(d) for d in dim)


def _cufft():
    from refimpl.cuda import _cufft

    return _cufft


# -- c2c ---------------------------------------------------------------------------------

def _c2c_meta(self, dim, normalization, forward) -> TensorSpec:
    _check_dtype(self, True, "_fft_c2c")
    return TensorSpec(self._shape, self.dtype, self.device)


def _c2c_cpu(self, dim, normalization, forward) -> np.ndarray:
    _check_dtype(self, True, "_fft_c2c")
    axes = _dims(dim)
    x = _wide(self)
    if not axes or x.size == 0:
        return np.array(x, dtype=self.dtype.np)
    fn = np.fft.fftn if forward else np.fft.ifftn
    return np.asarray(fn(x, axes=axes, norm=_np_norm(normalization, forward)),
                      dtype=self.dtype.np)


def _c2c_cuda(self, dim, normalization, forward) -> Tensor:
    _check_dtype(self, True, "_fft_c2c")
    return _cufft().c2c(self, _dims(dim), normalization, bool(forward))


def _c2c_backward(ctx, grad):
    _, dim, normalization, forward = ctx.args
    return (_fft_c2c(grad, dim, normalization, not forward),)


def _c2c_jvp(ctx, tangent, *_):
    _, dim, normalization, forward = ctx.args
    return _fft_c2c(tangent, dim, normalization, forward)


_fft_c2c = defop("_fft_c2c", meta=_c2c_meta, cpu=_c2c_cpu, cuda=_c2c_cuda,
                 backward=_c2c_backward, jvp=_c2c_jvp, node="FftC2CBackward0", saves=(),
                 extra={"method": False})


# -- r2c ---------------------------------------------------------------------------------

def _r2c_shape(self: Tensor, dim, onesided: bool) -> tuple:
    shape = list(self._shape)
    if onesided and dim:
        last = dim[-1]
        shape[last] = shape[last] // 2 + 1
    return tuple(shape)


def _r2c_meta(self, dim, normalization, onesided) -> TensorSpec:
    _check_dtype(self, False, "_fft_r2c")
    return TensorSpec(_r2c_shape(self, _dims(dim), onesided), complex_of(self.dtype),
                      self.device)


def _r2c_cpu(self, dim, normalization, onesided) -> np.ndarray:
    _check_dtype(self, False, "_fft_r2c")
    axes = _dims(dim)
    out_dtype = complex_of(self.dtype).np
    x = _wide(self)
    if not axes:
        return x.astype(out_dtype)
    if x.size == 0:
        return np.zeros(_r2c_shape(self, axes, onesided), dtype=out_dtype)
    norm = _np_norm(normalization, True)
    y = np.fft.rfftn(x, axes=axes, norm=norm) if onesided else np.fft.fftn(
        x, axes=axes, norm=norm)
    return np.asarray(y, dtype=out_dtype)


def _r2c_cuda(self, dim, normalization, onesided) -> Tensor:
    _check_dtype(self, False, "_fft_r2c")
    return _cufft().r2c(self, _dims(dim), normalization, bool(onesided))


def _r2c_backward(ctx, grad):
    self, dim, normalization, onesided = ctx.args
    dim = _dims(dim)
    if onesided:
        last = dim[-1]
        missing = self._shape[last] - grad._shape[last]
        if missing > 0:
            pad_shape = list(grad._shape)
            pad_shape[last] = missing
            grad = _cat_along(grad, grad.new_zeros(pad_shape), last)
    return (_fft_c2c(grad, dim, normalization, False).real,)


def _cat_along(a: Tensor, b: Tensor, dim: int) -> Tensor:
    from refimpl.ops.shape import cat

    return cat([a, b], dim)


def _r2c_jvp(ctx, tangent, *_):
    _, dim, normalization, onesided = ctx.args
    return _fft_r2c(tangent, dim, normalization, onesided)


_fft_r2c = defop("_fft_r2c", meta=_r2c_meta, cpu=_r2c_cpu, cuda=_r2c_cuda,
                 backward=_r2c_backward, jvp=_r2c_jvp, node="FftR2CBackward0", saves=(),
                 extra={"method": False})


# -- c2r ---------------------------------------------------------------------------------

def _c2r_shape(self: Tensor, dim, last_dim_size: int) -> tuple:
    shape = list(self._shape)
    shape[dim[-1]] = int(last_dim_size)
    return tuple(shape)


def _c2r_meta(self, dim, normalization, last_dim_size) -> TensorSpec:
    _check_dtype(self, True, "_fft_c2r")
    return TensorSpec(_c2r_shape(self, _dims(dim), last_dim_size), real_of(self.dtype),
                      self.device)


def _c2r_cpu(self, dim, normalization, last_dim_size) -> np.ndarray:
    _check_dtype(self, True, "_fft_c2r")
    axes = _dims(dim)
    shape = _c2r_shape(self, axes, last_dim_size)
    out_dtype = real_of(self.dtype).np
    if 0 in shape:
        return np.zeros(shape, dtype=out_dtype)
    x = _wide(self)
    # numpy reads exactly n // 2 + 1 entries of the last dim, padding or cutting as needed
    sizes = [shape[a] for a in axes]
    y = np.fft.irfftn(x, s=sizes, axes=axes, norm=_np_norm(normalization, False))
    return np.asarray(y, dtype=out_dtype)


def _c2r_cuda(self, dim, normalization, last_dim_size) -> Tensor:
    _check_dtype(self, True, "_fft_c2r")
    return _cufft().c2r(self, _dims(dim), normalization, int(last_dim_size))


def _c2r_backward(ctx, grad):
    _, dim, normalization, last_dim_size = ctx.args
    dim = _dims(dim)
    last = dim[-1]
    g = _fft_r2c(grad, dim, normalization, True)
    half = g._shape[last]
    doubled = int(last_dim_size) - half  # entries that stand for two of the full spectrum
    if doubled > 0:
        from refimpl.ops.factories import ones

        weight = ones(half, dtype=grad.dtype, device=grad.device)
        weight[1:1 + doubled] = 2
        weight = weight.reshape([half] + [1] * (g.dim() - 1 - last))
        g = g * weight
    return (g,)


def _c2r_jvp(ctx, tangent, *_):
    _, dim, normalization, last_dim_size = ctx.args
    return _fft_c2r(tangent, dim, normalization, last_dim_size)


_fft_c2r = defop("_fft_c2r", meta=_c2r_meta, cpu=_c2r_cpu, cuda=_c2r_cuda,
                 backward=_c2r_backward, jvp=_c2r_jvp, node="FftC2RBackward0", saves=(),
                 extra={"method": False})
