"""Resampling of ``torch.nn.functional``: ``interpolate`` (nearest, nearest-exact,
linear/bilinear/trilinear/bicubic with or without ``align_corners``, area), ``upsample``,
``affine_grid`` and ``grid_sample`` (bilinear/nearest, zeros/border padding)
(spec: NNF-080..NNF-082).

Interpolation is separable: each spatial dim is resampled in turn by ``index_select``
of host-computed source indices (from sizes alone) and, for the linear modes, a blend
with host-computed weights. Being compositions of refimpl ops, these run on every
device with gradients to any order.
"""

from __future__ import annotations

import math

import numpy as np

from refimpl import _dtype as D
from refimpl._autocast import composite
from refimpl._tensor import Tensor
from refimpl.ops.nn_shape import _index

_MODES = "nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact"
_LINEAR = {"linear": 1, "bilinear": 2, "trilinear": 3, "bicubic": 2}
_A = -0.75  # the cubic convolution coefficient torch uses
_REDUCED = (D.float16, D.bfloat16)


def _output_sizes(input: Tensor, n: int, size, scale_factor, recompute) -> tuple:
    """(output sizes, per-dim source scale or None to use in/out)."""
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    spatial = list(input.shape[2:])
    if size is not None:
        sizes = list(size) if isinstance(size, (list, tuple)) else [size] * n
        if len(sizes) != n:
            raise ValueError("Input and output must have the same number of spatial "
                             "dimensions, but got input with spatial dimensions of "
                             f"{spatial} and output size of {size}. Please provide input "
                             "tensor in (N, C, d1, d2, ...,dK) format and output size in "
                             "(o1, o2, ...,oK) format.")
        return [int(s) for s in sizes], [None] * n
    if scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    scales = list(scale_factor) if isinstance(scale_factor, (list, tuple)) else \
        [scale_factor] * n
    if len(scales) != n:
        raise ValueError("Input and scale_factor must have the same number of spatial "
                         f"dimensions, but got input with spatial dimensions of {spatial} "
                         f"and scale_factor of shape {scale_factor}. Please provide input "
                         "tensor in (N, C, d1, d2, ...,dK) format and scale_factor in (s1, "
                         "s2, ...,sK) format.")
    sizes = [math.floor(float(s) * f) for s, f in zip(spatial, scales)]
    return sizes, [None] * n if recompute else [float(f) for f in scales]


def _ratio(in_size: int, out_size: int, scale, align_corners: bool) -> float:
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else in_size / out_size


def _nearest(x: Tensor, dim: int, out_size: int, scale, exact: bool) -> Tensor:
    in_size = x.shape[dim]
    r = _ratio(in_size, out_size, scale, False)
    # torch computes nearest source indices in float32
    dst, r32 = np.arange(out_size, dtype=np.float32), np.float32(r)
    src = np.floor((dst + np.float32(0.5)) * r32) if exact else np.floor(dst * r32)
    src = np.minimum(src.astype(np.int64), in_size - 1)
    return x.index_select(dim, _index(src, x))


def _linear(x: Tensor, dim: int, out_size: int, scale, align_corners: bool) -> Tensor:
    from refimpl.ops.factories import tensor

    in_size = x.shape[dim]
    r = _ratio(in_size, out_size, scale, align_corners)
    dst = np.arange(out_size, dtype=np.float64)
    src = dst * r if align_corners else np.maximum((dst + 0.5) * r - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    i1 = np.minimum(i0 + 1, in_size - 1)
    lam = src - i0
    shape = [1] * x.dim()
    shape[dim] = out_size
    w1 = tensor(lam.reshape(shape), dtype=x.dtype, device=x.device)
    a = x.index_select(dim, _index(i0, x))
    b = x.index_select(dim, _index(i1, x))
    return a + (b - a) * w1


def _cubic(x: Tensor, dim: int, out_size: int, scale, align_corners: bool) -> Tensor:
    """Cubic convolution over 4 taps (indices clamped to the edge), as torch's bicubic."""
    from refimpl.ops.factories import tensor

    in_size = x.shape[dim]
    r = _ratio(in_size, out_size, scale, align_corners)
    dst = np.arange(out_size, dtype=np.float64)
    src = dst * r if align_corners else (dst + 0.5) * r - 0.5
    i0 = np.floor(src).astype(np.int64)
    f = src - i0

    def near(d):
        return ((_A + 2) * d - (_A + 3)) * d * d + 1

    def far(d):
        return ((_A * d - 5 * _A) * d + 8 * _A) * d - 4 * _A

    shape = [1] * x.dim()
    shape[dim] = out_size
    out = None
    for k, w in zip((-1, 0, 1, 2), (far(f + 1), near(f), near(1 - f), far(2 - f))):
        idx = np.clip(i0 + k, 0, in_size - 1)
        term = x.index_select(dim, _index(idx, x)) * tensor(w.reshape(shape), dtype=x.dtype,
                                                             device=x.device)
        out = term if out is None else out + term
    return out


def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """Resize the spatial dims (2..) of an (N, C, ...) input to ``size`` or by
    ``scale_factor`` (spec NNF-080)."""
    n = input.dim() - 2
    if mode in ("nearest", "area", "nearest-exact") and align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if n not in (1, 2, 3) or mode not in ("nearest", "nearest-exact", "area", *_LINEAR):
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported "
                                  f"(got {input.dim()}D) for the modes: {_MODES} (got {mode})")
    if mode in _LINEAR and _LINEAR[mode] != n:
        raise NotImplementedError(f"Got {input.dim()}D input, but {mode} mode needs "
                                  f"{_LINEAR[mode] + 2}D input")
    if antialias:
        raise NotImplementedError("refimpl's interpolate has no antialias")
    sizes, scales = _output_sizes(input, n, size, scale_factor, recompute_scale_factor)
    if mode == "area":
        from refimpl.ops import nn_pool

        pool = (nn_pool.adaptive_avg_pool1d, nn_pool.adaptive_avg_pool2d,
                nn_pool.adaptive_avg_pool3d)[n - 1]
        return pool(input, sizes)
    if input.dtype.category != 2:
        kind = "nearest" if mode.startswith("nearest") else mode
        raise NotImplementedError(f'"upsample_{kind}{n}d" not implemented for '
                                  f"'{input.dtype._legacy}'")
    return _RESAMPLE[_aten_name(mode, n)](input, mode, sizes, scales, bool(align_corners))


def _aten_name(mode: str, n: int) -> str:
    """The aten op torch's interpolate calls for ``mode`` on ``n`` spatial dims."""
    if mode == "nearest-exact":
        return f"_upsample_nearest_exact{n}d"
    return {"bicubic": "upsample_bicubic2d", "linear": "upsample_linear1d",
            "bilinear": "upsample_bilinear2d", "trilinear": "upsample_trilinear3d"}.get(
                mode, f"upsample_nearest{n}d")


def _resample(input: Tensor, mode: str, sizes, scales, align: bool) -> Tensor:
    """Resample the spatial dims one at a time (separable kernels)."""
    # float16/bfloat16 resample in float32 and round once, as torch's kernels
    x = input.float() if input.dtype in _REDUCED else input
    for i, (size, scale) in enumerate(zip(sizes, scales)):
        dim = 2 + i
        if mode == "bicubic":
            x = _cubic(x, dim, size, scale, align)
        elif mode in _LINEAR:
            x = _linear(x, dim, size, scale, align)
        else:
            x = _nearest(x, dim, size, scale, mode == "nearest-exact")
    return x.to(input.dtype)


# one composite per aten upsample op, so each takes its own autocast policy and profiler name
_RESAMPLE = {name: composite(name)(_resample) for name in (
    *(f"upsample_nearest{n}d" for n in (1, 2, 3)),
    *(f"_upsample_nearest_exact{n}d" for n in (1, 2, 3)),
    "upsample_linear1d", "upsample_bilinear2d", "upsample_trilinear3d", "upsample_bicubic2d")}


def affine_grid(theta: Tensor, size, align_corners: bool | None = None) -> Tensor:
    """The sampling grid (N, H, W, 2) of 2-d affine maps ``theta`` (N, 2, 3), in
    normalised [-1, 1] coordinates (spec NNF-081)."""
    from refimpl.ops.factories import tensor

    align = bool(align_corners)
    if theta.dtype.category != 2:
        raise ValueError(f"Expected theta to have floating point type, but got "
                         f"{theta.dtype}")
    if len(size) != 4:
        raise NotImplementedError("affine_grid only supports 4D sizes, for 2D affine "
                                  f"transformations. Got size {list(size)}.")
    if theta.dim() != 3 or tuple(theta.shape[1:]) != (2, 3):
        raise ValueError("Expected a batch of 2D affine matrices of shape Nx2x3 for size "
                         f"{list(size)}. Got {list(theta.shape)}.")
    n, _, h, w = size

    def axis(steps: int) -> np.ndarray:
        v = np.linspace(-1.0, 1.0, steps) if steps > 1 else np.zeros(1)
        return v if align else v * (steps - 1) / steps

    ys, xs = np.meshgrid(axis(h), axis(w), indexing="ij")
    base = np.stack([xs, ys, np.ones_like(xs)], -1).reshape(1, h * w, 3)
    grid = tensor(base, dtype=theta.dtype, device=theta.device).matmul(theta.transpose(1, 2))
    return grid.reshape(n, h, w, 2)


def _reflect(coord: Tensor, low2: int, high2: int) -> Tensor:
    """``coord`` reflected into [low2/2, high2/2] (torch's reflect_coordinates)."""
    from refimpl.ops.elementwise_binary import where

    if low2 == high2:
        return coord * 0
    low, span = low2 / 2, (high2 - low2) / 2
    c = (coord - low).abs()
    extra = c.fmod(span)
    flips = (c / span).floor()
    return where(flips.remainder(2) == 0, extra + low, span - extra + low)


def _bound(coord: Tensor, size: int, padding_mode: str, align: bool) -> Tensor:
    """torch's compute_coordinates: border clamps, reflection reflects then clamps."""
    if padding_mode == "border":
        return coord.clamp(0, size - 1)
    if padding_mode == "reflection":
        coord = _reflect(coord, 0, 2 * (size - 1)) if align else \
            _reflect(coord, -1, 2 * size - 1)
        return coord.clamp(0, size - 1)
    return coord


def _cubic_weights(f: Tensor) -> list:
    def near(d):
        return ((_A + 2) * d - (_A + 3)) * d * d + 1

    def far(d):
        return ((_A * d - 5 * _A) * d + 8 * _A) * d - 4 * _A
    return [far(f + 1), near(f), near(1 - f), far(2 - f)]


@composite("grid_sampler")
def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear",
                padding_mode: str = "zeros", align_corners: bool | None = None) -> Tensor:
    """Sample an (N, C, H, W) or (N, C, D, H, W) input at the normalised (x, y[, z])
    points of ``grid`` (N, *out, 2 or 3): bilinear (trilinear for 5-d), nearest, or
    bicubic (4-d); points outside give zeros, the border value, or the reflected value
    (``padding_mode`` zeros/border/reflection) (spec NNF-082). Gradients flow to both
    ``input`` and ``grid``."""
    import itertools
    import math as _math

    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError("nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")
    if input.dim() not in (4, 5) or grid.dim() != input.dim():
        raise RuntimeError("grid_sampler(): expected 4D or 5D input and grid with same number "
                           f"of dimensions, but got input with sizes {list(input.shape)} and "
                           f"grid with sizes {list(grid.shape)}")
    if mode == "bicubic" and input.dim() == 5:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    if input.dtype in _REDUCED:  # computed in float32, rounded once
        return grid_sample(input.float(), grid.float(), mode, padding_mode,
                           align_corners).to(input.dtype)
    n, c = input.shape[:2]
    spatial = list(input.shape[2:])
    nd = len(spatial)
    out_shape = list(grid.shape[1:-1])
    count = _math.prod(out_shape)
    align = bool(align_corners)

    def unnormalise(coord: Tensor, size: int) -> Tensor:
        if align:
            return (coord + 1) * ((size - 1) / 2)
        return ((coord + 1) * size - 1) / 2

    # grid's last dim lists x (the last spatial dim) first
    coords = [unnormalise(grid[..., nd - 1 - i], spatial[i]) for i in range(nd)]
    flat = input.reshape(n, c, _math.prod(spatial))

    def tap(idx: list) -> Tensor:
        inside, lin = None, None
        for q, size in zip(idx, spatial):
            ok = (q >= 0).logical_and(q <= size - 1)
            inside = ok if inside is None else inside.logical_and(ok)
            qc = q.clamp(0, size - 1)
            lin = qc if lin is None else lin * size + qc
        lin = lin.long().reshape(n, 1, count)
        vals = flat.gather(2, lin.expand(n, c, count)).reshape(n, c, *out_shape)
        return vals * inside.unsqueeze(1).to(input.dtype)

    if mode == "bicubic":
        gy, gx = coords
        x0, y0 = gx.floor(), gy.floor()
        wxs = [v.unsqueeze(1) for v in _cubic_weights(gx - x0)]
        wys = [v.unsqueeze(1) for v in _cubic_weights(gy - y0)]
        x0, y0 = x0.detach(), y0.detach()
        out = None
        for i in range(4):
            yy = _bound(y0 + (i - 1), spatial[0], padding_mode, align)
            for j in range(4):
                xx = _bound(x0 + (j - 1), spatial[1], padding_mode, align)
                term = tap([yy, xx]) * wys[i] * wxs[j]
                out = term if out is None else out + term
        return out
    coords = [_bound(q, size, padding_mode, align) for q, size in zip(coords, spatial)]
    if mode == "nearest":
        return tap([q.round() for q in coords])
    lows = [q.floor() for q in coords]
    fracs = [(q - lo).unsqueeze(1) for q, lo in zip(coords, lows)]
    lows = [lo.detach() for lo in lows]
    out = None
    for corner in itertools.product((0, 1), repeat=nd):
        weight = None
        for bit, f in zip(corner, fracs):
            part = f if bit else 1 - f
            weight = part if weight is None else weight * part
        term = tap([lo + bit for lo, bit in zip(lows, corner)]) * weight
        out = term if out is None else out + term
    return out


__all__: list = []
