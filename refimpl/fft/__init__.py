"""``refimpl.fft``: torch.fft's discrete Fourier transforms
(spec TENSOR-FFT-001 to TENSOR-FFT-003).

Every transform is a composite of the three primitives in ``refimpl/ops/fft.py``
(``_fft_c2c``, ``_fft_r2c``, ``_fft_c2r``), arranged as torch arranges them, so results,
dtypes, graph nodes and gradients match torch's:

* A real input of ``fft``/``ifft`` is not made complex: it takes the real to complex
  transform with the full (two-sided) output (for ``ifft``, its conjugate); ``fftn``
  and ``fft2`` make it complex first.
* Integer and bool inputs compute in the default float dtype; float32 gives complex64,
  float64 complex128. Half precision is cuFFT-only in torch (its CPU raises
  ``Unsupported dtype Half``) and bfloat16 is supported nowhere.
* ``n``/``s`` cut or zero-pad the input at the end of each transformed dim; for the
  Hermitian transforms (``irfft*``, ``hfft*``) they give the size of the real output.
* ``norm`` is ``"backward"`` (default: no scaling forward, ``1/n`` inverse),
  ``"forward"`` (the reverse) or ``"ortho"`` (``1/sqrt(n)`` both ways).
* ``out=`` takes a complex tensor (a real one for ``irfft*``/``hfft*``), resized as
  torch does, and refuses autograd as torch does.
"""

from __future__ import annotations

import math

from refimpl import _dtype as D
from refimpl._autocast import composite
from refimpl._tensor import Tensor, wrap_dim
from refimpl.fft import _args as A
from refimpl.ops.fft import _fft_c2c, _fft_c2r, _fft_r2c

__all__ = ["fft", "fft2", "fftfreq", "fftn", "fftshift", "hfft", "hfft2", "hfftn", "ifft",
           "ifft2", "ifftn", "ifftshift", "ihfft", "ihfft2", "ihfftn", "irfft", "irfft2",
           "irfftn", "rfft", "rfft2", "rfftfreq", "rfftn"]


# -- shared shapes of the transforms -----------------------------------------------------

def _c2c_family(fname: str, input: Tensor, s, dim, norm, forward: bool, out,
                one_dim: bool = False) -> Tensor:
    """fft, ifft (a real input takes the two-sided r2c) and fftn, ifftn, fft2, ifft2 (a
    real input is made complex): complex output over ``dim``."""
    A.check_out(fname, out, True)
    sizes, dims = A.shape_and_dims(input, s, dim)
    x = A.promote(input, require_complex=not one_dim)
    A.check_half(x, sizes)
    x = A.resize(x, dims, sizes)
    mode = A.norm_mode(norm, forward)
    kw = {} if out is None else {"out": out}
    if x.dtype.is_complex:
        return _fft_c2c(x, dims, mode, forward, **kw)
    result = _fft_r2c(x, dims, mode, False, **kw)
    return result if forward else A.conj_into(result, out)


def _r2c_family(fname: str, input: Tensor, s, dim, norm, forward: bool, out,
                one_dim: bool) -> Tensor:
    """rfft, rfftn, rfft2 (forward) and ihfft (inverse, conjugated): one-sided output."""
    if input.dtype.is_complex:
        kind = "real" if one_dim else "real-valued"
        raise RuntimeError(f"{fname} expects a {kind} input tensor, but got "
                           f"{D.type_name(input.dtype)}")
    A.check_out(fname, out, True)
    sizes, dims = A.shape_and_dims(input, s, dim)
    if not dims:
        raise RuntimeError(f"{fname} must transform at least one axis")
    x = A.promote(input, require_complex=False)
    A.check_half(x, sizes)
    x = A.resize(x, dims, sizes)
    kw = {} if out is None else {"out": out}
    result = _fft_r2c(x, dims, A.norm_mode(norm, forward), True, **kw)
    return result if forward else A.conj_into(result, out)


def _c2r_sizes(fname: str, input: Tensor, s, dim) -> tuple[list[int], list[int], int]:
    """(input sizes, dims, size of the real output's last dim) of irfftn/hfftn."""
    sizes, dims = A.shape_and_dims(input, s, dim)
    if not dims:
        raise RuntimeError(f"{fname} must transform at least one axis")
    if s is None or list([s] if isinstance(s, int) else s)[-1] == -1:
        last = 2 * (input._shape[dims[-1]] - 1)
    else:
        last = sizes[-1]
    A.check_points(last)
    sizes[-1] = last // 2 + 1
    return sizes, dims, last


def _c2r_family(fname: str, input: Tensor, s, dim, norm, forward: bool, out) -> Tensor:
    """irfft, irfftn, irfft2 (inverse) and hfft, hfftn, hfft2 (forward): real output."""
    A.check_out(fname, out, False)
    sizes, dims, last = _c2r_sizes(fname, input, s, dim)
    x = A.promote(input, require_complex=True)
    A.check_half(x, sizes[:-1] + [last])
    x = A.resize(x, dims, sizes)
    mode = A.norm_mode(norm, forward)
    if forward:
        if len(dims) > 1:
            x = _fft_c2c(x, dims[:-1], mode, True)
        x = x.conj()
    elif len(dims) > 1:
        x = _fft_c2c(x, dims[:-1], mode, False)
    kw = {} if out is None else {"out": out}
    return _fft_c2r(x, dims[-1:], mode, last, **kw)


def _ihfftn(fname: str, input: Tensor, s, dim, norm, out) -> Tensor:
    """ihfftn, ihfft2: the one-sided inverse transform of a real signal."""
    if input.dtype.is_complex:
        if input.device.type == "cuda":  # torch's cuFFT path checks with another message
            raise RuntimeError(
                "Expected self.is_floating_point() to be true, but got false.  (Could this "
                "error message be improved?  If so, please report an enhancement request to "
                "PyTorch.)")
        raise RuntimeError("Only supports floating-point dtypes, but found: "
                           f"{D.type_name(input.dtype)}")
    A.check_out(fname, out, True)
    sizes, dims = A.shape_and_dims(input, s, dim)
    if not dims:
        raise RuntimeError(f"{fname} must transform at least one axis")
    x = A.promote(input, require_complex=False)
    A.check_half(x, sizes)
    x = A.resize(x, dims, sizes)
    mode = A.norm_mode(norm, False)
    if len(dims) == 1:
        kw = {} if out is None else {"out": out}
        return A.conj_into(_fft_r2c(x, dims, mode, True, **kw), out)
    half = _fft_r2c(x, dims[-1:], mode, True).conj()
    kw = {} if out is None else {"out": out}
    return _fft_c2c(half, dims[:-1], mode, False, **kw)


def _one(n: int | None) -> list | None:
    return None if n is None else [n]


# -- one dimension -----------------------------------------------------------------------

@composite("fft_fft")
def fft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
        out: Tensor | None = None) -> Tensor:
    """The one-dimensional discrete Fourier transform of ``input`` along ``dim``."""
    return _c2c_family("fft", input, _one(n), [dim], norm, True, out, one_dim=True)


@composite("fft_ifft")
def ifft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
         out: Tensor | None = None) -> Tensor:
    """The one-dimensional inverse discrete Fourier transform along ``dim``."""
    return _c2c_family("ifft", input, _one(n), [dim], norm, False, out, one_dim=True)


@composite("fft_rfft")
def rfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
         out: Tensor | None = None) -> Tensor:
    """The transform of a real signal: the ``n // 2 + 1`` non-negative frequencies."""
    return _r2c_family("rfft", input, _one(n), [dim], norm, True, out, one_dim=True)


@composite("fft_irfft")
def irfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
          out: Tensor | None = None) -> Tensor:
    """The inverse of ``rfft``: a real signal of ``n`` points (default
    ``2 * (input.size(dim) - 1)``) from its one-sided spectrum."""
    return _c2r_family("irfft", input, _one(n), [dim], norm, False, out)


@composite("fft_hfft")
def hfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
         out: Tensor | None = None) -> Tensor:
    """The transform of a Hermitian-symmetric signal given by its first half: a real
    spectrum of ``n`` points (default ``2 * (input.size(dim) - 1)``)."""
    return _c2r_family("hfft", input, _one(n), [dim], norm, True, out)


@composite("fft_ihfft")
def ihfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None, *,
          out: Tensor | None = None) -> Tensor:
    """The inverse of ``hfft``: the one-sided inverse transform of a real signal."""
    return _r2c_family("ihfft", input, _one(n), [dim], norm, False, out, one_dim=True)


# -- two and n dimensions ----------------------------------------------------------------

@composite("fft_fft2")
def fft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *,
         out: Tensor | None = None) -> Tensor:
    """The two-dimensional discrete Fourier transform over ``dim``."""
    return _c2c_family("fftn", input, s, dim, norm, True, out)


@composite("fft_ifft2")
def ifft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *,
          out: Tensor | None = None) -> Tensor:
    """The two-dimensional inverse discrete Fourier transform over ``dim``."""
    return _c2c_family("ifftn", input, s, dim, norm, False, out)


@composite("fft_fftn")
def fftn(input: Tensor, s=None, dim=None, norm: str | None = None, *,
         out: Tensor | None = None) -> Tensor:
    """The n-dimensional discrete Fourier transform (every dim by default)."""
    return _c2c_family("fftn", input, s, dim, norm, True, out)


@composite("fft_ifftn")
def ifftn(input: Tensor, s=None, dim=None, norm: str | None = None, *,
          out: Tensor | None = None) -> Tensor:
    """The n-dimensional inverse discrete Fourier transform."""
    return _c2c_family("ifftn", input, s, dim, norm, False, out)


@composite("fft_rfft2")
def rfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *,
          out: Tensor | None = None) -> Tensor:
    """``rfftn`` over two dims: one-sided in the last of them."""
    return _r2c_family("rfftn", input, s, dim, norm, True, out, one_dim=False)


@composite("fft_rfftn")
def rfftn(input: Tensor, s=None, dim=None, norm: str | None = None, *,
          out: Tensor | None = None) -> Tensor:
    """The n-dimensional transform of a real signal, one-sided in the last dim."""
    return _r2c_family("rfftn", input, s, dim, norm, True, out, one_dim=False)


@composite("fft_irfft2")
def irfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *,
           out: Tensor | None = None) -> Tensor:
    """The inverse of ``rfft2``."""
    return _c2r_family("irfftn", input, s, dim, norm, False, out)


@composite("fft_irfftn")
def irfftn(input: Tensor, s=None, dim=None, norm: str | None = None, *,
           out: Tensor | None = None) -> Tensor:
    """The inverse of ``rfftn``: a real signal (last dim ``s[-1]``, default
    ``2 * (input.size(dim[-1]) - 1)``)."""
    return _c2r_family("irfftn", input, s, dim, norm, False, out)


@composite("fft_hfft2")
def hfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *,
          out: Tensor | None = None) -> Tensor:
    """``hfftn`` over two dims."""
    return _c2r_family("hfftn", input, s, dim, norm, True, out)


@composite("fft_hfftn")
def hfftn(input: Tensor, s=None, dim=None, norm: str | None = None, *,
          out: Tensor | None = None) -> Tensor:
    """The n-dimensional transform of a signal Hermitian-symmetric in its last dim,
    given by its first half: a real output."""
    return _c2r_family("hfftn", input, s, dim, norm, True, out)


@composite("fft_ihfft2")
def ihfft2(input: Tensor, s=None, dim=(-2, -1), norm: str | None = None, *,
           out: Tensor | None = None) -> Tensor:
    """The inverse of ``hfft2``."""
    return _ihfftn("ihfftn", input, s, dim, norm, out)


@composite("fft_ihfftn")
def ihfftn(input: Tensor, s=None, dim=None, norm: str | None = None, *,
           out: Tensor | None = None) -> Tensor:
    """The inverse of ``hfftn``: one-sided in the last transformed dim."""
    return _ihfftn("ihfftn", input, s, dim, norm, out)


# -- helpers: frequencies and shifts -----------------------------------------------------

def _inverse(v: float) -> float:
    """``1 / v`` as C++ divides doubles (a signed infinity for zero)."""
    return 1.0 / v if v else math.copysign(math.inf, v)


def _freqs(n: int, scale: float, count: int, wrap_from: int | None, out, dtype, device,
           requires_grad: bool) -> Tensor:
    from refimpl.ops.factories import arange

    dtype = D.get_default_dtype() if dtype is None else dtype
    if not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError("fftfreq requires a floating point or complex dtype")
    result = arange(count, dtype=dtype, device=device)
    if wrap_from is not None and wrap_from < count:
        result[wrap_from:] -= n
    result = result * scale
    if out is not None:
        out.resize_(result._shape).copy_(result)
        return out
    return result.requires_grad_(requires_grad) if requires_grad else result


def fftfreq(n: int, d: float = 1.0, *, out: Tensor | None = None, dtype=None, layout=None,
            device=None, requires_grad: bool = False) -> Tensor:
    """The sample frequencies of an ``n``-point transform with sample spacing ``d``:
    ``[0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (d * n)``."""
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    return _freqs(n, _inverse(n * d), n, (n + 1) // 2, out, dtype, device, requires_grad)


def rfftfreq(n: int, d: float = 1.0, *, out: Tensor | None = None, dtype=None, layout=None,
             device=None, requires_grad: bool = False) -> Tensor:
    """The non-negative sample frequencies of ``rfft``: ``[0, ..., n // 2] / (d * n)``."""
    half = -(-n // 2) if n < 0 else n // 2  # C++ division, as torch computes it
    return _freqs(n, _inverse(n * d), half + 1, None, out, dtype, device, requires_grad)


def _shift(input: Tensor, dim, inverse: bool) -> Tensor:
    if dim is None:
        dims = list(range(input.dim()))
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
    shifts = []
    for d in dims:
        size = input._shape[wrap_dim(d, input.dim())] if input.dim() else 1
        shifts.append(-(size // 2) if inverse else size // 2)
    if not dims:
        return input.clone()
    return input.roll(shifts, dims)


def fftshift(input: Tensor, dim=None) -> Tensor:
    """Move the zero frequency of ``fftn``'s output to the centre of ``dim`` (every dim
    by default): a roll by ``size // 2``."""
    return _shift(input, dim, False)


def ifftshift(input: Tensor, dim=None) -> Tensor:
    """The inverse of ``fftshift``: a roll by ``-(size // 2)``."""
    return _shift(input, dim, True)
