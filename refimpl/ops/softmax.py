"""softmax and log_softmax along one dim.

``softmax(input, dim, dtype=None)`` is ``exp(x - max) / sum(exp(x - max))`` over
``dim``; ``log_softmax`` is ``x - max - log(sum(exp(x - max)))``. With ``dtype`` the
input is converted first (a ``ToCopyBackward0`` node in autograd, as in torch), then
the op runs in that dtype. Only floating dtypes have kernels: torch's
NotImplementedError names the kernel (``softmax_lastdim_kernel_impl`` when ``dim`` is
the last dim, ``softmax_kernel_impl`` otherwise). float16/bfloat16 compute in float32.
A row holding a NaN, or only ``-inf``, gives NaN, as in torch.

Autograd nodes are torch's ``SoftmaxBackward0``/``LogSoftmaxBackward0``; both save
the result and differentiate through it:
``d softmax = y * (g - sum(g * y))``, ``d log_softmax = g - exp(y) * sum(g)``. Outside
double backward, float32/float64 gradients take one op for the whole formula
(``_softmax_backward_fused``/``_log_softmax_backward_fused``; on CUDA one row kernel,
``refimpl.cuda._softmax_backward``, along a contiguous last dim, else the composed ops).
"""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl._autocast import composite
from refimpl._state import STATE
from refimpl._tensor import Tensor, wrap_dim
from refimpl.ops._helpers import np_result, to_np
from refimpl.ops._registry import TensorSpec, defop
from refimpl.ops.reduction import not_implemented


def _dim(input: Tensor, dim: int) -> int:
    return wrap_dim(dim, input.dim())


def _check(name: str, input: Tensor, dim: int) -> int:
    """The wrapped dim, after torch's dtype check."""
    d = _dim(input, dim)
    if not input.dtype.is_floating_point:
        last = input.dim() == 0 or d == input.dim() - 1
        raise not_implemented(f"{name}_lastdim_kernel_impl" if last else f"{name}_kernel_impl",
                              input)
    return d


def _meta(input, dim) -> TensorSpec:
    _dim(input, dim)
    return TensorSpec(input._shape, input.dtype, input.device)


def _cpu(log: bool):
    name = "log_softmax" if log else "softmax"

    def kernel(input, dim) -> np.ndarray:
        d = _check(name, input, dim)
        arr = to_np(input, input.dtype)
        arr = arr.reshape(arr.shape or (1,))
        with np.errstate(all="ignore"):
            if arr.size == 0:
                return np_result(arr.reshape(input._shape), input.dtype)
            m = np.max(arr, axis=d, keepdims=True)
            shifted = arr - m
            total = np.sum(np.exp(shifted), axis=d, keepdims=True)
            r = shifted - np.log(total) if log else np.exp(shifted) / total
        return np_result(r.reshape(input._shape), input.dtype)
    return kernel


def _cuda(log: bool):
    name = "log_softmax" if log else "softmax"

    def kernel(input, dim) -> Tensor:
        d = _check(name, input, dim)
        return (_CUDA_MODULES or _bind_cuda())[0].softmax(input, d if input.dim() else 0, log)
    return kernel


_CUDA_MODULES = None  # (refimpl.cuda._reduce_softmax, ._softmax_backward), bound on first use


def _bind_cuda() -> tuple:
    global _CUDA_MODULES
    from refimpl.cuda import _reduce_softmax, _softmax_backward

    _CUDA_MODULES = (_reduce_softmax, _softmax_backward)
    return _CUDA_MODULES


def _fusable(y: Tensor, grad: Tensor) -> bool:
    """Whether a derivative takes its one-op kernel: no graph of the backward is built, and
    ``grad`` matches the float32/float64 result ``y`` (dtype, device, shape; at least 1-d)."""
    return (not STATE.grad_enabled and grad.dtype is y.dtype and grad.device == y.device
            and (y.dtype is D.float32 or y.dtype is D.float64) and y.dim() > 0
            and grad.shape == y.shape)


def _softmax_backward(ctx, grad):
    y, dim = ctx.outputs[0], ctx.args[1]
    if _fusable(y, grad):
        return (softmax_backward_fused(grad, y, wrap_dim(dim, y.dim())),)
    return (_softmax_grad(grad, y, dim),)


def _softmax_grad(grad, y, dim):
    return y * (grad - (grad * y).sum(dim, keepdim=True))


def _softmax_jvp(ctx, tangent, *_):
    y, dim = ctx.outputs[0], ctx.args[1]
    return y * (tangent - (tangent * y).sum(dim, keepdim=True))


def _log_softmax_backward(ctx, grad):
    y, dim = ctx.outputs[0], ctx.args[1]
    if _fusable(y, grad):
        return (log_softmax_backward_fused(grad, y, wrap_dim(dim, y.dim())),)
    return (_log_softmax_grad(grad, y, dim),)


def _log_softmax_grad(grad, y, dim):
    return grad - y.exp() * grad.sum(dim, keepdim=True)


def _bw_meta(grad, y, dim) -> TensorSpec:
    return TensorSpec(y._shape, y.dtype, y.device)


def _softmax_bw_cpu(grad, y, dim) -> np.ndarray:
    """``y * (g - sum(g * y))`` over ``dim`` in numpy, in the order of the composed ops."""
    g, ya = grad._np, y._np
    return ya * (g - np.sum(g * ya, axis=dim, keepdims=True))


def _log_softmax_bw_cpu(grad, y, dim) -> np.ndarray:
    """``g - exp(y) * sum(g)`` over ``dim`` in numpy, in the order of the composed ops."""
    g = grad._np
    return g - np.exp(y._np) * np.sum(g, axis=dim, keepdims=True)


def _cuda_formula(formula, log: bool):
    def kernel(grad, y, dim) -> Tensor:
        _softmax_backward = (_CUDA_MODULES or _bind_cuda())[1]
        if _softmax_backward.applies(grad, y, dim):
            return _softmax_backward.backward(grad, y, log)
        from refimpl.autograd.grad_mode import no_grad

        with no_grad():
            return formula(grad, y, dim).contiguous()
    return kernel


softmax_backward_fused = defop(
    "_softmax_backward_fused", meta=_bw_meta, cpu=_softmax_bw_cpu,
    cuda=_cuda_formula(_softmax_grad, False), differentiable=False, extra={"method": False})
log_softmax_backward_fused = defop(
    "_log_softmax_backward_fused", meta=_bw_meta, cpu=_log_softmax_bw_cpu,
    cuda=_cuda_formula(_log_softmax_grad, True), differentiable=False, extra={"method": False})


def _log_softmax_jvp(ctx, tangent, *_):
    y, dim = ctx.outputs[0], ctx.args[1]
    return tangent - (y.exp() * tangent).sum(dim, keepdim=True)


_softmax = defop("softmax", meta=_meta, cpu=_cpu(False), cuda=_cuda(False),
                 backward=_softmax_backward, jvp=_softmax_jvp, saves=("outputs",),
                 extra={"method": False})
_log_softmax = defop("log_softmax", meta=_meta, cpu=_cpu(True), cuda=_cuda(True),
                     backward=_log_softmax_backward, jvp=_log_softmax_jvp,
                     saves=("outputs",), extra={"method": False})


def _converted(input: Tensor, dtype) -> Tensor:
    return input if dtype is None else input.to(D.dtype_from_any(dtype))


@composite("softmax")
def softmax(input: Tensor, dim: int, dtype=None) -> Tensor:
    """Softmax over ``dim``: non-negative values summing to 1 along it; ``dtype``
    converts the input first."""
    return _softmax(_converted(input, dtype), dim)


@composite("log_softmax")
def log_softmax(input: Tensor, dim: int, dtype=None) -> Tensor:
    """``log(softmax(input, dim))`` computed stably; ``dtype`` converts the input
    first."""
    return _log_softmax(_converted(input, dtype), dim)


__all__ = ["log_softmax", "softmax"]
TENSOR_METHODS = ("softmax", "log_softmax")
