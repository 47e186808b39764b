"""Window factories (spec TENSOR-FFT-005): ``hann_window``, ``hamming_window``,
``blackman_window``, ``bartlett_window`` and ``kaiser_window``, with torch's signatures
and errors, plus the sums of cosines and the Bessel function ``I0`` that
``refimpl.signal.windows`` shares.

A window is computed in float64 from ``arange`` on the requested device and cast to
the requested dtype, so it runs wherever the elementwise ops run (CPU and CUDA). A
*periodic* window of length ``N`` is the symmetric window of length ``N + 1`` without
its last point (the form spectral analysis wants); lengths 0 and 1 give an empty
tensor and ``[1.]``.
"""

from __future__ import annotations

import math

from refimpl import _dtype as D
from refimpl._tensor import Tensor

__all__ = ["bartlett_window", "blackman_window", "hamming_window", "hann_window",
           "kaiser_window"]

_CPP_NAMES = {"bool": "bool", "uint8": "unsigned char", "int8": "signed char",
              "int16": "short int", "int32": "int", "int64": "long int",
              "complex64": "c10::complex<float>", "complex128": "c10::complex<double>"}


def positions(count: int, device) -> Tensor:
    """``[0, 1, ..., count - 1]`` in float64 on ``device``."""
    from refimpl.ops.factories import arange

    return arange(count, dtype=D.float64, device=device)


def cosine_sum(n: Tensor, coefficients, denominator: float) -> Tensor:
    """``sum_k (-1)^k a_k cos(2 pi k n / denominator)`` (the general cosine window)."""
    total = None
    for k, a in enumerate(coefficients):
        term = (n * (2 * math.pi * k / denominator)).cos() * (a if k % 2 == 0 else -a)
        total = term if total is None else total + term
    return total


def _series_terms(largest: float):
    """The terms ``((x / 2)^2)^k / (k!)^2`` of ``I0(largest)``, k = 1, 2, ... until
    they no longer change the sum in float64."""
    q = (largest * 0.5) ** 2
    term, total, k = 1.0, 1.0, 0
    while term > 1e-17 * total or k * k < q:
        k += 1
        term *= q / (k * k)
        total += term
        yield k


def bessel_i0(x: Tensor, largest: float) -> Tensor:
    """The modified Bessel function ``I0`` of ``0 <= x <= largest`` by its power series
    ``sum_k ((x / 2)^2)^k / (k!)^2`` (as many terms as ``I0(largest)`` needs)."""
    q = (x * 0.5) ** 2
    total = term = x * 0 + 1
    for k in _series_terms(largest):
        term = term * q / (k * k)
        total = total + term
    return total


def bessel_i0_scalar(x: float) -> float:
    """``I0(x)`` of a Python float, by the same series."""
    q = (x * 0.5) ** 2
    total = term = 1.0
    for k in _series_terms(abs(x)):
        term *= q / (k * k)
        total += term
    return total


def finish(w: Tensor, dtype: D.dtype, requires_grad: bool) -> Tensor:
    """The window in ``dtype``, a leaf that requires grad when asked."""
    w = w.to(dtype)
    return w.requires_grad_(True) if requires_grad else w


def _options(dtype: D.dtype, device, requires_grad: bool) -> str:
    from refimpl._device import resolve

    dev = resolve(device) if device is not None else None
    where = "cpu" if dev is None or dev.type == "cpu" else f"{dev.type}:{dev.index or 0}"
    grad = "true" if requires_grad else "false (default)"
    return (f"TensorOptions(dtype={_CPP_NAMES.get(dtype.name, dtype.name)}, device={where}, "
            f"layout=Strided (default), requires_grad={grad}, pinned_memory=false, "
            "memory_format=(nullopt))")


def _window(name: str, length: int, periodic: bool, dtype, device, requires_grad: bool,
            formula) -> Tensor:
    """Check the arguments, then ``formula(n, N)`` on positions ``n`` of a symmetric
    window of ``N`` points (``N = length + 1`` when periodic, last point dropped)."""
    from refimpl.ops.factories import empty, ones

    dtype = D.get_default_dtype() if dtype is None else dtype
    if length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got "
                           f"window_length={length}")
    if not dtype.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: "
                           f"{_options(dtype, device, requires_grad)}")
    if length <= 1:
        make = ones if length == 1 else empty
        return finish(make(length, dtype=dtype, device=device), dtype, requires_grad)
    full = length + 1 if periodic else length
    w = formula(positions(full, device), full)
    if periodic:
        w = w.narrow(0, 0, length)
    return finish(w, dtype, requires_grad)


def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54,
                   beta: float = 0.46, *, dtype=None, layout=None, device=None,
                   pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """``alpha - beta * cos(2 pi n / (N - 1))``."""
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, full: (n * (2 * math.pi / (full - 1))).cos() * -beta + alpha)


def hann_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None,
                device=None, pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """``0.5 - 0.5 * cos(2 pi n / (N - 1))``."""
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, full: cosine_sum(n, (0.5, 0.5), full - 1))


def blackman_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None,
                    device=None, pin_memory: bool = False,
                    requires_grad: bool = False) -> Tensor:
    """``0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))``."""
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, full: cosine_sum(n, (0.42, 0.5, 0.08), full - 1))


def bartlett_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None,
                    device=None, pin_memory: bool = False,
                    requires_grad: bool = False) -> Tensor:
    """The triangle ``1 - |2 n / (N - 1) - 1|``."""
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, full: 1 - (n * (2 / (full - 1)) - 1).abs())


def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *,
                  dtype=None, layout=None, device=None, pin_memory: bool = False,
                  requires_grad: bool = False) -> Tensor:
    """``I0(beta * sqrt(1 - ((n - a) / a)^2)) / I0(beta)`` with ``a = (N - 1) / 2``."""
    def formula(n: Tensor, full: int) -> Tensor:
        a = (full - 1) / 2
        inside = (1 - ((n - a) / a) ** 2).clamp(min=0)
        return bessel_i0(inside.sqrt() * beta, abs(beta)) / bessel_i0_scalar(beta)

    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad,
                   formula)
