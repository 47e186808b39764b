"""Statistics torch composes from other ops: cov, corrcoef, quantile, nanquantile,
bincount, and the CPU-only histograms (spec: TENSOR-2xx reductions).

cov, corrcoef, quantile and bincount are written over refimpl's own ops (sort, gather,
lerp, matmul, index_add), so autograd and the CUDA device come from those. torch has
``histogram``/``histogramdd`` on the CPU only; refimpl's follow it (numpy kernels, and
torch's NotImplementedError for a CUDA tensor).
"""

from __future__ import annotations

import warnings

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor, wrap_dim
from refimpl.ops.reduction import structseq
from refimpl.ops.shape_extra import with_out

# -- cov / corrcoef ------------------------------------------------------------------------------


def _check_weights(name: str, w, input: Tensor, n: int, integral: bool) -> None:
    if w is None:
        return
    if w.dim() > 1:
        raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got "
                           f"{name} with {w.dim()} dimensions")
    if integral and (w.dtype.is_floating_point or w.dtype.is_complex):
        raise RuntimeError(f"cov(): expected {name} to have integral dtype but got {name} "
                           f"with {w.dtype} dtype")
    if not integral and not w.dtype.is_floating_point:
        raise RuntimeError(f"cov(): expected {name} to have floating point dtype but got "
                           f"{name} with {w.dtype} dtype")
    if w.numel() != n:
        raise RuntimeError(f"cov(): expected {name} to have the same numel as there are "
                           f"observations in the input but got {w.numel()} != {n}")
    if bool((w < 0).any()):
        raise RuntimeError(f"cov(): {name} cannot be negative")


def cov(input: Tensor, *, correction: int = 1, fweights=None, aweights=None) -> Tensor:
    """The covariance matrix of the variables in ``input``'s rows (a 1-D input is one
    variable), with frequency and/or importance weights of the observations."""
    if input.dim() > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an "
                           f"input with {input.dim()} dimensions")
    x = input.reshape(1, -1) if input.dim() < 2 else input
    n = x.shape[1]
    _check_weights("fweights", fweights, input, n, True)
    _check_weights("aweights", aweights, input, n, False)
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        x = x.to(D.get_default_dtype())
    w = fweights
    if aweights is not None:
        w = aweights if w is None else w * aweights
    if w is None:
        avg = x.mean(1)
        w_sum = n
        norm = n - correction
    else:
        w_sum = w.sum()
        avg = (x * w).sum(1) / w_sum
        if correction == 0:
            norm = w_sum
        elif aweights is None:
            norm = w_sum - correction
        else:
            norm = w_sum - correction * (w * aweights).sum() / w_sum
    if bool(norm <= 0) if isinstance(norm, Tensor) else norm <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less "
                      "than the number of observations.", UserWarning, stacklevel=2)
        norm = norm.clamp(min=0) if isinstance(norm, Tensor) else 0
    xm = x - avg.unsqueeze(1)
    weighted = xm if w is None else xm * w
    c = xm.matmul(weighted.t().conj())
    return (c / norm).squeeze()


def corrcoef(input: Tensor) -> Tensor:
    """The Pearson correlation coefficients of the variables in ``input``'s rows."""
    c = cov(input)
    if c.dim() == 0:
        return c / c
    std = c.diagonal().sqrt()
    c = c / std.unsqueeze(1) / std.unsqueeze(0)
    if c.dtype.is_complex:
        return c
    return c.clamp(-1, 1)


# -- quantile ------------------------------------------------------------------------------------

_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(name: str, input: Tensor, q, dim, keepdim: bool, interpolation: str,
              ignore_nan: bool) -> Tensor:
    from refimpl.ops.factories import tensor

    if input.dtype not in (D.float32, D.float64):
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    if isinstance(q, Tensor):
        if q.dim() > 1:
            raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
        if q.dtype is not input.dtype:
            raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor")
        if q.device != input.device:
            raise RuntimeError(f"{name}() q tensor must be on the same device as the input "
                               "tensor")
        qt = q
    else:
        if not 0 <= q <= 1:
            raise RuntimeError(f"{name}() q must be in the range [0, 1] but got {q}")
        qt = tensor(float(q), dtype=input.dtype, device=input.device)
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{name}() interpolation must be one of linear, lower, higher, "
                           f"midpoint or nearest, but got {interpolation}")
    if isinstance(q, Tensor) and q.numel() and not bool(((q >= 0) & (q <= 1)).all()):
        raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
    if input.numel() == 0:
        raise RuntimeError(f"{name}() input tensor must be non-empty")
    if dim is None:
        x = input.reshape(-1)
        d = 0
    else:
        d = wrap_dim(dim, max(input.dim(), 1))
        x = input.reshape(1) if input.dim() == 0 else input
    rows = x.movedim(d, -1)
    size = rows.shape[-1]
    values = rows.sort(-1).values  # NaNs sort last
    nan = rows.isnan()
    if ignore_nan:
        count = size - nan.sum(-1, keepdim=True)
        last = (count - 1).clamp(min=0).to(input.dtype)
    else:
        last = nan.sum(-1, keepdim=True).to(input.dtype) * 0 + (size - 1)
    # ranks [..., 1, Q]: where each quantile falls among the sorted values
    ranks = last.unsqueeze(-1) * qt.reshape(-1)
    if not ignore_nan:  # a slice holding a NaN picks its last (NaN) value
        ranks = ranks.where(~nan.any(-1, keepdim=True).unsqueeze(-1), ranks * 0 + (size - 1))
    if interpolation == "lower":
        ranks = ranks.floor()
    elif interpolation == "higher":
        ranks = ranks.ceil()
    elif interpolation == "nearest":
        ranks = ranks.round()
    below = ranks.floor().to(D.int64).squeeze(-2)
    above = ranks.ceil().to(D.int64).squeeze(-2)
    lo = values.gather(-1, below)
    hi = values.gather(-1, above)
    if interpolation == "midpoint":
        weight = (above != below).to(input.dtype) * 0.5
    else:
        weight = ranks.squeeze(-2) - below.to(input.dtype)
    out = lo.lerp(hi, weight)
    if ignore_nan:
        out = out.where(count.expand_as(out) > 0, float("nan"))
    out = out.movedim(-1, 0)  # [Q, ...rest]
    if keepdim:
        if dim is None:
            out = out.reshape((out.shape[0],) + (1,) * input.dim())
        elif input.dim() > 0:
            out = out.unsqueeze(d + 1)
    if not (isinstance(q, Tensor) and q.dim() == 1):
        out = out.squeeze(0)
    return out


def quantile(input: Tensor, q, dim=None, keepdim: bool = False, *,
             interpolation: str = "linear", out=None) -> Tensor:
    """The ``q``-th quantiles of ``input`` (all elements, or along ``dim``); a 1-D ``q``
    adds a leading dim. A NaN in a reduced slice gives NaN."""
    if out is not None:
        return with_out(None, out, (input, q), lambda: quantile(
            input, q, dim, keepdim, interpolation=interpolation))
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


def nanquantile(input: Tensor, q, dim=None, keepdim: bool = False, *,
                interpolation: str = "linear", out=None) -> Tensor:
    """``quantile`` that ignores NaNs (a slice of NaNs only gives NaN)."""
    if out is not None:
        return with_out(None, out, (input, q), lambda: nanquantile(
            input, q, dim, keepdim, interpolation=interpolation))
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


# -- bincount ------------------------------------------------------------------------------------

def bincount(input: Tensor, weights=None, minlength: int = 0) -> Tensor:
    """How often each value ``0..max(input)`` occurs in the 1-D non-negative integer
    ``input`` (at least ``minlength`` bins), or the sums of ``weights`` per value."""
    from refimpl.ops.factories import ones, zeros

    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if input.dim() == 1 and input.numel() == 0:
        dtype = D.int64 if weights is None else (
            D.float32 if weights.dtype is D.float32 else D.float64)
        return zeros(minlength, dtype=dtype, device=input.device)
    if input.dtype.is_floating_point or input.dtype.is_complex or input.dtype is D.bool_:
        raise NotImplementedError(f"\"bincount_{input.device.type}\" not implemented for "
                                  f"'{D.type_name(input.dtype)}'")
    if input.dim() != 1 or bool((input < 0).any()):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None and (weights.dim() != 1 or weights.shape[0] != input.shape[0]):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    bins = max(int(input.max().item()) + 1, minlength)
    index = input.to(D.int64)
    if weights is None:
        src = ones(input.shape[0], dtype=D.int64, device=input.device)
    else:
        src = weights.to(D.float32 if weights.dtype is D.float32 else D.float64)
    return zeros(bins, dtype=src.dtype, device=input.device).index_add(0, index, src)


# -- histogram / histogramdd (CPU only, as in torch) ---------------------------------------------

histogram_type = structseq("histogram", ("hist", "bin_edges"))
histogram_out_type = structseq("histogram_out", ("hist", "bin_edges"))
histogramdd_type = structseq("histogramdd", ("hist", "bin_edges"))


def _cpu_only(name: str, input: Tensor) -> None:
    if input.device.type != "cpu":
        raise NotImplementedError(
            f"Could not run 'aten::{name}' with arguments from the "
            f"'{input.device.type.upper()}' backend.")


def _edges(name: str, column: np.ndarray, bins, rng, dtype: D.dtype) -> np.ndarray:
    """The bin edges of one dim: ``bins + 1`` equal steps over ``rng`` (the data's range
    by default), or the given edges."""
    if isinstance(bins, Tensor):
        return bins._np.astype(dtype.np)
    if rng is not None:
        lo, hi = float(rng[0]), float(rng[1])
    elif column.size:
        lo, hi = float(column.min()), float(column.max())
    else:
        lo, hi = 0.0, 0.0
    if lo > hi:
        raise ValueError(f"{name}(): max must be larger than min")
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ValueError(f"{name}(): range of [{lo}, {hi}] is not finite")
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return np.linspace(lo, hi, int(bins) + 1).astype(dtype.np)


def _bin_of(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """The bin of each value (-1 outside the edges; the last bin is closed)."""
    pos = np.searchsorted(edges, values, side="right") - 1
    pos = np.where(values == edges[-1], len(edges) - 2, pos)
    inside = (values >= edges[0]) & (values <= edges[-1])
    return np.where(inside, pos, -1)


def _histogramdd_np(name: str, points: np.ndarray, bins: list, rng, weight, density: bool,
                    dtype: D.dtype) -> tuple:
    k = points.shape[1]
    ranges = [None] * k if rng is None else [rng[2 * i:2 * i + 2] for i in range(k)]
    edges = [_edges(name, points[:, i], bins[i], ranges[i], dtype) for i in range(k)]
    shape = tuple(len(e) - 1 for e in edges)
    hist = np.zeros(shape, dtype=np.float64)
    idx = [_bin_of(points[:, i], edges[i]) for i in range(k)]
    keep = np.all([i >= 0 for i in idx], axis=0) if k else np.zeros(0, bool)
    w = np.ones(points.shape[0]) if weight is None else weight._np.reshape(-1).astype(
        np.float64)
    if keep.size:
        np.add.at(hist, tuple(i[keep] for i in idx), w[keep])
    if density:
        total = hist.sum()
        for i, e in enumerate(edges):
            widths = np.diff(e.astype(np.float64))
            hist = hist / widths.reshape(tuple(-1 if j == i else 1 for j in range(k)))
        hist = hist / total
    return hist.astype(dtype.np), edges


def histogram(input: Tensor, bins, *, range=None, weight=None, density: bool = False,
              out=None) -> tuple:
    """Counts of ``input``'s elements in ``bins`` (a count of equal bins over ``range``,
    or a 1-D tensor of edges), optionally weighted or normalised to a density."""
    if out is not None:
        with_out(None, tuple(out), (input, weight), lambda: histogram(
            input, bins, range=range, weight=weight, density=density))
        return histogram_out_type(*out)
    _cpu_only("histogram.bin_ct" if not isinstance(bins, Tensor) else "histogram.bins_tensor",
              input)
    if not input.dtype.is_floating_point:
        raise RuntimeError(f'"histogram_cpu" not implemented for \'{D.type_name(input.dtype)}\'')
    if isinstance(bins, Tensor):
        if bins.dim() != 1:
            raise RuntimeError(f"histogram(): bins tensor should have one dimension, but got "
                               f"{bins.dim()} dimensions in the bins tensor")
    elif bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    if weight is not None and tuple(weight.shape) != tuple(input.shape):
        raise RuntimeError("histogram(): if weight tensor is provided it should have the same "
                           "shape as the input tensor")
    hist, edges = _histogramdd_np("histogram", input._np.reshape(-1, 1), [bins], range,
                                  weight, density, input.dtype)
    res = (Tensor._from_array(hist, input.dtype), Tensor._from_array(edges[0], input.dtype))
    return histogram_type(*res)


def histogramdd(input: Tensor, bins, *, range=None, weight=None, density: bool = False) -> tuple:
    """The ``D``-dimensional histogram of the points in ``input``'s last dim."""
    _cpu_only("_histogramdd_bin_edges", input)
    if input.dim() < 2 and input.dim() != 1:
        raise RuntimeError("torch.histogramdd: input tensor should have at least 2 dimensions")
    k = input.shape[-1]
    if isinstance(bins, int):
        bins = [bins] * k
    bins = list(bins)
    if len(bins) != k:
        raise RuntimeError("histogramdd: The size of bins must be equal to the innermost "
                           "dimension of the input.")
    points = input._np.reshape(-1, k)
    hist, edges = _histogramdd_np("histogramdd", points, bins, range, weight, density,
                                  input.dtype)
    return histogramdd_type(Tensor._from_array(hist, input.dtype),
                            [Tensor._from_array(e, input.dtype) for e in edges])


__all__ = [
    "bincount",
    "corrcoef",
    "cov",
    "histogram",
    "histogramdd",
    "nanquantile",
    "quantile",
]
TENSOR_METHODS = ("bincount", "corrcoef", "cov", "histogram", "nanquantile", "quantile")
