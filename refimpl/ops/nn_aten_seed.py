"""More aten-level nn ops torch's own tests call directly: ``upsample_bilinear2d``,
``_adaptive_avg_pool2d_backward``, ``convolution_backward``, ``_embedding_bag`` (its four
outputs) and ``batch_norm_gather_stats`` / ``batch_norm_gather_stats_with_counts``.

Each is a composite of refimpl's ``nn.functional`` and tensor ops, so it runs wherever those
run and under ``FakeTensorMode`` (shapes through the ops' meta functions). Output layouts
follow torch's kernels: the memory format torch picks is applied with ``contiguous``.
"""

from __future__ import annotations

from refimpl import _dtype as D
from refimpl._memory_format import channels_last, contiguous_format, suggest_format
from refimpl._tensor import Tensor


def _suggest(x: Tensor):
    return suggest_format(tuple(x.shape), tuple(x.stride()))


def _grads_of(outputs: Tensor, inputs: list, grad_output: Tensor) -> tuple:
    from refimpl.autograd.engine import grad

    return grad(outputs, inputs, grad_output, allow_unused=True)


def upsample_bilinear2d(input: Tensor, output_size, align_corners: bool,
                        scales_h: float | None = None, scales_w: float | None = None,
                        *, scale_factors=None) -> Tensor:
    """Bilinear resizing of a 4-d input to ``output_size`` (``.default``) or by
    ``scale_factors`` (``.vec``). On CUDA the result is contiguous (torch's CUDA kernel
    writes channels-last output for no input of fewer than four channels, and its meta
    function none at all); on the CPU it keeps the input's suggested format."""
    from refimpl.ops.nn_sample import interpolate

    if output_size is not None and (scales_h is not None or scales_w is not None):
        # torch maps coordinates by the given scales; refimpl does where they give the size
        scale_factors = [scales_h, scales_w]
        if None in scale_factors or [int(i * f) for i, f in zip(
                input.shape[-2:], scale_factors)] != list(output_size):
            raise NotImplementedError("refimpl: upsample_bilinear2d with scales_h/scales_w "
                                      "that do not give output_size is not implemented")
        output_size = None
    if output_size is not None:
        out = interpolate(input, size=list(output_size), mode="bilinear",
                          align_corners=align_corners)
    else:
        out = interpolate(input, scale_factor=list(scale_factors), mode="bilinear",
                          align_corners=align_corners, recompute_scale_factor=False)
    fmt = contiguous_format if input.device.type == "cuda" else _suggest(input)
    return out.contiguous(memory_format=fmt)


def _upsample_bilinear2d_vec(input: Tensor, output_size, align_corners: bool,
                             scale_factors) -> Tensor:
    return upsample_bilinear2d(input, output_size, align_corners, scale_factors=scale_factors)


def adaptive_avg_pool2d_backward(grad_output: Tensor, self: Tensor) -> Tensor:
    """The gradient of ``adaptive_avg_pool2d(self, grad_output.shape[-2:])`` for
    ``grad_output``, in ``self``'s suggested memory format (as torch's kernels)."""
    from refimpl.autograd.grad_mode import enable_grad
    from refimpl.ops.nn_pool import adaptive_avg_pool2d

    with enable_grad():
        x = self.detach().requires_grad_(True)
        y = adaptive_avg_pool2d(x, list(grad_output.shape[-2:]))
        (g,) = _grads_of(y, [x], grad_output)
    return g.contiguous(memory_format=_suggest(self))


def convolution_backward(grad_output: Tensor, input: Tensor, weight: Tensor, bias_sizes,
                         stride, padding, dilation, transposed: bool, output_padding,
                         groups: int, output_mask) -> tuple:
    """Gradients of ``convolution`` for its input, weight and bias (``None`` where
    ``output_mask`` says so). Layouts: channels-last when the input or the weight is
    (torch's CPU and cuDNN rule for 4-d weights; float64 stays contiguous on CUDA)."""
    from refimpl.autograd.grad_mode import enable_grad
    from refimpl.ops.amp_list_ops import convolution

    x = input.detach().requires_grad_(True)
    w = weight.detach().requires_grad_(True)
    with enable_grad():
        y = convolution(x, w, None, stride, padding, dilation, transposed, output_padding,
                        groups)
        grad_input, grad_weight = _grads_of(y, [x, w], grad_output)
    fmt = contiguous_format
    if weight.dim() == 4 and channels_last in (_suggest(input), _suggest(weight)):
        fmt = channels_last
    if input.device.type == "cuda" and input.dtype is D.float64:
        fmt = contiguous_format
    return (grad_input.contiguous(memory_format=fmt) if output_mask[0] else None,
            grad_weight.contiguous(memory_format=fmt) if output_mask[1] else None,
            grad_output.sum([d for d in range(grad_output.dim()) if d != 1])
            if output_mask[2] else None)


_MODES = {0: "sum", 1: "mean", 2: "max"}


def _embedding_bag(weight: Tensor, indices: Tensor, offsets: Tensor,
                   scale_grad_by_freq: bool = False, mode: int = 0, sparse: bool = False,
                   per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                   padding_idx: int = -1) -> tuple:
    """torch's four outputs of ``embedding_bag`` as its CPU kernel returns them: the bags,
    ``offset2bag`` (each index's bag; empty in sum mode), ``bag_size`` (entries per bag not
    equal to ``padding_idx``; zeros in sum mode) and ``max_indices`` (the weight row each
    maximum came from in max mode, ``bag_size`` again in mean mode, zeros in sum mode)."""
    from refimpl.ops.factories import arange, full, zeros
    from refimpl.ops.nn_layers import embedding_bag

    if indices.device.type == "cuda":
        raise NotImplementedError("refimpl: _embedding_bag's CUDA outputs (the layouts of "
                                  "torch's CUDA kernel) are not implemented; use "
                                  "nn.functional.embedding_bag")
    if _without_data(offsets):
        return _embedding_bag_meta(weight, indices, offsets, mode, include_last_offset)
    pad = None if padding_idx < 0 else padding_idx
    out = embedding_bag(indices, weight, offsets, scale_grad_by_freq=scale_grad_by_freq,
                        mode=_MODES[mode], sparse=sparse,
                        per_sample_weights=per_sample_weights,
                        include_last_offset=include_last_offset, padding_idx=pad)
    bags = out.shape[0]
    long = {"dtype": D.int64, "device": indices.device}
    if mode == 0:
        return out, zeros((0,), **long), zeros((bags,), **long), zeros((bags,), **long)
    n = indices.shape[0]
    starts = offsets[:bags]
    offset2bag = (arange(n, **long).unsqueeze(1) >= starts.unsqueeze(0)).sum(1) - 1
    kept = indices != padding_idx if pad is not None else indices >= 0
    bag_size = zeros((bags,), **long).index_add(0, offset2bag, kept.to(D.int64))
    if mode == 1:
        return out, offset2bag, bag_size, bag_size.clone()
    rows = weight.detach()[indices]
    hit = (rows == out.detach()[offset2bag]) & kept.unsqueeze(1)
    pos = arange(n, **long).unsqueeze(1).expand(rows.shape)
    first = full(tuple(out.shape), n, **long).scatter_reduce(
        0, offset2bag.unsqueeze(1).expand(rows.shape), pos.masked_fill(~hit, n), "amin")
    padded = zeros((n + 1,), **long)
    padded[:n] = indices
    return out, offset2bag, bag_size, padded[first]


def _without_data(x: Tensor) -> bool:
    from refimpl._subclasses.fake_tensor import FakeTensor

    return isinstance(x, FakeTensor) or x.device.type == "meta"


def _embedding_bag_meta(weight: Tensor, indices: Tensor, offsets: Tensor, mode: int,
                        include_last_offset: bool) -> tuple:
    """The outputs' shapes and dtypes alone (the bags' bounds are data, which fakes lack)."""
    from refimpl.ops.factories import empty

    bags = offsets.shape[0] - (1 if include_last_offset else 0)
    long = {"dtype": D.int64, "device": indices.device}
    out = empty((bags, weight.shape[1]), dtype=weight.dtype, device=weight.device)
    offset2bag = empty((0 if mode == 0 else indices.shape[0],), **long)
    max_indices = empty((bags, weight.shape[1]) if mode == 2 else (bags,), **long)
    return out, offset2bag, empty((bags,), **long), max_indices


def batch_norm_gather_stats_with_counts(input: Tensor, mean: Tensor, invstd: Tensor,
                                        running_mean: Tensor | None,
                                        running_var: Tensor | None, momentum: float,
                                        eps: float, counts: Tensor) -> tuple:
    """Combine per-group batch-norm statistics (``mean``, ``invstd`` of shape (G, C), group
    sizes ``counts``) into the global mean and inverse standard deviation; update the
    running statistics in place (the variance unbiased). CUDA only, as torch's."""
    if input.device.type != "cuda":
        raise NotImplementedError(
            "Could not run 'aten::batch_norm_gather_stats_with_counts' with arguments from "
            f"the '{input.device.type.upper()}' backend.")
    acc = D.float32 if mean.dtype in (D.float16, D.bfloat16) else mean.dtype
    n = counts.to(acc).unsqueeze(1)
    m, s = mean.to(acc), invstd.to(acc)
    total = n.sum(0)
    mu = (n * m).sum(0) / total
    var_g = 1 / (s * s) - eps
    var = (n * (var_g + (m - mu) ** 2)).sum(0) / total
    out_invstd = 1 / (var + eps).sqrt()
    if running_mean is not None:
        running_mean.copy_((1 - momentum) * running_mean + momentum * mu)
    if running_var is not None:
        unbiased = var * total / (total - 1)
        running_var.copy_((1 - momentum) * running_var + momentum * unbiased)
    return mu, out_invstd


def batch_norm_gather_stats(input: Tensor, mean: Tensor, invstd: Tensor,
                            running_mean: Tensor | None, running_var: Tensor | None,
                            momentum: float, eps: float, count: int) -> tuple:
    """``batch_norm_gather_stats_with_counts`` with every group holding ``count``
    elements."""
    from refimpl.ops.factories import full

    if input.device.type != "cuda":
        raise NotImplementedError(
            "Could not run 'aten::batch_norm_gather_stats' with arguments from the "
            f"'{input.device.type.upper()}' backend.")
    counts = full((mean.shape[0],), float(count), dtype=mean.dtype, device=mean.device)
    return batch_norm_gather_stats_with_counts(input, mean, invstd, running_mean, running_var,
                                               momentum, eps, counts)


def _register() -> None:
    from refimpl.library import register_composite

    register_composite("upsample_bilinear2d", ("default",), upsample_bilinear2d)
    register_composite("upsample_bilinear2d", ("vec",), _upsample_bilinear2d_vec)
    register_composite("_adaptive_avg_pool2d_backward", ("default",),
                       adaptive_avg_pool2d_backward)
    register_composite("convolution_backward", ("default",), convolution_backward)
    for name in __all__:
        register_composite(name, ("default",), globals()[name])


__all__ = ["_embedding_bag", "batch_norm_gather_stats", "batch_norm_gather_stats_with_counts"]

_register()
