"""Pointwise activations of ``torch.nn.functional`` that are ops of their own (spec:
NNF-010..NNF-012): ``elu`` (torch's one kernel behind elu, selu and celu, with
``scale`` and ``input_scale``), ``leaky_relu``, ``hardsigmoid``, ``hardswish``, ``mish``,
``hardshrink``, ``softshrink``.

Each is one ``defop``: a numpy CPU kernel, a CUDA C expression compiled by the
pointwise generator, a backward written in refimpl ops (so double backward works) and
a jvp. Activations that are short compositions of existing ops (logsigmoid,
softsign, tanhshrink, ...) live in ``refimpl.nn.functional``.
"""

from __future__ import annotations

import numpy as np

from refimpl.ops._pointwise import FLOATING, Unary, cuda_fields, inplace
from refimpl.ops._registry import defop
from refimpl.ops.elementwise_binary import where


def _arg(ctx, i: int, name: str, default):
    """A scalar argument of the op call by position or keyword."""
    if len(ctx.args) > i:
        return ctx.args[i]
    return ctx.kwargs.get(name, default)


def _c(v, x: np.ndarray) -> np.ndarray:
    return np.asarray(v).astype(x.dtype)


def _params(dtype, **values) -> dict:
    return {k: (v, dtype) for k, v in values.items()}


# -- elu (elu / selu / celu) -----------------------------------------------------------------------

def _elu(x, alpha=1.0, scale=1.0, input_scale=1.0):
    neg = np.expm1(x * _c(input_scale, x)) * _c(alpha * scale, x)
    return np.where(x > 0, x * _c(scale, x), neg)


def _elu_grad(ctx):
    x = ctx.args[0]
    alpha, scale = _arg(ctx, 1, "alpha", 1.0), _arg(ctx, 2, "scale", 1.0)
    input_scale = _arg(ctx, 3, "input_scale", 1.0)
    neg = (x * input_scale).exp() * (alpha * scale * input_scale)
    return where(x > 0, scale, neg)


_elu_impl = Unary(
    _elu, result="same", allow=FLOATING, kernel="elu_cpu", name="elu",
    cuda=lambda dtype, x, alpha=1.0, scale=1.0, input_scale=1.0: (
        "a > 0 ? a * sc : (exp(a * isc) - 1) * (al * sc)",
        _params(dtype, al=alpha, sc=scale, isc=input_scale)))
elu = defop("elu", meta=_elu_impl.meta, cpu=_elu_impl.cpu,
            backward=lambda ctx, g: (g * _elu_grad(ctx),),
            jvp=lambda ctx, t, *_: t * _elu_grad(ctx),
            **cuda_fields(_elu_impl, {"method": False}))
elu_ = inplace(elu)

# -- leaky_relu ------------------------------------------------------------------------------------


def _leaky(x, negative_slope=0.01):
    return np.where(x > 0, x, x * _c(negative_slope, x))


def _leaky_grad(ctx, g):
    slope = _arg(ctx, 1, "negative_slope", 0.01)
    return where(ctx.args[0] > 0, g, g * slope)


_leaky_impl = Unary(
    _leaky, result="same", allow=FLOATING, kernel="leaky_relu_cpu", name="leaky_relu",
    cuda=lambda dtype, x, negative_slope=0.01: ("a > 0 ? a : a * sl",
                                                _params(dtype, sl=negative_slope)))
leaky_relu = defop("leaky_relu", meta=_leaky_impl.meta, cpu=_leaky_impl.cpu,
                   backward=lambda ctx, g: (_leaky_grad(ctx, g),),
                   jvp=lambda ctx, t, *_: _leaky_grad(ctx, t),
                   **cuda_fields(_leaky_impl, {"method": False}))
leaky_relu_ = inplace(leaky_relu)

# -- hardsigmoid / hardswish -----------------------------------------------------------------------

# torch's hardsigmoid_backward multiplies by 1/6 rounded to float32, for every dtype (and
# so do its CUDA forward kernels of hardsigmoid and hardswish; its CPU ones divide by 6)
_ONE_SIXTH = float(np.float32(1.0 / 6.0))


def _hardsigmoid(x):
    return np.minimum(np.maximum(x + _c(3, x), _c(0, x)), _c(6, x)) / _c(6, x)


_hardsigmoid_impl = Unary(
    _hardsigmoid, result="same", allow=FLOATING, kernel="hardsigmoid_cpu", name="hardsigmoid",
    cuda="r_minimum(r_maximum(a + 3, decltype(a)(0)), decltype(a)(6)) * (decltype(a))(1.0f / 6)")
hardsigmoid = defop(
    "hardsigmoid", meta=_hardsigmoid_impl.meta, cpu=_hardsigmoid_impl.cpu,
    backward=lambda ctx, g: (where((ctx.args[0] > -3).logical_and(ctx.args[0] < 3),
                                   g * _ONE_SIXTH, 0),),
    jvp=lambda ctx, t: where((ctx.args[0] > -3).logical_and(ctx.args[0] < 3), t * _ONE_SIXTH, 0),
    **cuda_fields(_hardsigmoid_impl, {"method": False}))
hardsigmoid_ = inplace(hardsigmoid)


def _hardswish(x):
    return x * np.minimum(np.maximum(x + _c(3, x), _c(0, x)), _c(6, x)) / _c(6, x)


def _hardswish_grad(x, g):
    if x.is_cuda:  # torch's CUDA kernel puts both kinks on the outer side
        return where(x <= -3, 0, where(x < 3, g * (x / 3 + 0.5), g))
    return where(x < -3, 0, where(x <= 3, g * (x / 3 + 0.5), g))


_hardswish_impl = Unary(
    _hardswish, result="same", allow=FLOATING, kernel="hardswish_cpu", name="hardswish",
    cuda="a * r_minimum(r_maximum(a + 3, decltype(a)(0)), decltype(a)(6)) * "
         "(decltype(a))(1.0f / 6)")
hardswish = defop("hardswish", meta=_hardswish_impl.meta, cpu=_hardswish_impl.cpu,
                  backward=lambda ctx, g: (_hardswish_grad(ctx.args[0], g),),
                  jvp=lambda ctx, t: _hardswish_grad(ctx.args[0], t),
                  **cuda_fields(_hardswish_impl, {"method": False}))
hardswish_ = inplace(hardswish)

# -- mish ---------------------------------------------------------------------------------------


def _mish_grad(x):
    ts = x.exp().log1p().tanh()
    return ts + x * x.sigmoid() * (1 - ts * ts)


_mish_impl = Unary(lambda x: x * np.tanh(np.log1p(np.exp(x))), result="same", allow=FLOATING,
                   kernel="mish_cpu", name="mish", cuda="a * tanh(log1p(exp(a)))")
mish = defop("mish", meta=_mish_impl.meta, cpu=_mish_impl.cpu,
             backward=lambda ctx, g: (g * _mish_grad(ctx.args[0]),),
             jvp=lambda ctx, t: t * _mish_grad(ctx.args[0]),
             **cuda_fields(_mish_impl, {"method": False}))
mish_ = inplace(mish)

# -- hardshrink / softshrink -----------------------------------------------------------------------


def _hardshrink(x, lambd=0.5):
    return np.where((x >= -_c(lambd, x)) & (x <= _c(lambd, x)), _c(0, x), x)


def _shrink_mask(ctx):
    x, lambd = ctx.args[0], _arg(ctx, 1, "lambd", 0.5)
    return (x >= -lambd).logical_and(x <= lambd)


_hardshrink_impl = Unary(
    _hardshrink, result="same", allow=FLOATING, kernel="hardshrink_cpu", name="hardshrink",
    cuda=lambda dtype, x, lambd=0.5: ("(a >= -l && a <= l) ? decltype(a)(0) : a",
                                      _params(dtype, l=lambd)))
hardshrink = defop("hardshrink", meta=_hardshrink_impl.meta, cpu=_hardshrink_impl.cpu,
                   backward=lambda ctx, g: (where(_shrink_mask(ctx), 0, g),),
                   jvp=lambda ctx, t, *_: where(_shrink_mask(ctx), 0, t),
                   **cuda_fields(_hardshrink_impl))


def _softshrink_check(x, lambd=0.5) -> None:
    import ml_dtypes

    if x.dtype not in FLOATING:
        raise NotImplementedError(f'"softshrink_check" not implemented for '
                                  f"'{x.dtype._legacy}'")
    top = float(ml_dtypes.finfo(x.dtype.np).max)
    if not 0 <= lambd <= top:
        raise RuntimeError(f"lambda must be in range [0, {top:g}] for input dtype "
                           f"{x.dtype._legacy}, but found {float(lambd):g}")


def _softshrink(x, lambd=0.5):
    lam = _c(lambd, x)
    return np.where(x > lam, x - lam, np.where(x < -lam, x + lam, _c(0, x)))


_softshrink_impl = Unary(
    _softshrink, result="same", allow=FLOATING, kernel="softshrink_check", name="softshrink",
    check=_softshrink_check,
    cuda=lambda dtype, x, lambd=0.5: ("a > l ? a - l : (a < -l ? a + l : decltype(a)(0))",
                                      _params(dtype, l=lambd)))
softshrink = defop("softshrink", meta=_softshrink_impl.meta, cpu=_softshrink_impl.cpu,
                   backward=lambda ctx, g: (where(_shrink_mask(ctx), 0, g),),
                   jvp=lambda ctx, t, *_: where(_shrink_mask(ctx), 0, t),
                   **cuda_fields(_softshrink_impl, {"method": False}))

__all__ = ["hardshrink"]


# -- gelu's backward as one op -----------------------------------------------------------------------

def _gelu_bw_meta(grad, self, approximate="none"):
    from refimpl.ops._registry import TensorSpec

    return TensorSpec(tuple(grad.shape), grad.dtype, grad.device)


def _gelu_bw_cpu(grad, self, approximate="none"):
    """``grad * gelu'(x)`` in numpy, in the dtype and order of ``_gelu_grad``'s ops."""
    from refimpl.ops import _cpu_gelu, _special
    from refimpl.ops.activation import _INV_SQRT_2PI, _SQRT_2, _SQRT_2_OVER_PI

    x, g = self._np, grad._np
    t = x.dtype.type
    if approximate == "tanh":
        inner = (x + x * x * x * t(0.044715)) * t(_SQRT_2_OVER_PI)
        th = np.tanh(inner)
        dinner = (x * x * t(3 * 0.044715) + t(1)) * t(_SQRT_2_OVER_PI)
        d = (th + t(1)) * t(0.5) + x * t(0.5) * (t(1) - th * th) * dinner
    elif x.dtype == np.float32 and x.ndim and _cpu_gelu.finite(x):
        d = _cpu_gelu.gelu_slope(x)
    else:
        cdf = (_special.erf(x / t(_SQRT_2)).astype(x.dtype) + t(1)) * t(0.5)
        pdf = np.exp(x * x * t(-0.5)) * t(_INV_SQRT_2PI)
        d = cdf + x * pdf
    return g * d


def _gelu_bw_cuda(grad, self, approximate="none"):
    """One elementwise kernel: ``grad * gelu'(x)`` in the compute type of the dtype."""
    from refimpl.ops._pointwise_cuda import run_cuda

    expr = "r_gelu_tanh_bw(a, b)" if approximate == "tanh" else "r_gelu_bw(a, b)"
    return run_cuda(expr, (grad, self), grad.dtype, grad.dtype, None, tuple(grad.shape),
                    None, "gelu_backward")


gelu_backward_fused = defop("_gelu_backward_fused", meta=_gelu_bw_meta, cpu=_gelu_bw_cpu,
                            cuda=_gelu_bw_cuda, differentiable=False, extra={"method": False})


def gelu_backward(ctx, grad):
    """gelu's derivative rule: one ``_gelu_backward_fused`` call for float32/float64
    tensors of one device when no graph of the backward is built, else the formula in
    refimpl ops (double backward)."""
    from refimpl import _dtype as D
    from refimpl._state import STATE
    from refimpl.ops.activation import _gelu_grad

    x = ctx.args[0]
    approximate = ctx.kwargs.get("approximate", "none") if len(ctx.args) < 2 else ctx.args[1]
    if not STATE.grad_enabled and x.dtype is grad.dtype and x.device == grad.device \
            and (x.dtype is D.float32 or x.dtype is D.float64) \
            and x.device.type in ("cpu", "cuda") and x.shape == grad.shape:
        return (gelu_backward_fused(grad, x, approximate),)
    return (grad * _gelu_grad(x, approximate),)
