"""The aten-level nn ops torch exposes besides ``nn.functional`` (``torch.native_batch_norm``,
``torch.constant_pad_nd``, ``torch.grid_sampler_2d``, ``torch._chunk_cat`` ...), with torch's
signatures and extra outputs (saved statistics).

Each is a composite of refimpl's ``nn.functional`` ops and tensor ops, so it runs on every
device those run on (CPU and CUDA) and differentiates through them; outputs torch marks
non-differentiable (saved means and inverse deviations) are detached.
"""

from __future__ import annotations

import math

from refimpl import _dtype as D
from refimpl._tensor import Tensor, wrap_dim


def _functional():
    import refimpl.nn.functional as F

    return F


def _empty_stat(input: Tensor) -> Tensor:
    from refimpl.ops.factories import empty

    n = input.shape[1] if input.is_cuda and input.dim() > 1 else 0
    return empty((n,), dtype=_stat_dtype(input), device=input.device)


def _stat_dtype(input: Tensor) -> D.dtype:
    """The dtype of saved statistics: the input's on the CPU, float32 for reduced-precision
    inputs on CUDA (torch's accumulation type there)."""
    reduced = input.dtype in (D.float16, D.bfloat16)
    return D.float32 if reduced and input.is_cuda else input.dtype


def _opmath(x: Tensor) -> Tensor:
    """``x`` in float32 when it is float16/bfloat16 (torch computes those in float)."""
    return x.to(D.float32) if x.dtype in (D.float16, D.bfloat16) else x


def _batch_stats(input: Tensor, eps: float) -> tuple:
    """Per-channel mean and inverse standard deviation (biased variance) of a batch."""
    dims = [0, *range(2, input.dim())]
    x = _opmath(input.detach())
    mean = x.mean(dims)
    invstd = (x.var(dims, correction=0) + eps).rsqrt()
    return mean.to(_stat_dtype(input)), invstd.to(_stat_dtype(input))


def native_batch_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None,
                      running_mean: Tensor | None, running_var: Tensor | None, training: bool,
                      momentum: float, eps: float) -> tuple:
    """``(output, save_mean, save_invstd)`` of batch normalisation; in training the running
    statistics are updated in place and the batch's statistics are returned; in
    evaluation the CPU saves none (empty tensors) and CUDA saves the running mean and the
    inverse standard deviation of the running variance, as torch's CUDA kernel does."""
    out = _functional().batch_norm(input, running_mean, running_var, weight, bias, training,
                                   momentum, eps)
    if not training:
        if input.is_cuda and running_mean is not None and running_var is not None:
            mean = running_mean.detach().to(_stat_dtype(input), copy=True)
            invstd = (_opmath(running_var.detach()) + eps).rsqrt().to(_stat_dtype(input))
            return out, mean, invstd
        return out, _empty_stat(input), _empty_stat(input)
    mean, invstd = _batch_stats(input, eps)
    return out, mean, invstd


def _native_batch_norm_legit(input: Tensor, weight: Tensor | None, bias: Tensor | None,
                             *args) -> tuple:
    """``native_batch_norm`` with running statistics (``running_mean, running_var,
    training, momentum, eps``) or without them (``training, momentum, eps``)."""
    if len(args) == 3:
        training, momentum, eps = args
        return native_batch_norm(input, weight, bias, None, None, training, momentum, eps)
    return native_batch_norm(input, weight, bias, *args)


def batch_norm_with_update(input: Tensor, weight: Tensor | None, bias: Tensor | None,
                            running_mean: Tensor, running_var: Tensor, momentum: float,
                            eps: float) -> tuple:
    """Training-mode batch norm that updates the running statistics: ``(output, save_mean,
    save_invstd, reserve)`` with an empty uint8 ``reserve``."""
    from refimpl.ops.factories import empty

    out, mean, invstd = native_batch_norm(input, weight, bias, running_mean, running_var,
                                          True, momentum, eps)
    return out, mean, invstd, empty((0,), dtype=D.uint8, device=input.device)


def native_layer_norm(input: Tensor, normalized_shape, weight: Tensor | None,
                      bias: Tensor | None, eps: float) -> tuple:
    """``(output, mean, rstd)``; the statistics keep the normalised dims with size 1."""
    normalized_shape = tuple(normalized_shape)
    out = _functional().layer_norm(input, normalized_shape, weight, bias, eps)
    axis = input.dim() - len(normalized_shape)
    dims = list(range(axis, input.dim()))
    x, dt = _opmath(input.detach()), _stat_dtype(input)
    if not dims:
        return out, x.to(dt), (x * 0 + eps).rsqrt().to(dt)
    mean = x.mean(dims, keepdim=True)
    rstd = (x.var(dims, correction=0, keepdim=True) + eps).rsqrt()
    return out, mean.to(dt), rstd.to(dt)


def native_group_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None, N: int,
                      C: int, HxW: int, group: int, eps: float) -> tuple:
    """``(output, mean, rstd)`` with statistics of shape ``(N, group)`` (differentiable)."""
    out = _functional().group_norm(input, group, weight, bias, eps)
    x = _opmath(input).reshape(N, group, (C // group) * HxW)
    mean = x.mean(-1)
    rstd = (x.var(-1, correction=0) + eps).rsqrt()
    return out, mean.to(_stat_dtype(input)), rstd.to(_stat_dtype(input))


def _softmax_backward_data(grad_output: Tensor, output: Tensor, dim: int,
                           input_dtype) -> Tensor:
    """The gradient of softmax's input from its output: ``y * (g - sum(g * y, dim))``."""
    y, g = _opmath(output), _opmath(grad_output)
    return (y * (g - (g * y).sum(dim, keepdim=True))).to(input_dtype)


def _safe_softmax(input: Tensor, dim: int, dtype=None) -> Tensor:
    """softmax whose rows of only ``-inf`` give zeros instead of NaN."""
    from refimpl.ops.elementwise_binary import where

    masked = (input == -math.inf).all(dim, keepdim=True)
    out = _functional().softmax(where(masked, 0, input), dim, dtype=dtype)
    return where(masked, 0, out)


def dropout_backward(grad_output: Tensor, mask: Tensor, scale: float) -> Tensor:
    """The gradient through dropout: ``grad_output * mask * scale`` (CUDA: floating
    gradients only, as torch's kernel)."""
    if grad_output.is_cuda and not grad_output.dtype.is_floating_point:
        raise NotImplementedError(
            f'"masked_scale" not implemented for \'{D.type_name(grad_output.dtype)}\'')
    return grad_output * mask * scale


def max_pool2d_backward(grad_output: Tensor, input: Tensor, kernel_size, stride,
                                     padding, dilation, ceil_mode: bool,
                                     indices: Tensor) -> Tensor:
    """The gradient of max_pool2d's input: each output gradient added at the flat index
    (within its plane) of the maximum it came from."""
    lead = tuple(input.shape[:-2])
    plane = input.shape[-2] * input.shape[-1]
    # zeros that depend on input with a zero derivative (torch's formula for input:
    # zeros_like), whatever input holds (NaN, inf)
    flat = (input.nan_to_num(0, 0, 0) * 0).to(grad_output.dtype).reshape(*lead, plane)
    g = grad_output.reshape(*lead, -1)
    return flat.scatter_add(-1, indices.reshape(*lead, -1), g).reshape(input.shape)


def constant_pad_nd(input: Tensor, pad, value: float = 0) -> Tensor:
    """Pad (or, with negative amounts, crop) the last dims with ``value``."""
    return _functional().pad(input, list(pad), "constant", value)


_INTERPOLATION = ("bilinear", "nearest", "bicubic")
_PADDING = ("zeros", "border", "reflection")


def grid_sampler_2d(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int,
                    align_corners: bool) -> Tensor:
    """``grid_sample`` with torch's integer codes for the interpolation (0 bilinear,
    1 nearest, 2 bicubic) and padding (0 zeros, 1 border, 2 reflection) modes."""
    return _functional().grid_sample(input, grid, _INTERPOLATION[interpolation_mode],
                                     _PADDING[padding_mode], align_corners)


def grid_sampler_3d(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int,
                    align_corners: bool) -> Tensor:
    """``grid_sample`` of a 5-d input (bilinear = trilinear, nearest), torch's codes."""
    return _functional().grid_sample(input, grid, _INTERPOLATION[interpolation_mode],
                                     _PADDING[padding_mode], align_corners)


def _aa_weights(in_size: int, out_size: int, align_corners: bool, opt_scale):
    """The (out, in) matrix of antialiased bilinear interpolation along one dim: a triangle
    filter widened by the downscaling factor, each row normalised to sum 1."""
    import numpy as np

    if align_corners:
        scale = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    else:
        scale = 1.0 / opt_scale if opt_scale is not None and opt_scale > 0 else in_size / out_size
    support = max(scale, 1.0)
    invscale = 1.0 / scale if scale >= 1.0 else 1.0
    w = np.zeros((out_size, in_size))
    for i in range(out_size):
        center = scale * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), in_size)
        taps = np.clip(1 - np.abs((np.arange(lo, hi) - center + 0.5) * invscale), 0, None)
        if taps.sum():
            w[i, lo:hi] = taps / taps.sum()
    return w


def _aa_weights_f32(in_size: int, out_size: int, align_corners: bool, opt_scale, kind):
    """``_aa_weights`` as torch's single-precision kernels compute them (its CUDA kernel's
    order; its CPU float32 results agree): the scale, centers, spans and taps in float32
    arithmetic, each tap kept in ``kind`` (the input's numpy type) and divided by the row's
    float32 total converted to ``kind``."""
    import numpy as np

    f = np.float32
    if align_corners:
        scale = f(in_size - 1) / f(out_size - 1) if out_size > 1 else f(0)
    else:
        scale = f(1.0 / opt_scale) if opt_scale is not None and opt_scale > 0 else \
            f(in_size) / f(out_size)
    support = scale if scale >= 1 else f(1)
    invscale = f(1.0 / float(scale)) if scale >= 1 else f(1)
    w = np.zeros((out_size, in_size), dtype=np.float64)
    for i in range(out_size):
        center = f(scale * f(i + 0.5))
        lo = max(int(f(f(center - support) + f(0.5))), 0)
        size = min(int(f(f(center + support) + f(0.5))), in_size) - lo
        offset = f(f(lo) - center)
        taps, total = [], f(0)
        for j in range(size):
            a = abs(f(f(f(j) + offset) + f(0.5)) * invscale)
            tap = f(f(1) - a) if a < 1 else f(0)
            taps.append(tap)
            total = f(total + tap)
        for j, tap in enumerate(taps):
            kept = kind(tap)
            if total != 0:
                kept = kind(f(f(kept) / f(kind(total))))
            w[i, lo + j] = float(kept)
    return w


def upsample_bilinear2d_aa(input: Tensor, output_size=None, align_corners: bool = False,
                           *scales, scales_h=None, scales_w=None, scale_factors=None) -> Tensor:
    """Antialiased bilinear resizing of the last two dims of a 4-d input (both of torch's
    overloads: ``scales_h, scales_w``, or ``.vec``'s ``scale_factors``)."""
    from refimpl.ops.factories import tensor

    if len(scales) == 1:
        scale_factors = scales[0]
    elif len(scales) == 2:
        scales_h, scales_w = scales
    if scale_factors is not None:
        scales_h, scales_w = scale_factors
    if not input.dtype.is_floating_point:
        raise NotImplementedError("refimpl: _upsample_bilinear2d_aa of integral inputs (the "
                                  "fixed-point uint8 kernel) is not implemented")
    in_h, in_w = input.shape[-2:]
    if output_size is None:
        output_size = (int(in_h * scales_h), int(in_w * scales_w))
    out_h, out_w = output_size
    if input.dtype is D.float32 or (input.is_cuda and input.dtype in (D.float16, D.bfloat16)):
        # torch's kernel: float32 weights kept in the input's type, the width pass summed
        # in float32 and stored in the input's type, then the height pass
        import ml_dtypes
        import numpy as np

        kind = {D.float32: np.float32, D.float16: np.float16}.get(input.dtype,
                                                                    ml_dtypes.bfloat16)
        wh = tensor(_aa_weights_f32(in_h, out_h, align_corners, scales_h, kind),
                    dtype=D.float32, device=input.device)
        ww = tensor(_aa_weights_f32(in_w, out_w, align_corners, scales_w, kind).T,
                    dtype=D.float32, device=input.device)
        rows = input.float().matmul(ww).to(input.dtype).float()
        return wh.matmul(rows).to(input.dtype)
    # float64 sums, rounded once: within torch's float32 rounding of its own sums
    wide = D.float64 if input.dtype in (D.float32, D.float64) else D.float32
    wh = tensor(_aa_weights(in_h, out_h, align_corners, scales_h), dtype=wide,
                device=input.device)
    ww = tensor(_aa_weights(in_w, out_w, align_corners, scales_w).T, dtype=wide,
                device=input.device)
    return wh.matmul(input.to(wide)).matmul(ww).to(input.dtype)


def _chunk_cat_check(tensors: list, dim: int, num_chunks: int) -> int:
    """torch's checks of ``_chunk_cat``'s arguments; the wrapped dim."""
    def fail(what: str):
        raise RuntimeError(f"_chunk_cat expects {what}")

    if not tensors:
        fail("a non-empty input tensor list")
    if num_chunks < 1:
        fail("positive num_chunks")
    ndims = {x.dim() for x in tensors}
    if len(ndims) > 1 and dim < 0:
        fail("non-negative dim when input tensors have different ndims")
    if any(dim >= x.dim() for x in tensors):
        fail("dim < ndim for all input tensors")
    d = wrap_dim(dim, tensors[0].dim())
    if any(x.shape[:d] != tensors[0].shape[:d] for x in tensors):
        fail("same sizes of 0,...,dim-1 dimensions for all tensors")
    if any(x.numel() == 0 for x in tensors):
        fail("non-empty tensor")
    if any(x.dtype != tensors[0].dtype for x in tensors):
        fail("all input tensors with the same dtype")
    return d


def _chunk_cat(tensors, dim: int, num_chunks: int) -> Tensor:
    """Split every tensor along ``dim`` into ``num_chunks`` chunks (the last zero-padded to
    the same size) and concatenate chunk by chunk: the result has shape
    ``leading dims + (num_chunks, sum of each tensor's flattened chunk)``."""
    from refimpl.ops.shape import cat

    tensors = list(tensors)
    d = _chunk_cat_check(tensors, dim, num_chunks)
    pieces = []
    for x in tensors:
        size = x.shape[d]
        per = -(-size // num_chunks)
        if per * num_chunks != size:
            amounts = [0, 0] * (x.dim() - d - 1) + [0, per * num_chunks - size]
            x = _functional().pad(x, amounts)
        pieces.append(x.reshape(*x.shape[:d], num_chunks, -1))
    return cat(pieces, d + 1)


def _clamped(indices, shape) -> tuple:
    """Indices clamped into range (the masked-off positions may hold any index)."""
    for k, i in enumerate(indices):
        if not isinstance(i, Tensor):
            raise TypeError(f"expected Tensor as element {k} in argument 2, but got "
                            f"{type(i).__name__}")
    return tuple(i.clamp(-shape[k], shape[k] - 1) for k, i in enumerate(indices))


def _unsafe_masked_index(input: Tensor, mask: Tensor, indices, fill) -> Tensor:
    """``input[indices]`` where ``mask`` holds, ``fill`` elsewhere."""
    from refimpl.ops.elementwise_binary import where

    picked = input[_clamped(indices, input.shape)]
    return where(mask, picked, fill)


def _unsafe_masked_index_put_accumulate(input: Tensor, mask: Tensor, indices,
                                        values: Tensor) -> Tensor:
    """A copy of ``input`` with ``values`` added at ``indices`` where ``mask`` holds."""
    from refimpl.ops.elementwise_binary import where
    from refimpl.ops.factories import zeros_like
    from refimpl.ops.indexing import index_put

    masked = where(mask, values, zeros_like(values))
    return index_put(input, _clamped(indices, input.shape), masked, True)


__all__ = [
    "_chunk_cat",
    "_native_batch_norm_legit",
    "_safe_softmax",
    "_softmax_backward_data",
    "_unsafe_masked_index",
    "_unsafe_masked_index_put_accumulate",
    "constant_pad_nd",
    "grid_sampler_2d",
    "grid_sampler_3d",
    "native_batch_norm",
    "native_group_norm",
    "native_layer_norm",
]


def _fractional_intervals(u: Tensor, in_size: int, out_size: int, k: int) -> Tensor:
    """Window starts of fractional max pooling along one dim for samples ``u`` in [0, 1):
    ``floor((i + u) * alpha) - floor(u * alpha)``, the last window at the end."""
    from refimpl.ops.factories import arange, full

    if out_size == 1:
        return full((*u.shape, 1), in_size - k, dtype=D.int64, device=u.device)
    alpha = (in_size - k) / (out_size - 1)
    i = arange(out_size - 1, dtype=u.dtype, device=u.device)
    u = u.unsqueeze(-1)
    starts = (((i + u) * alpha).floor() - (u * alpha).floor()).to(D.int64)
    last = full((*starts.shape[:-1], 1), in_size - k, dtype=D.int64, device=u.device)
    from refimpl.ops.shape import cat

    return cat([starts, last], -1)


def _fractional_max_pool(name: str, nd: int, order: tuple, input: Tensor, kernel_size,
                         output_size, output_ratio, return_indices: bool, samples):
    """Fractional max pooling over the last ``nd`` dims; ``order[j]`` is the spatial dim
    that sample ``j`` of a plane draws the windows of (torch's layout of the samples)."""
    import itertools

    from refimpl.ops.random import rand
    from refimpl.ops.shape import stack

    if output_size is None and output_ratio is None:
        raise ValueError(f"{name} requires specifying either an output_size or an "
                         "output_ratio")
    k = _ntuple(kernel_size, nd)
    spatial = tuple(input.shape[-nd:])
    if output_size is None:
        output_size = tuple(int(s * r) for s, r in zip(spatial, _ntuple(output_ratio, nd)))
    out = _ntuple(output_size, nd)
    batched = input.dim() == nd + 2
    x = input if batched else input.unsqueeze(0)
    n, c = x.shape[0], x.shape[1]
    if samples is None:
        samples = rand(n, c, nd, dtype=input.dtype, device=input.device)
    starts = [None] * nd
    for j, d in enumerate(order):
        starts[d] = _fractional_intervals(samples[..., j], spatial[d], out[d], k[d])
    strides = [math.prod(spatial[d + 1:]) for d in range(nd)]
    flat = x.reshape(n, c, -1)
    picks, where_from = [], []
    for offset in itertools.product(*(range(kd) for kd in k)):
        index = None
        for d in range(nd):
            pos = (starts[d] + offset[d]) * strides[d]
            pos = pos.reshape(n, c, *[out[d] if e == d else 1 for e in range(nd)])
            index = pos if index is None else index + pos
        index = index.expand(n, c, *out).reshape(n, c, -1)
        picks.append(flat.gather(-1, index))
        where_from.append(index)
    values, choice = stack(picks, -1).max(-1)
    indices = stack(where_from, -1).gather(-1, choice.unsqueeze(-1)).squeeze(-1)
    values, indices = values.reshape(n, c, *out), indices.reshape(n, c, *out)
    if not batched:
        values, indices = values.squeeze(0), indices.squeeze(0)
    return (values, indices) if return_indices else values


def _ntuple(v, n: int) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def fractional_max_pool2d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples=None):
    """Max pooling over pseudo-random windows of a (N, C, H, W) or (C, H, W) input: per
    plane, samples ``(u_w, u_h)`` in [0, 1) place the windows (drawn when not given)."""
    return _fractional_max_pool("fractional_max_pool2d", 2, (1, 0), input, kernel_size,
                                output_size, output_ratio, return_indices, _random_samples)


def fractional_max_pool3d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples=None):
    """Fractional max pooling of a (N, C, T, H, W) or (C, T, H, W) input; per plane the
    samples ``(u_t, u_h, u_w)`` place the windows."""
    return _fractional_max_pool("fractional_max_pool3d", 3, (0, 1, 2), input, kernel_size,
                                output_size, output_ratio, return_indices, _random_samples)


def _register_aten() -> None:
    """Every op of this module under ``ops.aten``; those torch has only there
    (``aten.native_dropout_backward``, ``aten.max_pool2d_with_indices_backward``,
    ``aten._batch_norm_with_update``) only there."""
    from refimpl.library import register_composite

    for name in __all__:
        register_composite(name, ("default",), globals()[name])
    register_composite("_native_batch_norm_legit", ("no_stats",), _native_batch_norm_legit)
    register_composite("_batch_norm_with_update", ("default",), batch_norm_with_update)
    register_composite("native_dropout_backward", ("default",), dropout_backward)
    register_composite("max_pool2d_with_indices_backward", ("default",), max_pool2d_backward)
    register_composite("_upsample_bilinear2d_aa", ("default", "vec"), upsample_bilinear2d_aa)


_register_aten()
