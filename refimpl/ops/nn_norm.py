"""Normalisations of ``torch.nn.functional``: ``batch_norm`` (with running-statistics
updates), ``layer_norm``, ``group_norm``, ``rms_norm``, ``instance_norm``,
``local_response_norm`` (spec: NNF-050..NNF-055).

Each is a composition of refimpl ops (mean, var, rsqrt, broadcasting arithmetic), so it
runs on every device, under fake tensors, and through first and second order autograd
and forward mode. float16/bfloat16 inputs are normalised in float32 and rounded back
once, as torch's CPU and CUDA kernels accumulate in float32. Running statistics are
updated in place without recording autograd history, with the unbiased batch variance.
"""

from __future__ import annotations

import math

from refimpl import _dtype as D
from refimpl._autocast import composite
from refimpl._state import FW
from refimpl._tensor import Tensor
from refimpl.cuda import _norm_kernels
from refimpl.ops._pointwise_cuda import run_cuda
from refimpl.ops.nn_layer_norm_kernel import layer_norm_fused
from refimpl.ops.nn_layer_norm_kernel import use_fused as use_fused_ln
from refimpl.ops.nn_loss import _not_differentiable
from refimpl.ops.nn_norm_kernel import (
    batch_norm_fused,
    update_running_np,
    update_running_ops,
    use_fused,
)
from refimpl.ops.reduction_stats import var_mean
from refimpl.optim._cpu_update import plain as cpu_plain

_REDUCED = (D.float16, D.bfloat16)


def _upcast(x: Tensor) -> Tensor:
    return x.float() if x.dtype in _REDUCED else x


def _affine(out: Tensor, weight, bias, shape) -> Tensor:
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def _check_floating(input: Tensor, kernel: str) -> None:
    if input.dtype.category != 2:
        raise NotImplementedError(f'"{kernel}" not implemented for \'{input.dtype._legacy}\'')


def _check_channels(name: str, t, c: int) -> None:
    if t is not None and t.numel() != c:
        raise RuntimeError(f"{name} should contain {c} elements not {t.numel()}")


@composite("batch_norm")
def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None,
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise over every dim but the channels (dim 1): with the batch statistics when
    ``training`` (and then update ``running_mean``/``running_var`` in place with
    ``momentum``, the variance unbiased), else with the running statistics (spec NNF-050)."""
    ndim = len(input._shape)
    c = input._shape[1] if ndim > 1 else 0
    numel = math.prod(input._shape)
    if training:
        size = numel // c if c else 0
        if size == 1:
            raise ValueError("Expected more than 1 value per channel when training, got input "
                             f"size {input.shape}")
    elif running_mean is None or running_var is None:
        which = "running_mean" if running_mean is None else "running_var"
        raise RuntimeError(f"{which} must be defined in evaluation mode")
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and math.prod(t._shape) != c:
            raise RuntimeError(f"{name} should contain {c} elements not {t.numel()}")
    _check_floating(input, "batch_norm")
    if _requires_grad(running_mean) or _requires_grad(running_var):
        for name, t in (("running_mean", running_mean), ("running_var", running_var)):
            _not_differentiable("native_batch_norm", name, t)
    if numel == 0:
        return input.clone()
    if use_fused(input, weight, bias):
        dev = input.device
        if _on(running_mean, dev) and _on(running_var, dev):
            return _batch_norm_fused(input, running_mean, running_var, weight, bias,
                                     training, momentum, eps)
    dims = [d for d in range(ndim) if d != 1]
    shape = [1] * ndim
    shape[1] = c
    x = _upcast(input)
    if training:
        var, mean = var_mean(x, dims, correction=0)
        if running_mean is not None or running_var is not None:
            _update_running(running_mean, running_var, mean, var, momentum,
                            x.numel() // max(c, 1))
    else:
        mean, var = running_mean.to(x.dtype), running_var.to(x.dtype)
    out = (x - mean.reshape(shape)) * (var.reshape(shape) + eps).rsqrt()
    return _affine(out, weight, bias, shape).to(input.dtype)


def _requires_grad(t: Tensor | None) -> bool:
    """``t.requires_grad`` (False for None), from the fields when ``t`` is not a view."""
    if t is None:
        return False
    return t._rg or t._gfn is not None if t._view_meta is None else t.requires_grad


def _on(t: Tensor | None, dev) -> bool:
    """Whether ``t`` is None or on ``dev`` (tensors of one device mostly share its object)."""
    if t is None:
        return True
    d = t.device  # (a fake tensor's device is not its storage's)
    return d is dev or d == dev


def _batch_norm_fused(input, running_mean, running_var, weight, bias, training: bool,
                      momentum: float, eps: float) -> Tensor:
    """``batch_norm`` through the one-op kernel (``nn_norm_kernel``)."""
    if training:
        if _op_takes_running(input, running_mean, running_var):
            # the op updates them in place and saves them, as torch's native_batch_norm
            return batch_norm_fused(input, weight, bias, running_mean, running_var, True,
                                    eps, momentum)[0]
        out, mean, var = batch_norm_fused(input, weight, bias, None, None, True, eps)
        if running_mean is not None or running_var is not None:
            _update_running(running_mean, running_var, mean, var, momentum,
                            input.numel() // input.shape[1])
        return out
    dt = input.dtype
    return batch_norm_fused(input, weight, bias, running_mean.to(dt), running_var.to(dt),
                            False, eps)[0]


def _op_takes_running(input, running_mean, running_var) -> bool:
    """Whether the fused op can update the running statistics itself: both given, plain
    contiguous tensors of the input's dtype and device, not requiring grad, and not
    inference tensors (any other case keeps the update below, after the op)."""
    if running_mean is None or running_var is None or type(input) is not Tensor:
        return False
    dev, dt = input._storage.device, input.dtype
    for t in (running_mean, running_var):
        if (type(t) is not Tensor or t.dtype is not dt
                or (t._storage.device is not dev and t._storage.device != dev)
                or t._rg or t._gfn is not None or t._is_inference
                or t._conj_bit or t._neg_bit
                or not t.is_contiguous()):
            return False
    return True


def _update_running(running_mean, running_var, mean, var, momentum, n: int) -> None:
    if running_mean is not None and running_var is not None:
        # the one-pass updates (numpy in place, one CUDA launch) record nothing
        kind = running_mean._storage.device.type
        if kind == "cpu":
            if cpu_plain(running_mean, running_var, mean, var, inside_op=True):
                update_running_np(running_mean._np, running_var._np, mean._np, var._np,
                                  momentum, n)
                return
        elif kind == "cuda" and _norm_kernels.update_running(
                running_mean, running_var, mean, var, momentum, n):
            return
    update_running_ops(running_mean, running_var, mean, var, momentum, n)


_DISPATCH = None  # refimpl._dispatch, bound on first use (it imports the ops)


def _dispatcher():
    global _DISPATCH
    from refimpl import _dispatch

    _DISPATCH = _dispatch
    return _dispatch


def count_batch(counter: Tensor) -> None:
    """``counter.add_(1)`` (batch norm's ``num_batches_tracked``), on the CPU tensor's numpy
    view when no dispatch mode, profiler or forward-AD level watches the ops."""
    dispatch = _DISPATCH or _dispatcher()
    if (type(counter) is Tensor and not counter.requires_grad and not counter._is_inference
            and not dispatch.MODE_STACK and dispatch.PROFILE_LAYER is None
            and not FW.active):
        kind = counter._storage.device.type
        if kind == "cpu":
            arr = counter._np
            arr += 1
            counter._version_counter.version += 1
            return
        if kind == "cuda":  # one elementwise launch written into the counter
            run_cuda("a + 1", (counter,), counter.dtype, counter.dtype, None, counter._shape,
                     counter, "add")
            counter._version_counter.version += 1
            return
    counter.add_(1)


def _check_normalized(input: Tensor, normalized_shape, weight, bias, sep: str) -> list:
    shape = [int(s) for s in ((normalized_shape,) if isinstance(normalized_shape, int)
                              else normalized_shape)]
    n = len(shape)
    if n == 0:
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., "
                           "containing at least one element, but got normalized_shape = []")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and list(t.shape) != shape:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but "
                               f"got {name} of shape {list(t.shape)} and normalized_shape = "
                               f"{shape}")
    if input.dim() < n or list(input.shape[input.dim() - n:]) != shape:
        raise RuntimeError(f"Given normalized_shape={shape}, expected input with shape "
                           f"[*{sep}{', '.join(map(str, shape))}], but got input of size"
                           f"{list(input.shape)}")
    return list(range(-n, 0))


@composite("layer_norm")
def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise over the trailing ``normalized_shape`` dims, then scale and shift
    elementwise (spec NNF-051)."""
    dims = _check_normalized(input, normalized_shape, weight, bias, ", ")
    _check_floating(input, "LayerNormKernelImpl")
    if use_fused_ln(input, weight, bias):
        return layer_norm_fused(input, weight, bias, len(dims), eps)[0]
    x = _upcast(input)
    var, mean = var_mean(x, dims, correction=0, keepdim=True)
    out = (x - mean) * (var + eps).rsqrt()
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out.to(input.dtype)


def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """``x / sqrt(mean(x**2) + eps) * weight`` over the trailing dims; ``eps`` defaults
    to the machine epsilon of the dtype it computes in (spec NNF-052)."""
    dims = _check_normalized(input, normalized_shape, weight, None, "")
    _check_floating(input, "rms_norm")
    x = _upcast(input)
    if eps is None:  # the epsilon of the dtype computed in (float32 for float16/bfloat16)
        import ml_dtypes

        eps = float(ml_dtypes.finfo(x.dtype.np).eps)
    out = x * ((x * x).mean(dims, keepdim=True) + eps).rsqrt()
    if weight is not None:
        out = out * weight
    return out.to(input.dtype)


@composite("group_norm")
def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise each of ``num_groups`` channel groups of every sample, then scale and
    shift per channel (spec NNF-053)."""
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{input.dim()}")
    n, c = input.shape[0], input.shape[1]
    if c % num_groups:
        raise RuntimeError("Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {list(input.shape)} and "
                           f"num_groups={num_groups}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.dim() != 1 or t.numel() != c):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number "
                               f"of channels in input, but got {name} of shape "
                               f"{list(t.shape)} and input of shape {list(input.shape)}")
    _check_floating(input, "GroupNormKernelImpl")
    x = _upcast(input)
    g = x.reshape(n, num_groups, x.numel() // max(n * num_groups, 1))
    var, mean = var_mean(g, -1, correction=0, keepdim=True)
    shape = [1] * input.dim()
    shape[1] = c
    if input.is_cuda and input.dtype in _REDUCED:
        return _group_norm_cuda_reduced(input, x, g, mean, var, weight, bias, eps, shape)
    out = ((g - mean) * (var + eps).rsqrt()).reshape(input.shape)
    return _affine(out, weight, bias, shape).to(input.dtype)


def _group_norm_cuda_reduced(input, x, g, mean, var, weight, bias, eps, shape) -> Tensor:
    """torch's CUDA group norm of float16/bfloat16: the statistics are computed in float32
    but kept in the input's type (its mean and rstd outputs) unless the weight or bias is
    float32, so both are rounded to it before use; with a weight or bias and more than
    one element per channel the output is ``a * x + b`` with ``a = rstd * weight`` and
    ``b = bias - a * mean`` per channel."""
    dt = input.dtype
    n, groups = g.shape[0], g.shape[1]
    rstd = (var + eps).rsqrt()
    if all(p is None or p.dtype is dt for p in (weight, bias)):  # float32 params: float stats
        mean, rstd = mean.to(dt).float(), rstd.to(dt).float()
    spatial = x.numel() // max(n * shape[1], 1)
    if (weight is None and bias is None) or spatial == 1:
        out = ((g - mean) * rstd).reshape(input.shape)
        return _affine(out, None if weight is None else weight.float(),
                       None if bias is None else bias.float(), shape).to(dt)
    per = shape[1] // groups  # channels per group
    mean_c = mean.reshape(n, groups, 1).expand(n, groups, per).reshape(n, shape[1])
    rstd_c = rstd.reshape(n, groups, 1).expand(n, groups, per).reshape(n, shape[1])
    a = rstd_c if weight is None else rstd_c * weight.float()
    b = -a * mean_c
    if bias is not None:
        b = b + bias.float()
    cshape = [n, shape[1]] + [1] * (input.dim() - 2)
    return (a.reshape(cshape) * x + b.reshape(cshape)).to(dt)


def instance_norm(input: Tensor, running_mean: Tensor | None = None,
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise every (sample, channel) over its spatial dims; running statistics (the
    mean over the batch) are updated as batch_norm's (spec NNF-054)."""
    if input.dim() < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.dim()} "
                         "dimensions)")
    if use_input_stats:
        spatial = 1
        for s in input.shape[2:]:
            spatial *= s
        if spatial == 1:
            raise ValueError("Expected more than 1 spatial element when training, got input "
                             f"size {input.shape}")
    elif running_mean is None or running_var is None:
        which = "running_mean" if running_mean is None else "running_var"
        raise RuntimeError(f"Expected {which} to be defined when use_input_stats is false")
    _check_floating(input, "batch_norm")
    c = input.shape[1]
    shape = [1] * input.dim()
    shape[1] = c
    x = _upcast(input)
    dims = list(range(2, input.dim()))
    if use_input_stats:
        var, mean = var_mean(x, dims, correction=0, keepdim=True)
        if running_mean is not None or running_var is not None:
            n = x.numel() // (x.shape[0] * c)
            _update_running(running_mean, running_var, mean.mean(0).flatten(),
                            var.mean(0).flatten(), momentum, n)
    else:
        mean = running_mean.to(x.dtype).reshape(shape)
        var = running_var.to(x.dtype).reshape(shape)
    out = (x - mean) * (var + eps).rsqrt()
    return _affine(out, weight, bias, shape).to(input.dtype)


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0) -> Tensor:
    """Divide by ``(k + alpha * mean of squares over size neighbouring channels) ** beta``
    (the channel window zero-padded, always divided by ``size``) (spec NNF-055)."""
    from refimpl.ops.nn_shape import pad, windows

    if input.dim() < 3:
        raise ValueError("Expected 3D or higher dimensionality                          "
                         f"input (got {input.dim()} dimensions)")
    if input.numel() == 0:
        return input
    sq = (input * input).movedim(1, -1)
    sq = pad(sq, (size // 2, (size - 1) // 2))
    total = windows(sq, [size], [1], [1], sq.dim() - 1).sum(-1)
    # the channel average is an avg_pool in torch: integer inputs divide with truncation
    div = total.div(size, rounding_mode="trunc") if total.dtype.category < 2 else total / size
    div = (div.movedim(-1, 1) * alpha + k).pow(beta)
    return input / div


__all__: list = []
