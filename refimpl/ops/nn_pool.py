"""Poolings of ``torch.nn.functional``: ``max_pool{1,2,3}d`` (with ``return_indices``,
dilation, ceil_mode), ``avg_pool{1,2,3}d`` (count_include_pad, divisor_override,
ceil_mode), ``adaptive_avg_pool{1,2,3}d`` and ``adaptive_max_pool{1,2,3}d``
(spec: NNF-040..NNF-044).

Max poolings gather every window's elements through one host-computed index table
(from shapes alone) with ``index_select`` over the flattened spatial dims, then reduce
with ``max(dim)``; the returned indices are the argmax mapped through a second table
into the unpadded input, as torch's. Average poolings sum the sliding-window view and
divide by the window sizes torch uses. Adaptive average pooling multiplies by one
averaging matrix per spatial dim. All are compositions of refimpl ops, so they run on
every device with first and second order gradients and forward-mode tangents.
"""

from __future__ import annotations

import math

import numpy as np

from refimpl import _dtype as D
from refimpl._autocast import composite
from refimpl._tensor import Tensor
from refimpl.ops._helpers import int_key
from refimpl.ops.nn_pool_kernel import max_pool2d_fused, use_fused
from refimpl.ops.nn_shape import _index, pad, windows


def _tuple(name: str, value, n: int, fn: str) -> list:
    if isinstance(value, (tuple, list)):
        if len(value) == 1:
            return [int(value[0])] * n
        if len(value) != n:
            word = {1: "one int", 2: "two ints", 3: "three ints"}[n]
            raise RuntimeError(f"{fn}: {name} must either be a single int, or a tuple of "
                               f"{word}")
        return [int(v) for v in value]
    return [int(value)] * n


def _out_size(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    span = d * (k - 1) + 1
    num = size + 2 * p - span + ((s - 1) if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


# (the arguments and the input's shape) -> _params' answer: the checks read nothing else,
# so a repeated call (every training step) skips them
_CHECKED: dict = {}


def _params(input: Tensor, n: int, fn: str, kernel_size, stride, padding, dilation,
            ceil_mode: bool) -> tuple:
    """(kernel, stride, padding, dilation, input sizes, output sizes) per pooled dim, as
    new lists, after torch's checks of the arguments and the input's shape."""
    key = int_key((input._shape, n, fn, kernel_size, stride, padding, dilation, ceil_mode))
    found = _CHECKED.get(key) if key is not None else None
    if found is not None:
        return tuple(list(v) for v in found)
    result = _checked_params(input, n, fn, kernel_size, stride, padding, dilation, ceil_mode)
    if key is not None:
        if len(_CHECKED) >= 256:
            _CHECKED.clear()
        _CHECKED[key] = tuple(tuple(v) for v in result)
    return result


def _checked_params(input: Tensor, n: int, fn: str, kernel_size, stride, padding, dilation,
                    ceil_mode: bool) -> tuple:
    name = fn.removesuffix("()")
    k = _tuple("kernel_size", kernel_size, n, name)
    s = k if stride is None or (isinstance(stride, (list, tuple)) and not stride) else \
        _tuple("stride", stride, n, name)
    p = _tuple("padding", padding, n, name)
    d = _tuple("dilation", dilation, n, name)
    if fn == "max_pool1d()":
        _check_max_pool1d(input, k[0], s[0], p[0], d[0], ceil_mode)
    if any(v <= 0 for v in k):
        raise RuntimeError("kernel size should be greater than zero, but got "
                           + " ".join(f"k{a}: {v}" for a, v in zip("DHW"[3 - n:], k)))
    if any(v == 0 for v in s):
        raise RuntimeError("stride should not be zero")
    if any(v <= 0 for v in d):
        raise RuntimeError("dilation should be greater than zero, but got "
                           + " ".join(f"dilation{a}: {v}" for a, v in zip("DHW"[3 - n:], d)))
    for kk, pp, dd in zip(k, p, d):
        if pp < 0:
            raise RuntimeError(f"pad must be non-negative, but got pad: {pp}")
        if pp > (dd * (kk - 1) + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                               f"pad={pp}, kernel_size={kk} and dilation={dd}")
    _check_input(input, n, fn)
    sizes = list(input.shape[-n:])
    out = [_out_size(*a, ceil_mode) for a in zip(sizes, k, s, p, d)]
    if any(o < 1 for o in out):
        c = input.shape[-n - 1]
        raise RuntimeError(f"Given input size: ({'x'.join(map(str, [c, *sizes]))}). "
                           f"Calculated output size: ({'x'.join(map(str, [c, *out]))}). "
                           "Output size is too small")
    return k, s, p, d, sizes, out


def _check_max_pool1d(input: Tensor, k: int, s: int, p: int, d: int, ceil_mode: bool) -> None:
    """The checks of torch's max_pool1d kernel (CPU, no indices, no gradient)."""
    if input.dim() not in (2, 3) or any(v == 0 for v in input.shape[-2:]):
        raise RuntimeError("max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 "
                           f"dim batch size for input, but got:{list(input.shape)}")
    for name, v, ok in (("kernel_size", k, k > 0), ("stride", s, s > 0)):
        if not ok:
            raise RuntimeError(f"max_pool1d() {name} must be greater than zero, but got {v}")
    if p < 0:
        raise RuntimeError(f"max_pool1d() padding must be non-negative, but got {p}")
    if p > k // 2:
        raise RuntimeError("max_pool1d() padding should be at most half of kernel size, but "
                           f"got padding={p} and kernel_size={k}")
    if d <= 0:
        raise RuntimeError(f"max_pool1d() dilation must be greater than zero, but got {d}")
    out = _out_size(input.shape[-1], k, s, p, d, ceil_mode)
    if out < 0:
        raise RuntimeError(f"max_pool1d() Invalid computed output size: {out}")


def _check_input(input: Tensor, n: int, fn: str) -> None:
    """torch's pooling input checks: (n+1)- or (n+2)-d, no empty non-batch dim."""
    shape = list(input.shape)
    if input.dim() not in (n + 1, n + 2):
        if fn == "avg_pool1d":
            raise RuntimeError(f"Expected 2 to 3 dimensions, but got {input.dim()}-dimensional "
                               "tensor for argument #1 'self' (while checking arguments for "
                               "avg_pool1d)")
        raise RuntimeError(f"non-empty {n + 1}D or {n + 2}D (batch mode) tensor expected for "
                           "input")
    if any(v == 0 for v in shape[input.dim() - n - 1:]):
        if n == 3:
            raise RuntimeError(f"{fn}: Expected input's non-batch dimensions to have positive "
                               f"length, but input has a shape of {shape}")
        if n == 1:  # avg_pool1d runs as avg_pool2d over an inserted dim
            shape = shape[:-1] + [1, shape[-1]]
        raise RuntimeError("Expected 3D or 4D (batch mode) tensor with optional 0 dim batch "
                           f"size for input, but got:{shape}")


def _windows_table(sizes, out, k, s, p, d) -> tuple:
    """(padded flat index, input flat index) per (output cell, kernel offset)."""
    n = len(sizes)
    padded = [size + 2 * pp + max(0, (o - 1) * ss + dd * (kk - 1) + 1 - size - 2 * pp)
              for size, o, kk, ss, pp, dd in zip(sizes, out, k, s, p, d)]
    grids = np.meshgrid(*[np.arange(o) for o in out], *[np.arange(kk) for kk in k],
                        indexing="ij")
    pos = [grids[i] * s[i] + grids[n + i] * d[i] for i in range(n)]
    flat_pad = np.ravel_multi_index(pos, padded)
    flat_in = np.ravel_multi_index([np.clip(pos[i] - p[i], 0, sizes[i] - 1)
                                    for i in range(n)], sizes)
    kprod = math.prod(k)
    return (padded, flat_pad.reshape(*out, kprod), flat_in.reshape(*out, kprod))


def _lowest(dtype: D.dtype) -> float:
    if dtype.category == 2:
        return -math.inf
    return int(np.iinfo(dtype.np).min)


def _max_pool(input: Tensor, n: int, fn: str, kernel_size, stride, padding, dilation,
              ceil_mode: bool, return_indices: bool):
    if input.dtype is D.bool_ or input.dtype.category == 3:
        raise NotImplementedError(f'"{fn.removesuffix("()")}" not implemented for '
                                  f"'{input.dtype._legacy}'")
    k, s, p, d, sizes, out = _params(input, n, fn, kernel_size, stride, padding, dilation,
                                     ceil_mode)
    if n == 2 and use_fused(input):
        values, indices = max_pool2d_fused(input, list(k), list(s), list(p), list(d), list(out))
        return (values, indices) if return_indices else values
    return _max_pool_composed(input, n, k, s, p, d, sizes, out, return_indices)


def _max_pool_composed(input: Tensor, n: int, k, s, p, d, sizes, out, return_indices: bool):
    """Max pooling in refimpl ops: the windows gathered through a host-built table."""
    padded, flat_pad, flat_in = _windows_table(sizes, out, k, s, p, d)
    lead = list(input.shape[:-n])
    flat = [v for i in reversed(range(n)) for v in (p[i], padded[i] - sizes[i] - p[i])]
    x = pad(input, flat, value=_lowest(input.dtype)) if any(flat) else input
    x = x.reshape(*lead, -1)
    picked = x.index_select(-1, _index(flat_pad.reshape(-1), x))
    values, arg = picked.reshape(*lead, *out, flat_pad.shape[-1]).max(-1)
    if not return_indices:
        return values
    table = _index(flat_in, x).expand(*lead, *out, flat_in.shape[-1])
    return values, table.gather(-1, arg.unsqueeze(-1)).squeeze(-1)


def max_pool1d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False):
    """Max over sliding windows of (N, C, L) or (C, L) (spec NNF-040)."""
    # torch's max_pool1d (without indices) checks its arguments with messages of its own;
    # with indices it goes through max_pool2d's checks
    name = "max_pool1d" if return_indices else "max_pool1d()"
    return _max_pool(input, 1, name, kernel_size, stride, padding, dilation,
                     ceil_mode, return_indices)


def max_pool2d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False):
    """Max over sliding windows of (N, C, H, W) or (C, H, W); with ``return_indices`` also
    the flat H*W index of each maximum (spec NNF-040)."""
    if return_indices:  # torch calls max_pool2d_with_indices itself
        return _max_pool(input, 2, "max_pool2d", kernel_size, stride, padding, dilation,
                         ceil_mode, True)
    return _max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode)


@composite("max_pool2d")
def _max_pool2d(input: Tensor, kernel_size, stride, padding, dilation, ceil_mode: bool):
    """``max_pool2d`` without indices: torch's ``aten::max_pool2d`` (to the profiler and
    autocast), over the op that also gives the indices."""
    return _max_pool(input, 2, "max_pool2d", kernel_size, stride, padding, dilation,
                     ceil_mode, False)


@composite("max_pool3d")
def max_pool3d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False):
    """Max over sliding windows of (N, C, D, H, W) or (C, D, H, W) (spec NNF-040)."""
    return _max_pool(input, 3, "max_pool3d", kernel_size, stride, padding, dilation,
                     ceil_mode, return_indices)


def _avg_pool(input: Tensor, n: int, fn: str, kernel_size, stride, padding, ceil_mode,
              count_include_pad, divisor_override) -> Tensor:
    if input.dtype is D.bool_ or input.dtype.category == 3:
        raise NotImplementedError(f'"{fn}" not implemented for \'{input.dtype._legacy}\'')
    k, s, p, _d, sizes, out = _params(input, n, fn, kernel_size, stride, padding, 1, ceil_mode)
    if n == 2 and input.is_cuda:  # torch's CUDA kernel counts output elements in an int32
        count = math.prod(input.shape[:-n]) * math.prod(out)
        if count > 2**31 - 1:
            raise RuntimeError("integer out of range")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    extra = [max(0, (o - 1) * ss + kk - size - 2 * pp)
             for size, o, kk, ss, pp in zip(sizes, out, k, s, p)]
    flat = [v for i in reversed(range(n)) for v in (p[i], p[i] + extra[i])]
    x = pad(input, flat) if any(flat) else input
    first = x.dim() - n
    sums = windows(x, k, s, [1] * n, first).sum(list(range(-n, 0)))
    if divisor_override is not None:
        div = divisor_override
    else:
        div = _divisors(sizes, out, k, s, p, extra, count_include_pad, input)
    if input.dtype.category == 1:
        return sums.div(div, rounding_mode="trunc")
    return sums / div


def _divisors(sizes, out, k, s, p, extra, count_include_pad: bool, like: Tensor) -> Tensor:
    """The per-window element count torch divides by: explicit padding counts when
    ``count_include_pad``, the ceil_mode overhang never does."""
    mask = np.ones(sizes)
    pads = [(pp, pp + e) for pp, e in zip(p, extra)]
    mask = np.pad(mask, [(a, 0) for a, _ in pads], constant_values=float(count_include_pad))
    mask = np.pad(mask, [(0, pp) for pp, _ in pads], constant_values=float(count_include_pad))
    mask = np.pad(mask, [(0, b - a) for a, b in pads], constant_values=0.0)
    view = np.lib.stride_tricks.sliding_window_view(mask, k)
    view = view[tuple(slice(None, None, ss) for ss in s)]
    counts = view.sum(axis=tuple(range(-len(k), 0)))[tuple(slice(0, o) for o in out)]
    from refimpl.ops.factories import tensor

    dtype = like.dtype if like.dtype.category == 2 else D.int64
    return tensor(counts, dtype=dtype, device=like.device)


def avg_pool1d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """Mean over sliding windows of (N, C, L) or (C, L) (spec NNF-041)."""
    return _avg_pool(input, 1, "avg_pool1d", kernel_size, stride, padding, ceil_mode,
                     count_include_pad, None)


def avg_pool2d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override=None) -> Tensor:
    """Mean over sliding windows of (N, C, H, W) or (C, H, W) (spec NNF-041)."""
    return _avg_pool(input, 2, "avg_pool2d", kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


@composite("avg_pool3d")
def avg_pool3d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override=None) -> Tensor:
    """Mean over sliding windows of (N, C, D, H, W) or (C, D, H, W) (spec NNF-041)."""
    return _avg_pool(input, 3, "avg_pool3d", kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


def _adaptive_sizes(input: Tensor, n: int, fn: str, output_size) -> list:
    if input.dim() < n + 1:
        raise ValueError(f"Input dimension should be at least {n + 1}")
    sizes = list(input.shape[-n:])
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != n:
            if n == 1:
                raise RuntimeError(f"{fn}() argument 'output_size' should contain one int (got "
                                   f"{len(output_size)})")
            if fn.startswith("adaptive_max"):
                raise RuntimeError(f"{fn}(): internal error: output_size.size() must be {n}")
            raise RuntimeError(f"{fn}: output_size must be {n}")
        out = [sizes[i] if v is None else int(v) for i, v in enumerate(output_size)]
    else:
        out = [int(output_size)] * n
    if any(o < 0 for o in out):
        shown = [1, *out] if n == 1 else out  # 1-d pools run as 2-d ones
        if fn.startswith("adaptive_avg"):
            text = ", ".join(map(str, shown[:2])) + "".join(f",{v}" for v in shown[2:])
            raise RuntimeError(f"adaptive_avg_pool{max(n, 2)}d: elements of output_size must "
                               f"be greater than or equal to 0 but received {{{text}}}")
        lead = list(input.shape[:-n]) + ([1] if n == 1 else [])
        bad = next(o for o in out if o < 0)
        raise RuntimeError(f"Trying to create tensor with negative dimension {bad}: "
                           f"{lead + out}")
    return out


def _bins(size: int, out: int) -> list:
    """torch's adaptive bins: [floor(i*size/out), ceil((i+1)*size/out))."""
    return [((i * size) // out, -(-((i + 1) * size) // out)) for i in range(out)]


def _adaptive_avg(input: Tensor, n: int, fn: str, output_size) -> Tensor:
    out = _adaptive_sizes(input, n, fn, output_size)
    if input.dtype.category != 2:
        raise NotImplementedError(f'"{fn}" not implemented for \'{input.dtype._legacy}\'')
    from refimpl.ops.factories import tensor

    x = input.float() if input.dtype in (D.float16, D.bfloat16) else input
    for i, o in enumerate(out):
        size = x.shape[x.dim() - n + i]
        mat = np.zeros((size, o))
        for j, (a, b) in enumerate(_bins(size, o)):
            mat[a:b, j] = 1.0 / (b - a)
        m = tensor(mat, dtype=x.dtype, device=x.device)
        dim = x.dim() - n + i
        x = x.movedim(dim, -1).matmul(m).movedim(-1, dim)
    return x.to(input.dtype)


def adaptive_avg_pool1d(input: Tensor, output_size) -> Tensor:
    """Mean over ``output_size`` adaptive bins of the last dim (spec NNF-042)."""
    return _adaptive_avg(input, 1, "adaptive_avg_pool1d", output_size)


def adaptive_avg_pool2d(input: Tensor, output_size) -> Tensor:
    """Mean over adaptive bins of the last two dims (None keeps a size) (spec NNF-042)."""
    return _adaptive_avg(input, 2, "adaptive_avg_pool2d", output_size)


@composite("adaptive_avg_pool3d")
def adaptive_avg_pool3d(input: Tensor, output_size) -> Tensor:
    """Mean over adaptive bins of the last three dims (spec NNF-042)."""
    return _adaptive_avg(input, 3, "adaptive_avg_pool3d", output_size)


def _adaptive_max(input: Tensor, n: int, fn: str, output_size, return_indices: bool):
    out = _adaptive_sizes(input, n, fn, output_size)
    if input.dtype.category != 2:
        raise NotImplementedError(f'"{fn}" not implemented for \'{input.dtype._legacy}\'')
    sizes = list(input.shape[-n:])
    bins = [_bins(size, o) for size, o in zip(sizes, out)]
    widths = [max((b - a for a, b in bs), default=1) for bs in bins]
    cells = np.meshgrid(*[np.arange(o) for o in out], *[np.arange(w) for w in widths],
                        indexing="ij")
    pos = []
    for i in range(n):
        start = np.array([a for a, _ in bins[i]])[cells[i]]
        stop = np.array([b for _, b in bins[i]])[cells[i]]
        pos.append(np.minimum(start + cells[n + i], stop - 1))  # short bins repeat an element
    table = np.ravel_multi_index([q.astype(np.int64) for q in pos], sizes).reshape(
        *out, math.prod(widths))
    lead = list(input.shape[:-n])
    x = input.reshape(*lead, -1)
    picked = x.index_select(-1, _index(table.reshape(-1), x))
    values, arg = picked.reshape(*lead, *out, table.shape[-1]).max(-1)
    if not return_indices:
        return values
    idx = _index(table, x).expand(*lead, *out, table.shape[-1])
    return values, idx.gather(-1, arg.unsqueeze(-1)).squeeze(-1)


def adaptive_max_pool1d(input: Tensor, output_size, return_indices: bool = False):
    """Max over adaptive bins of the last dim (spec NNF-043)."""
    return _adaptive_max(input, 1, "adaptive_max_pool1d", output_size, return_indices)


def adaptive_max_pool2d(input: Tensor, output_size, return_indices: bool = False):
    """Max over adaptive bins of the last two dims (spec NNF-043)."""
    return _adaptive_max(input, 2, "adaptive_max_pool2d", output_size, return_indices)


@composite("adaptive_max_pool3d")
def adaptive_max_pool3d(input: Tensor, output_size, return_indices: bool = False):
    """Max over adaptive bins of the last three dims (spec NNF-043)."""
    return _adaptive_max(input, 3, "adaptive_max_pool3d", output_size, return_indices)


__all__: list = []
