"""Differences, numerical integration, scans and distances that torch composes from
other ops (spec: TENSOR-2xx reductions): diff, gradient, trapezoid/trapz,
cumulative_trapezoid, logcumsumexp, cdist.

Each is written over refimpl's own ops, as torch writes them over its own, so autograd,
fake tensors and the CUDA device come from the ops they call. The statistics (cov,
corrcoef, quantile, bincount, histogram) are in ``reduction_extra_stats.py``.
"""

from __future__ import annotations

import numbers

from refimpl import _dtype as D
from refimpl._autocast import composite
from refimpl._tensor import Tensor, wrap_dim
from refimpl.ops.shape_extra import with_out

# -- diff ----------------------------------------------------------------------------------------

def _diff_check(name: str, input: Tensor, other: Tensor) -> None:
    if other.dim() != input.dim():
        raise RuntimeError(f"diff expects {name} to be the same dimension as input")


def diff(input: Tensor, n: int = 1, dim: int = -1, prepend=None, append=None, *,
         out=None) -> Tensor:
    """The ``n``-th forward difference along ``dim`` (``prepend``/``append`` are joined to
    the input first); bools differ by exclusive or."""
    if out is not None:
        return with_out("sub", out, (input, prepend, append),
                        lambda: diff(input, n, dim, prepend, append))
    from refimpl.ops.shape import cat

    if input.dim() == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = wrap_dim(dim, input.dim())
    parts = []
    for name, extra in (("prepend", prepend), (None, input), ("append", append)):
        if extra is None:
            continue
        if name is not None:
            _diff_check(f"{name} or append" if name == "prepend" else "prepend or append",
                        input, extra)
        parts.append(extra)
    x = cat(parts, d) if len(parts) > 1 else input
    for _ in range(n):
        size = x.shape[d]
        if size == 0:
            break
        hi, lo = x.narrow(d, 1, size - 1), x.narrow(d, 0, size - 1)
        x = hi.logical_xor(lo) if x.dtype is D.bool_ else hi - lo
    return x


# -- gradient ------------------------------------------------------------------------------------

def _gradient_dims(input: Tensor, dim) -> list:
    if dim is None:
        return list(range(input.dim()))
    dims = [dim] if isinstance(dim, int) else list(dim)
    wrapped = []
    for d in dims:
        w = wrap_dim(d, input.dim())
        if w in wrapped:
            raise RuntimeError(f"dim {w} appears multiple times in the list of dims")
        wrapped.append(w)
    return wrapped


def _gradient_spacing(input: Tensor, spacing, dims: list, dim_given: bool) -> list:
    """One spacing per dim: a number (uniform) or a 1-D coordinate tensor."""
    if spacing is None:
        return [1.0] * len(dims)
    if isinstance(spacing, (numbers.Number, Tensor)) and not (
            isinstance(spacing, Tensor) and spacing.dim() == 1):
        value = spacing.item() if isinstance(spacing, Tensor) else spacing
        return [value] * len(dims)
    spacing = list(spacing)
    if len(spacing) != len(dims):
        raise RuntimeError(
            "torch.gradient expected spacing to be unspecified, a scalar, or a list of length "
            f"equal to 'self.dim() = {input.dim()}', since dim argument was not given, but got "
            f"a list of length {len(spacing)}" if not dim_given else
            "torch.gradient expected spacing to be unspecified, a scalar or it's spacing and "
            f"dim arguments to have the same length, but got a spacing argument of length "
            f"{len(spacing)} and a dim argument of length {len(dims)}.")
    for s in spacing:
        if isinstance(s, Tensor) and s.device != input.device:
            raise RuntimeError(
                "torch.gradient expected each tensor to be on the same device, but got devices "
                f"{input.device} and {s.device}!")
    for s in spacing:
        if isinstance(s, Tensor) and s.dim() != 1:
            raise RuntimeError("torch.gradient expected each element of spacing to have one "
                               f"dimension, but got an element with {s.dim()} dimensions!")
    return spacing


def _axis(coord: Tensor, n: int, d: int) -> Tensor:
    """A 1-D tensor shaped to broadcast along dim ``d`` of an ``n``-dim tensor."""
    return coord.reshape(tuple(-1 if i == d else 1 for i in range(n)))


def _uniform_gradient(f: Tensor, d: int, h: float, edge_order: int) -> Tensor:
    from refimpl.ops.shape import cat

    size = f.shape[d]

    def at(start, length=1):
        return f.narrow(d, start, length)

    interior = (at(2, size - 2) - at(0, size - 2)) / (2 * h)
    if edge_order == 1:
        first = (at(1) - at(0)) / h
        last = (at(size - 1) - at(size - 2)) / h
    else:
        first = (at(0) * -1.5 + at(1) * 2 - at(2) * 0.5) / h
        last = (at(size - 3) * 0.5 - at(size - 2) * 2 + at(size - 1) * 1.5) / h
    return cat([first, interior, last], d)


def _coordinate_gradient(f: Tensor, d: int, x: Tensor, edge_order: int) -> Tensor:
    from refimpl.ops.shape import cat

    size, n = f.shape[d], f.dim()
    dx = _axis(diff(x), n, d)

    def at(t, start, length=1):
        return t.narrow(d, start, length)

    a, b = at(dx, 0, size - 2), at(dx, 1, size - 2)
    interior = (-b / (a * (a + b))) * at(f, 0, size - 2) + ((b - a) / (a * b)) * \
        at(f, 1, size - 2) + (a / (b * (a + b))) * at(f, 2, size - 2)
    if edge_order == 1:
        first = (at(f, 1) - at(f, 0)) / at(dx, 0)
        last = (at(f, size - 1) - at(f, size - 2)) / at(dx, size - 2)
    else:
        a, b = at(dx, 0), at(dx, 1)
        first = (-(2 * a + b) / (a * (a + b))) * at(f, 0) + ((a + b) / (a * b)) * at(f, 1) \
            + (-a / (b * (a + b))) * at(f, 2)
        a, b = at(dx, size - 3), at(dx, size - 2)
        last = (b / (a * (a + b))) * at(f, size - 3) - ((a + b) / (a * b)) * at(f, size - 2) \
            + ((2 * b + a) / (b * (a + b))) * at(f, size - 1)
    return cat([first, interior, last], d)


def gradient(input: Tensor, *, spacing=None, dim=None, edge_order: int = 1) -> tuple:
    """Estimates of the derivative of ``input`` along each of ``dim`` (all dims by
    default) by central differences inside and one-sided differences of order
    ``edge_order`` at the ends; ``spacing`` is a step (per dim) or sample coordinates."""
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    dims = _gradient_dims(input, dim)
    steps = _gradient_spacing(input, spacing, dims, dim is not None)
    for d in dims:
        if input.shape[d] < edge_order + 1:
            raise RuntimeError(
                "torch.gradient expected each dimension size to be at least edge_order+1")
    f = input if input.dtype.is_floating_point or input.dtype.is_complex else \
        input.to(D.get_default_dtype())
    out = []
    for d, h in zip(dims, steps):
        if isinstance(h, Tensor):
            out.append(_coordinate_gradient(f, d, h, edge_order))
        else:
            out.append(_uniform_gradient(f, d, h, edge_order))
    return tuple(out)


# -- trapezoid -----------------------------------------------------------------------------------

def _float(y: Tensor) -> Tensor:
    return y if y.dtype.is_floating_point or y.dtype.is_complex else \
        y.to(D.get_default_dtype())


def _trapezoid_x(name: str, y: Tensor, x: Tensor, d: int) -> Tensor:
    """The widths ``x[i+1] - x[i]`` shaped to broadcast against ``y``'s pieces."""
    if x.dim() == 1:
        if x.shape[0] != y.shape[d]:
            raise RuntimeError(f"{name}: There must be one `x` value for each sample point")
        return _axis(diff(x), y.dim(), d)
    return diff(x, dim=d - y.dim() if x.dim() >= y.dim() else -1)


def trapezoid(y: Tensor, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """The trapezoidal rule along ``dim``: sample coordinates ``x`` or a spacing ``dx``."""
    if x is not None and dx is not None:
        raise RuntimeError("trapezoid: cannot pass both x and dx")
    d = wrap_dim(dim, y.dim())
    size = y.shape[d]
    if size == 0:
        return _float(y).sum(d) * 0
    pair = y.narrow(d, 1, size - 1) + y.narrow(d, 0, size - 1)
    if isinstance(x, Tensor):
        return (_trapezoid_x("trapezoid", y, x, d) * pair).sum(d) / 2
    step = 1.0 if dx is None else dx
    if x is not None:
        step = x
    return _float(pair).sum(d) * (step / 2)


def trapz(y: Tensor, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """``trapezoid`` under its older name (``trapz(y, x, dim=)`` or
    ``trapz(y, dx=, dim=)``)."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y: Tensor, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """The running trapezoidal integral along ``dim`` (one element shorter)."""
    if x is not None and dx is not None:
        raise RuntimeError("cumulative_trapezoid: cannot pass both x and dx")
    d = wrap_dim(dim, y.dim())
    size = y.shape[d]
    if size == 0:
        return _float(y).narrow(d, 0, 0)
    pair = y.narrow(d, 1, size - 1) + y.narrow(d, 0, size - 1)
    if isinstance(x, Tensor):
        return (_trapezoid_x("cumulative_trapezoid", y, x, d) * pair / 2).cumsum(d)
    step = 1.0 if dx is None else dx
    if x is not None:
        step = x
    return (_float(pair) * (step / 2)).cumsum(d)


# -- logcumsumexp --------------------------------------------------------------------------------

def logcumsumexp(input: Tensor, dim: int, *, out=None) -> Tensor:
    """``log(cumsum(exp(input)))`` along ``dim``, computed without overflow: a scan of
    ``logaddexp`` over doubling strides (each element combines with the partial result
    ``2^k`` places before it, where there is one)."""
    from refimpl.ops.shape import cat

    if out is not None:
        return with_out("logcumsumexp", out, (input,), lambda: logcumsumexp(input, dim))
    d = wrap_dim(dim, max(input.dim(), 1))
    if input.dim() == 0:
        return input.clone()
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise NotImplementedError(f"\"logcumsumexp_out_{input.device.type}\" not implemented "
                                  f"for '{D.type_name(input.dtype)}'")
    x, size, shift = input, input.shape[d], 1
    if x.dtype.is_complex:
        # complex logs are defined up to 2*pi*i: accumulate left to right, as torch does, so
        # that the imaginary parts come out on torch's branch
        parts = [x.narrow(d, 0, 1)] if size else []
        for i in range(1, size):
            parts.append(parts[-1].logaddexp(x.narrow(d, i, 1)))
        return cat(parts, d) if parts else x.clone()
    while shift < size:
        # the first ``shift`` elements are final; the rest add the partial sums before them
        tail = x.narrow(d, shift, size - shift).logaddexp(x.narrow(d, 0, size - shift))
        x = cat([x.narrow(d, 0, shift), tail], d)
        shift *= 2
    return x


# -- cdist ---------------------------------------------------------------------------------------

@composite("cdist")
def cdist(x1: Tensor, x2: Tensor, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """The ``p``-norm distance between each row of ``x1`` and each row of ``x2``
    (batched over leading dims): ``[..., P, R]`` for ``[..., P, M]`` and ``[..., R, M]``."""
    from refimpl.ops.reduction_stats import linalg_vector_norm

    if x1.dim() < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.dim()}D")
    if x2.dim() < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X2 got: {x2.dim()}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError("X1 and X2 must have the same number of columns. X1: "
                           f"{x1.shape[-1]} X2: {x2.shape[-1]}")
    if not (x1.dtype.is_floating_point and x2.dtype.is_floating_point):
        raise RuntimeError(f"cdist only supports floating-point dtypes, X1 got: {x1.dtype}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    if compute_mode not in ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                            "donot_use_mm_for_euclid_dist"):
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    diffs = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    if diffs.numel() == 0:
        return diffs.sum(-1)
    return linalg_vector_norm(diffs, p, -1)


__all__ = [
    "cdist",
    "cumulative_trapezoid",
    "diff",
    "gradient",
    "logcumsumexp",
    "trapezoid",
    "trapz",
]
TENSOR_METHODS = ("diff", "logcumsumexp")
