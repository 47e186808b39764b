"""``refimpl.signal.windows``: torch.signal.windows, the SciPy-style window functions
(spec TENSOR-FFT-005).

Each takes the window length ``M`` and keyword-only options: ``sym=True`` gives the
symmetric window (filter design), ``sym=False`` the periodic one (spectral analysis:
the symmetric window of ``M + 1`` points without its last one). Only float32 and
float64 are accepted, as in torch; errors are torch's ``ValueError``/``TypeError``
messages. Windows are computed in float64 on the requested device and cast.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.ops.windows import bessel_i0, bessel_i0_scalar, cosine_sum, finish, positions

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine",
           "general_hamming", "hamming", "hann", "kaiser", "nuttall"]


def _check(name: str, M: int, dtype: D.dtype, layout) -> None:
    if layout is not None and str(layout) != "torch.strided":
        raise ValueError(f"{name} is implemented for strided tensors only, got: {layout}")
    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    if dtype not in (D.float32, D.float64):
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {dtype}")


def _window(name: str, M: int, sym: bool, dtype, layout, device, requires_grad: bool,
            formula) -> Tensor:
    """Checks, then ``formula(n, N)`` over the ``N`` points of the symmetric window
    (``N = M + 1`` for ``sym=False``, whose last point is dropped)."""
    from refimpl.ops.factories import empty, ones

    dtype = D.get_default_dtype() if dtype is None else dtype
    _check(name, M, dtype, layout)
    if M <= 1:
        make = ones if M == 1 else empty
        return finish(make(M, dtype=dtype, device=device), dtype, requires_grad)
    full = M if sym else M + 1
    w = formula(positions(full, device), full)
    return finish(w if sym else w.narrow(0, 0, M), dtype, requires_grad)


def bartlett(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """The triangular window ``1 - |2 n / (M - 1) - 1|`` (zero at both ends)."""
    return _window("bartlett", M, sym, dtype, layout, device, requires_grad,
                   lambda n, full: 1 - (n * (2 / (full - 1)) - 1).abs())


def cosine(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,
           requires_grad: bool = False) -> Tensor:
    """The sine window ``sin(pi (n + 0.5) / M)``."""
    return _window("cosine", M, sym, dtype, layout, device, requires_grad,
                   lambda n, full: ((n + 0.5) * (math.pi / full)).sin())


def exponential(M: int, *, center: float | None = None, tau: float = 1.0, sym: bool = True,
                dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """The Poisson window ``exp(-|n - center| / tau)``; ``center`` defaults to the middle
    and may be given only with ``sym=False``."""
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")

    def formula(n: Tensor, full: int) -> Tensor:
        middle = (full - 1) / 2 if center is None else center
        return ((n - middle).abs() * (-1 / tau)).exp()

    return _window("exponential", M, sym, dtype, layout, device, requires_grad, formula)


def gaussian(M: int, *, std: float = 1.0, sym: bool = True, dtype=None, layout=None,
             device=None, requires_grad: bool = False) -> Tensor:
    """The Gaussian window ``exp(-((n - (M - 1) / 2) / std)^2 / 2)``."""
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    return _window("gaussian", M, sym, dtype, layout, device, requires_grad,
                   lambda n, full: (((n - (full - 1) / 2) / std) ** 2 * -0.5).exp())


def kaiser(M: int, *, beta: float = 12.0, sym: bool = True, dtype=None, layout=None,
           device=None, requires_grad: bool = False) -> Tensor:
    """The Kaiser window ``I0(beta sqrt(1 - ((n - a) / a)^2)) / I0(beta)``,
    ``a = (M - 1) / 2``."""
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")

    def formula(n: Tensor, full: int) -> Tensor:
        a = (full - 1) / 2
        inside = (1 - ((n - a) / a) ** 2).clamp(min=0)
        return bessel_i0(inside.sqrt() * beta, beta) / bessel_i0_scalar(beta)

    return _window("kaiser", M, sym, dtype, layout, device, requires_grad, formula)


def general_cosine(M: int, *, a: Iterable, sym: bool = True, dtype=None, layout=None,
                   device=None, requires_grad: bool = False) -> Tensor:
    """The sum of cosines ``sum_k (-1)^k a[k] cos(2 pi k n / (M - 1))``."""
    if not isinstance(a, (list, tuple)):
        raise TypeError("Coefficients must be a list/tuple")
    if not a:
        raise ValueError("Coefficients cannot be empty")
    return _window("general_cosine", M, sym, dtype, layout, device, requires_grad,
                   lambda n, full: cosine_sum(n, a, full - 1))


def general_hamming(M: int, *, alpha: float = 0.54, sym: bool = True, dtype=None,
                    layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """``alpha - (1 - alpha) cos(2 pi n / (M - 1))``."""
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)


def hamming(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,
            requires_grad: bool = False) -> Tensor:
    """The Hamming window (``general_hamming`` with ``alpha = 0.54``)."""
    return general_hamming(M, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def hann(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,
         requires_grad: bool = False) -> Tensor:
    """The Hann window (``general_hamming`` with ``alpha = 0.5``)."""
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def blackman(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """The Blackman window: cosine coefficients ``[0.42, 0.5, 0.08]``."""
    return _window("blackman", M, sym, dtype, layout, device, requires_grad,
                   lambda n, full: cosine_sum(n, (0.42, 0.5, 0.08), full - 1))


def nuttall(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,
            requires_grad: bool = False) -> Tensor:
    """The minimum 4-term Blackman-Harris window of Nuttall."""
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym,
                          dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)
