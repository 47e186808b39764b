"""Activation functions: relu, threshold, logit, gelu, silu, softplus, hardtanh
(spec: TENSOR-110, TENSOR-311).

``relu``, ``threshold`` and ``logit`` are in torch's namespace and Tensor methods;
``gelu``, ``silu``, ``softplus`` and ``hardtanh`` live in ``torch.nn.functional``
and are defined here (not exported at the top level) for a functional module to
re-export.
"""

from __future__ import annotations

import math

import numpy as np

from refimpl import _dtype as D
from refimpl.ops import _cpu_gelu, _special
from refimpl.ops._pointwise import (
    FLOATING,
    INEXACT,
    REAL,
    Unary,
    binary_meta,
    checked_scalar,
    conj,
    cuda_fields,
    finish,
    fit,
    inplace,
    mark_pointwise,
    operand,
    run_cuda,
)
from refimpl.ops._registry import TensorSpec, defop
from refimpl.ops.elementwise_binary import where
from refimpl.ops.factories import zeros_like

_SQRT_2 = math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _arg(dtype: D.dtype) -> D.dtype:
    """The type torch converts scalar arguments to: float for float16/bfloat16."""
    return D.float32 if dtype in (D.float16, D.bfloat16) else dtype


def _const(v, x: np.ndarray) -> np.ndarray:
    return np.asarray(v).astype(x.dtype)


# -- the backward ops ---------------------------------------------------------------------------
# relu/threshold, sigmoid and tanh differentiate through ops of their own (as torch's
# threshold_backward, sigmoid_backward, tanh_backward), so that double backward records
# torch's nodes (ThresholdBackwardBackward0, ...).


def _pair_meta(grad_output, other, *_) -> TensorSpec:
    return binary_meta(grad_output, other)._replace(dtype=grad_output.dtype)


_BITS = {np.dtype(np.float32): np.int32, np.dtype(np.float64): np.int64}


def _threshold_backward_cpu(grad_output, self, threshold):
    shape = _pair_meta(grad_output, self).shape
    g, x = grad_output._np, operand(self, self.dtype)
    bits = _BITS.get(g.dtype)
    if bits is not None and g.ndim and x.dtype == g.dtype and x.shape == g.shape == tuple(shape):
        # the gradient's bits kept where x > threshold (or NaN), cleared elsewhere: one
        # AND with an all-ones/all-zeros mask, much cheaper than a select in numpy
        keep = np.subtract(np.less_equal(x, _const(threshold, x)).view(np.int8), 1,
                           dtype=bits)
        keep &= g.view(bits)
        return keep.view(g.dtype)
    with np.errstate(all="ignore"):
        r = np.where(x <= _const(threshold, x), np.zeros((), g.dtype), g)
    return finish(r, grad_output.dtype, shape)


def _threshold_backward_cuda(grad_output, self, threshold):
    # one shape (relu's backward): nothing to broadcast, and the kernel checks the devices
    shape = grad_output._shape if grad_output._shape == self._shape else \
        _pair_meta(grad_output, self).shape
    return run_cuda("b <= thr ? Cvt<decltype(a)>::f(0) : a", (grad_output, self),
                    grad_output.dtype, (grad_output.dtype, self.dtype),
                    {"thr": (threshold, self.dtype)}, shape, None, "threshold_backward")


def _threshold_backward_backward(ctx, gg):
    _, self, threshold = ctx.args
    return threshold_backward(gg, self, threshold), zeros_like(self), None


threshold_backward = defop(
    "threshold_backward", meta=_pair_meta, cpu=_threshold_backward_cpu,
    cuda=_threshold_backward_cuda,
    backward=_threshold_backward_backward,
    jvp=lambda ctx, tg, *_: threshold_backward(tg, ctx.args[1], ctx.args[2]),
    extra={"method": False})


def _output_backward(name: str, factor, d_factor, cuda: str):
    """``grad_output * conj(factor(output))`` and its derivatives (holomorphic factor);
    ``cuda`` is the same product over ``a`` (grad_output) and ``b`` (output)."""

    def cpu(grad_output, output):
        shape = _pair_meta(grad_output, output).shape
        dtype = grad_output.dtype
        g, y = operand(grad_output, dtype), operand(output, dtype)
        with np.errstate(all="ignore"):
            return finish(g * np.conj(factor(y)), dtype, shape)

    def backward(ctx, gg):
        g, y = ctx.args
        return op(gg, y.conj()), gg.conj() * g * d_factor(y).conj()

    def on_cuda(grad_output, output):
        spec = _pair_meta(grad_output, output)
        return run_cuda(cuda, (grad_output, output), spec.dtype, spec.dtype, None, spec.shape,
                        None, name)

    op = defop(name, meta=_pair_meta, cpu=cpu, backward=backward, cuda=on_cuda,
               jvp=lambda ctx, tg, ty=None: _output_jvp(ctx, tg, ty, op, d_factor),
               extra={"method": False})
    return op


def _output_jvp(ctx, tg, ty, op, d_factor):
    g, y = ctx.args
    parts = [] if tg is None else [op(tg, y)]
    if ty is not None:
        parts.append(g * (ty * d_factor(y)).conj())
    return parts[0] if len(parts) == 1 else (parts[0] + parts[1] if parts else None)


sigmoid_backward = _output_backward("sigmoid_backward", lambda y: y * (1 - y),
                                    lambda y: 1 - 2 * y, "a * r_conj(b * (1 - b))")
tanh_backward = _output_backward("tanh_backward", lambda y: 1 - y * y, lambda y: -2 * y,
                                 "a * r_conj(1 - b * b)")

# -- relu / threshold ---------------------------------------------------------------------------


def _relu_check(x, **_) -> None:
    if x.dtype is D.bool_:
        raise RuntimeError("Boolean inputs not supported for relu")
    if x.dtype.category == 3:
        raise NotImplementedError("clamp is not supported for complex types")


_ROW = 1024
_ZERO_ROWS: dict = {}  # numpy dtype -> _ROW zeros


def _relu_np(x: np.ndarray) -> np.ndarray:
    """``max(x, 0)``. numpy takes a scalar loop for a zero-dimensional operand, about
    twice as slow as its vector loop over two rows, so a large contiguous float array is
    split into rows of ``_ROW`` elements, each against one row of zeros (same results)."""
    n = x.size
    if n < 4 * _ROW or x.dtype.kind != "f" or not x.flags.c_contiguous:
        return np.maximum(x, np.zeros((), x.dtype))
    zeros = _ZERO_ROWS.get(x.dtype)
    if zeros is None:
        zeros = _ZERO_ROWS[x.dtype] = np.zeros(_ROW, x.dtype)
    out = np.empty_like(x)
    flat, into = x.reshape(-1), out.reshape(-1)
    full = n - n % _ROW
    np.maximum(flat[:full].reshape(-1, _ROW), zeros, out=into[:full].reshape(-1, _ROW))
    if full < n:
        np.maximum(flat[full:], zeros[:n - full], out=into[full:])
    return out


_relu_impl = Unary(_relu_np, result="same",
                   check=_relu_check, cuda="r_maximum(a, decltype(a)(0))", name="relu")
relu = defop("relu", meta=_relu_impl.meta, cpu=_relu_impl.cpu,
             backward=lambda ctx, g: (threshold_backward(g, ctx.outputs[0], 0),),
             jvp=lambda ctx, t: where(ctx.outputs[0] <= 0, 0, t), saves=("outputs",),
             **cuda_fields(_relu_impl))
relu_ = inplace(relu)


def _threshold(x, threshold, value):
    return np.where(x <= _const(threshold, x), _const(value, x), x)


class _Scalars(Unary):
    """A unary op whose scalar arguments are converted with torch's overflow check."""

    def _checked(self, x, args, kwargs) -> tuple:
        self.prepare(x, args, kwargs)  # torch checks the arguments before converting them
        dt = _arg(x.dtype)
        args = tuple(checked_scalar(a, dt) if a is not None else None for a in args)
        kwargs = {k: checked_scalar(v, dt) if isinstance(v, (int, float, complex)) else v
                  for k, v in kwargs.items()}
        return args, kwargs

    def cpu(self, x, *args, **kwargs):
        args, kwargs = self._checked(x, args, kwargs)
        return Unary.cpu(self, x, *args, **kwargs)

    def cuda_into(self, into, x, *args, **kwargs):
        args, kwargs = self._checked(x, args, kwargs)
        return Unary.cuda_into(self, into, x, *args, **kwargs)


def _threshold_cuda(dtype, x, threshold, value):
    return "a <= th ? val : a", {"th": (threshold, dtype), "val": (value, dtype)}


_threshold_impl = _Scalars(_threshold, result="same", allow=REAL - {D.bool_},
                           kernel="threshold_cpu", cuda=_threshold_cuda, name="threshold")
threshold = defop(
    "threshold", meta=_threshold_impl.meta, cpu=_threshold_impl.cpu,
    backward=lambda ctx, g: (threshold_backward(g, ctx.args[0], ctx.args[1]),),
    jvp=lambda ctx, t, *_: threshold_backward(t, ctx.args[0], ctx.args[1]),
    **cuda_fields(_threshold_impl, {"method": False}))
threshold_ = inplace(threshold)

# -- logit ----------------------------------------------------------------------------------------


def _logit(x, eps=None):
    if eps is not None:  # torch's order of tests, also for eps > 0.5
        lo = _const(eps, x)
        hi = 1 - lo
        x = np.where(x < lo, lo, np.where(x > hi, hi, x))
    return np.log(x / (1 - x))


def _logit_backward(ctx, g):
    x = ctx.args[0]
    eps = ctx.args[1] if len(ctx.args) > 1 else ctx.kwargs.get("eps")
    d = g / (x * (1 - x))
    if eps is None:
        return (where((x < 0).logical_or(x > 1), float("nan"), d),)
    return (where((x < eps).logical_or(x > 1 - eps), 0, d),)


def _logit_cuda(dtype, x, eps=None):
    if eps is None:
        return "log(a / (1 - a))", None
    return "r_logit(a, eps, true)", {"eps": (eps, dtype)}


_logit_impl = Unary(_logit, result="float", allow=REAL, kernel="logit_cpu", cuda=_logit_cuda,
                    name="logit")
logit = defop("logit", meta=_logit_impl.meta, cpu=_logit_impl.cpu, backward=_logit_backward,
              jvp=lambda ctx, t, *_: fit(_logit_backward(ctx, t)[0], ctx.outputs[0]),
              **cuda_fields(_logit_impl))
logit_ = inplace(logit)

# -- gelu / silu / softplus / hardtanh -------------------------------------------------------------


def _gelu_check(x, approximate: str = "none") -> None:
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")


def _gelu(x, approximate="none"):
    if approximate == "tanh":
        inner = _SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1 + np.tanh(inner))
    if x.dtype == np.float32 and x.ndim and _cpu_gelu.finite(x):
        return x * _cpu_gelu.normal_cdf(x)
    x64 = x.astype(np.float64)
    return (0.5 * x64 * (1 + _special.erf(x64 / _SQRT_2))).astype(x.dtype)


def _nn_activation():
    from refimpl.ops import nn_activation

    return nn_activation


def _gelu_grad(x, approximate):
    if approximate == "tanh":
        inner = (x + x * x * x * 0.044715) * _SQRT_2_OVER_PI
        th = inner.tanh()
        dinner = (x * x * (3 * 0.044715) + 1) * _SQRT_2_OVER_PI
        return (th + 1) * 0.5 + x * 0.5 * (1 - th * th) * dinner
    cdf = ((x / _SQRT_2).erf() + 1) * 0.5
    pdf = (x * x * -0.5).exp() * _INV_SQRT_2PI
    return cdf + x * pdf


_gelu_impl = Unary(_gelu, result="same", allow=FLOATING, kernel="GeluKernelImpl",
                   check=_gelu_check, name="gelu",
                   cuda=lambda dtype, x, approximate="none": (
                       "r_gelu_tanh(a)" if approximate == "tanh" else "r_gelu(a)", None))
gelu = defop(
    "gelu", meta=_gelu_impl.meta, cpu=_gelu_impl.cpu,
    backward=lambda ctx, g: _nn_activation().gelu_backward(ctx, g),
    jvp=lambda ctx, t: t * _gelu_grad(ctx.args[0], ctx.kwargs.get("approximate", "none")),
    **cuda_fields(_gelu_impl, {"method": False}))
gelu_ = inplace(gelu)


def _silu_grad(x):
    s = x.sigmoid()
    return s * (1 + x * (1 - s))


_silu_impl = Unary(lambda x: x / (1 + np.exp(-x)), result="same", allow=INEXACT,
                   kernel="silu_cpu", cuda="a / (1 + exp(-a))", cuda_complex=True, name="silu")
silu = defop("silu", meta=_silu_impl.meta, cpu=_silu_impl.cpu,
             backward=lambda ctx, g: (g * conj(_silu_grad(ctx.args[0])),),
             jvp=lambda ctx, t: t * _silu_grad(ctx.args[0]),
             **cuda_fields(_silu_impl, {"method": False}))
silu_ = inplace(silu)


def _softplus(x, beta=1.0, threshold=20.0):
    b = _const(beta, x)
    bx = x * b
    return np.where(bx > _const(threshold, x), x, np.log1p(np.exp(bx)) / b)


def _softplus_grad(ctx):
    x = ctx.args[0]
    beta = ctx.args[1] if len(ctx.args) > 1 else ctx.kwargs.get("beta", 1.0)
    thr = ctx.args[2] if len(ctx.args) > 2 else ctx.kwargs.get("threshold", 20.0)
    bx = x * beta
    z = bx.exp()
    return where(bx > thr, 1, z / (z + 1))


def _softplus_cuda(dtype, x, beta=1.0, threshold=20.0):
    return "r_softplus(a, beta, thr)", {"beta": (beta, dtype), "thr": (threshold, dtype)}


_softplus_impl = _Scalars(_softplus, result="same", allow=FLOATING, kernel="softplus_cpu",
                          cuda=_softplus_cuda, name="softplus")
softplus = defop("softplus", meta=_softplus_impl.meta, cpu=_softplus_impl.cpu,
                 backward=lambda ctx, g: (g * _softplus_grad(ctx),),
                 jvp=lambda ctx, t, *_: t * _softplus_grad(ctx),
                 **cuda_fields(_softplus_impl, {"method": False}))


def _hardtanh_check(x, min_val=-1.0, max_val=1.0) -> None:
    if x.dtype is D.bool_:
        raise RuntimeError("Bool inputs not supported for hardtanh")
    if x.dtype is D.uint8 and (int(min_val) < 0 or int(max_val) < 0):
        raise RuntimeError("cannot do hardtanh on an unsigned type with negative limits")
    if x.dtype.category == 3:
        raise NotImplementedError("clamp is not supported for complex types")


class _Hardtanh(Unary):
    """clamp(x, min_val, max_val) in clamp's promoted dtype, cast back to x's dtype."""

    def cpu(self, x, min_val=-1.0, max_val=1.0):
        self.prepare(x, (min_val, max_val), {})
        from refimpl.ops.clamp import clamp

        return finish(clamp(x, min_val, max_val)._np, x.dtype, x._shape)

    def cuda(self, x, min_val=-1.0, max_val=1.0):
        """clamp on the device, then a device-side cast to ``x``'s dtype."""
        self.prepare(x, (min_val, max_val), {})
        from refimpl.ops.clamp import clamp

        r = clamp(x, min_val, max_val)
        return r if r.dtype is x.dtype else r.to(x.dtype)


def _hardtanh_mask(ctx):
    x = ctx.args[0]
    lo = ctx.args[1] if len(ctx.args) > 1 else ctx.kwargs.get("min_val", -1.0)
    hi = ctx.args[2] if len(ctx.args) > 2 else ctx.kwargs.get("max_val", 1.0)
    return (x <= lo).logical_or(x >= hi)


_hardtanh_impl = _Hardtanh(None, result="same", check=_hardtanh_check)
hardtanh = defop("hardtanh", meta=_hardtanh_impl.meta, cpu=_hardtanh_impl.cpu,
                 cuda=_hardtanh_impl.cuda,
                 backward=lambda ctx, g: (where(_hardtanh_mask(ctx), 0, g),),
                 jvp=lambda ctx, t, *_: where(_hardtanh_mask(ctx), 0, t),
                 extra={"method": False})
hardtanh_ = inplace(hardtanh)


__all__ = [
    "logit", "logit_", "relu", "relu_", "threshold", "threshold_",
]

# fresh outputs follow their inputs' layout (TENSOR-014)
mark_pointwise("hardtanh", "threshold_backward", "sigmoid_backward", "tanh_backward")
