"""Binary and ternary elementwise ops beyond arithmetic (spec: TENSOR-105, TENSOR-110).

``atan2``, ``hypot``, ``maximum``/``minimum`` (NaN-propagating), ``fmax``/``fmin``
(NaN-ignoring), ``copysign``, ``xlogy``, ``logaddexp``/``logaddexp2``, ``nextafter``,
``heaviside``, the ``clamp`` family, ``where``, ``lerp``, ``addcmul`` and ``addcdiv``.
Operands broadcast together; the output dtype is torch's common dtype unless noted.
"""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.ops._helpers import result_type
from refimpl.ops._pointwise import (
    ALL,
    BOOL,
    COMPLEX,
    COMPLEX32_MESSAGE,
    FLOATING,
    INEXACT,
    NUMERIC,
    REAL,
    Binary,
    _hidden,
    add_tangents,
    alias,
    broadcast_pair,
    checked_scalar,
    compute_dtype,
    conj,
    cuda_fields,
    dtype_of,
    finish,
    fit,
    inplace,
    mark_pointwise,
    no_cuda_complex,
    not_implemented,
    not_implemented_cuda,
    operand,
    out_device,
    quiet,
    run_cuda,
    shape_of,
    unbroadcast,
)
from refimpl.ops._registry import TensorSpec, defop
from refimpl.ops.special_overloads import some_tensor, tensor_first


def broadcast_all(*xs) -> tuple:
    """The broadcast shape of several operands, pairwise left to right like torch."""
    shape = ()
    for i, x in enumerate(xs):
        s = shape_of(x)
        if i == 0:
            shape = s
        elif s != shape:
            shape = broadcast_pair(shape, s)
    return shape


def _tensor_other(name: str):
    def pre(a, b, **_) -> None:
        if not isinstance(a, Tensor):
            raise TypeError(
                f"{name}(): argument 'input' (position 1) must be Tensor, not {type(a).__name__}")
        if not isinstance(b, Tensor):
            raise TypeError(
                f"{name}(): argument 'other' (position 2) must be Tensor, not {type(b).__name__}")

    return pre


def _no_complex(message: str):
    def pre(a, b, **_) -> None:
        if dtype_of(a).category == 3 or dtype_of(b).category == 3:
            raise RuntimeError(message)

    return pre


def _both(*checks):
    def pre(a, b, **kw) -> None:
        for c in checks:
            c(a, b, **kw)

    return pre


def _binary(name: str, fn, cuda, *, result: str = "promote", allow=ALL, kernel: str = "",
            pre=None, post=None, backward=None, jvp=None, node=None, saves=("inputs",),
            with_inplace: bool = True, cplx: bool = False, first=None):
    impl = Binary(fn, result=result, allow=allow, kernel=kernel, pre=pre, post=post,
                  name=name, cuda=cuda, cuda_complex=cplx, first=first)
    op = defop(name, meta=impl.meta, cpu=impl.cpu, backward=backward, jvp=jvp, node=node,
               saves=saves, **cuda_fields(impl))
    return op, (inplace(op) if with_inplace else None)


def _grads(fa, fb):
    """backward/jvp from the partial derivatives ``fa(a, b, out)`` and ``fb(a, b, out)``."""

    def backward(ctx, g):
        a, b = ctx.args[0], ctx.args[1]
        out = ctx.outputs[0] if ctx.outputs else None
        need = ctx.needs_input_grad
        ga = unbroadcast(g * conj(fa(a, b, out)), a) if need[0] else None
        gb = None
        if isinstance(b, Tensor) and len(need) > 1 and need[1]:
            gb = unbroadcast(g * conj(fb(a, b, out)), b)
        return ga, gb

    def jvp(ctx, ta, tb=None):
        a, b, out = ctx.args[0], ctx.args[1], ctx.outputs[0]
        return fit(add_tangents(None if ta is None else ta * fa(a, b, out),
                                None if tb is None else tb * fb(a, b, out)), out)

    return backward, jvp


def _where_zero(cond, x):
    return where(cond, 0, x)


# -- atan2, hypot, logaddexp, nextafter ---------------------------------------------------

_atan2_bw, _atan2_jvp = _grads(lambda a, b, y: b / (a * a + b * b),
                               lambda a, b, y: -a / (a * a + b * b))
atan2, atan2_ = _binary("atan2", np.arctan2, "atan2(a, b)", result="float", allow=REAL, kernel="atan2_cpu",
                        pre=_tensor_other("atan2"), backward=_atan2_bw, jvp=_atan2_jvp,
                        first="tensor")
arctan2, arctan2_ = alias(atan2, "arctan2"), alias(atan2_, "arctan2_")

_hypot_bw, _hypot_jvp = _grads(lambda a, b, y: a / y, lambda a, b, y: b / y)
hypot, hypot_ = _binary("hypot", np.hypot, "hypot(a, b)", allow=FLOATING, kernel="hypot_cpu",
                        pre=_tensor_other("hypot"), backward=_hypot_bw, jvp=_hypot_jvp,
                        saves=("inputs", "outputs"))


def _logaddexp(x, y):
    if x.dtype.kind != "c":
        return np.logaddexp(x, y)
    hi = np.where(x.real >= y.real, x, y)
    lo = np.where(x.real >= y.real, y, x)
    both_inf = np.isinf(hi.real) & (hi == lo)
    return np.where(both_inf, hi, hi + np.log1p(np.exp(lo - hi)))


_lae_bw, _lae_jvp = _grads(lambda a, b, y: (1 + (b - a).exp()).reciprocal(),
                           lambda a, b, y: (1 + (a - b).exp()).reciprocal())
logaddexp, _ = _binary("logaddexp", _logaddexp, "r_logaddexp(a, b)", allow=INEXACT, cplx=True, kernel="logaddexp_cpu",
                       pre=_tensor_other("logaddexp"), backward=_lae_bw, jvp=_lae_jvp,
                       with_inplace=False)
_lae2_bw, _lae2_jvp = _grads(lambda a, b, y: (1 + pow_scalar(2.0, b - a)).reciprocal(),
                             lambda a, b, y: (1 + pow_scalar(2.0, a - b)).reciprocal())
logaddexp2, _ = _binary("logaddexp2", np.logaddexp2, "r_logaddexp2(a, b)", allow=FLOATING, kernel="logaddexp2_cpu",
                        pre=_tensor_other("logaddexp2"), backward=_lae2_bw, jvp=_lae2_jvp,
                        with_inplace=False)


def pow_scalar(base, exponent):
    """``base ** exponent`` for a Python base (torch's pow.Scalar)."""
    from refimpl.ops.division import pow

    return pow(base, exponent)


def _nextafter(x, y):
    return np.nextafter(x, y)


class _NativeBinary(Binary):
    """Computes in the storage dtype itself (nextafter is defined per float format)."""

    def cpu(self, a, b, **kwargs):
        shape, dtype, out = self.prepare(a, b, kwargs)
        self.check_kernel(dtype, kwargs)
        return finish(self.fn(operand(a, dtype, dtype.np), operand(b, dtype, dtype.np)),
                      out, shape)

    def cuda_into(self, into, a, b, **kwargs):
        """float16/bfloat16 step the 16-bit pattern (the kernels see them as float)."""
        shape, dtype, out = self.prepare(a, b, kwargs)
        if dtype not in self.allow:
            raise not_implemented_cuda(self.kernel, dtype)
        expr = {D.float16: "r_nextafter_h16(a, b)", D.bfloat16: "r_nextafter_bf16(a, b)"}.get(
            dtype, "nextafter(a, b)")
        return run_cuda(expr, (a, b), out, dtype, None, shape, into, self.name)


_next_impl = _NativeBinary(_nextafter, allow=FLOATING, kernel="nextafter_cpu", name="nextafter",
                           pre=_tensor_other("nextafter"))
nextafter = defop("nextafter", meta=_next_impl.meta, cpu=_next_impl.cpu,
                  **cuda_fields(_next_impl),
                  backward=lambda ctx, g: (unbroadcast(g, ctx.args[0]),
                                           unbroadcast(g * 0, ctx.args[1])),
                  jvp=lambda ctx, ta, tb=None: fit(ta, ctx.outputs[0]), saves=())
nextafter_ = inplace(nextafter)

# -- maximum / minimum / fmax / fmin --------------------------------------------------------


def _max_backward(greater):
    """maximum/minimum: the winner gets the gradient, ties split it in halves (torch)."""

    def backward(ctx, g):
        a, b = ctx.args[0], ctx.args[1]
        half = g / 2
        ga = where(greater(b, a), 0, where(a == b, half, g))
        gb = where(greater(a, b), 0, where(a == b, half, g))
        return unbroadcast(ga, a), unbroadcast(gb, b)

    def jvp(ctx, ta, tb=None):
        a, b, out = ctx.args[0], ctx.args[1], ctx.outputs[0]
        if ta is None and tb is None:
            return None
        ta = 0 if ta is None else ta
        tb = 0 if tb is None else tb
        return fit(where(greater(a, b), ta, where(a == b, (ta + tb) / 2, tb)), out)

    return backward, jvp


def _gt(a, b):
    return a > b


def _lt(a, b):
    return a < b


_maximum_bw, _maximum_jvp = _max_backward(_gt)
_minimum_bw, _minimum_jvp = _max_backward(_lt)
maximum, _ = _binary(
    "maximum", np.maximum, "r_maximum(a, b)",
    pre=_both(_tensor_other("maximum"),
              _no_complex("maximum not implemented for complex tensors.")),
    backward=_maximum_bw, jvp=_maximum_jvp, with_inplace=False, first="tensor")
minimum, _ = _binary(
    "minimum", np.minimum, "r_minimum(a, b)",
    pre=_both(_tensor_other("minimum"),
              _no_complex("minimum not implemented for complex tensors.")),
    backward=_minimum_bw, jvp=_minimum_jvp, with_inplace=False, first="tensor")


def _fmax_backward(ge):
    def backward(ctx, g):
        a, b = ctx.args[0], ctx.args[1]
        a_wins = ge(a, b).logical_or(b.isnan())
        return unbroadcast(where(a_wins, g, 0), a), unbroadcast(where(a_wins, 0, g), b)

    def jvp(ctx, ta, tb=None):
        a, b, out = ctx.args[0], ctx.args[1], ctx.outputs[0]
        a_wins = ge(a, b).logical_or(b.isnan())
        return fit(where(a_wins, 0 if ta is None else ta, 0 if tb is None else tb), out)

    return backward, jvp


_fmax_bw, _fmax_jvp = _fmax_backward(lambda a, b: a >= b)
_fmin_bw, _fmin_jvp = _fmax_backward(lambda a, b: a <= b)
fmax, _ = _binary(
    "fmax", np.fmax, "r_fmax(a, b)",
    pre=_both(_tensor_other("fmax"), _no_complex("fmax not implemented for complex tensors.")),
    backward=_fmax_bw, jvp=_fmax_jvp, with_inplace=False, first="tensor")
fmin, _ = _binary(
    "fmin", np.fmin, "r_fmin(a, b)",
    pre=_both(_tensor_other("fmin"), _no_complex("fmin not implemented for complex tensors.")),
    backward=_fmin_bw, jvp=_fmin_jvp, with_inplace=False, first="tensor")

# -- copysign, xlogy, heaviside ---------------------------------------------------------------


def _copysign_self(a, b, y):
    return _where_zero(a == 0, y / a)


_copysign_bw, _copysign_jvp = _grads(_copysign_self, lambda a, b, y: 0 * y)
_copysign_impl = Binary(np.copysign, result="float", allow=REAL, kernel="copysign_cpu",
                        name="copysign", cuda="copysign(a, b)")
_copysign_t = defop("copysign", meta=_copysign_impl.meta, cpu=_copysign_impl.cpu,
                    backward=_copysign_bw, jvp=_copysign_jvp, saves=("inputs", "outputs"),
                    **cuda_fields(_copysign_impl, _hidden()))
_copysign_s = defop("copysign.Scalar", meta=_copysign_impl.meta, cpu=_copysign_impl.cpu,
                    backward=_copysign_bw, jvp=_copysign_jvp, saves=("inputs", "outputs"),
                    node="CopysignBackward1", **cuda_fields(_copysign_impl, _hidden()))
_copysign_t_, _copysign_s_ = inplace(_copysign_t), inplace(_copysign_s)


def copysign(input: Tensor, other, *, out=None) -> Tensor:
    """``|input|`` with the sign of ``other`` (integers compute in the default float)."""
    tensor_first("copysign", (input, other))
    kw = {} if out is None else {"out": out}
    return (_copysign_t if isinstance(other, Tensor) else _copysign_s)(input, other, **kw)


def copysign_(self: Tensor, other) -> Tensor:
    """In-place ``copysign``."""
    return (_copysign_t_ if isinstance(other, Tensor) else _copysign_s_)(self, other)


def _xlogy(x, y):
    r = np.where(x == 0, np.zeros((), x.dtype), x * np.log(y))
    return np.where(np.isnan(y), y, r)


def _xlogy_self(a, b, y):
    """d xlogy / d a = log(b), 0 where a == 0 (in a's dtype, not the default float)."""
    nonzero = a != 0
    return xlogy(nonzero.to(a.dtype) if isinstance(a, Tensor) else nonzero, b)


_xlogy_bw, _xlogy_jvp = _grads(_xlogy_self, lambda a, b, y: a / b)
_xlogy_impl = Binary(_xlogy, result="float", allow=REAL, kernel="xlogy_cpu", name="xlogy",
                     cuda="r_xlogy(a, b)")


def _xlogy_op(name: str, node: str):
    return defop(name, meta=_xlogy_impl.meta, cpu=_xlogy_impl.cpu, backward=_xlogy_bw,
                 jvp=_xlogy_jvp, node=node, **cuda_fields(_xlogy_impl, _hidden()))


_xlogy_tt = _xlogy_op("xlogy", "XlogyBackward0")
_xlogy_st = _xlogy_op("xlogy.Scalar_Self", "XlogyBackward1")
_xlogy_ts = _xlogy_op("xlogy.Scalar_Other", "XlogyBackward2")
_xlogy_tt_, _xlogy_ts_ = inplace(_xlogy_tt), inplace(_xlogy_ts)


def xlogy(input, other, *, out=None) -> Tensor:
    """``input * log(other)``, 0 where ``input == 0`` (unless ``other`` is NaN)."""
    some_tensor("xlogy", (input, other))
    kw = {} if out is None else {"out": out}
    if not isinstance(input, Tensor):
        return _xlogy_st(input, other, **kw)
    return (_xlogy_tt if isinstance(other, Tensor) else _xlogy_ts)(input, other, **kw)


def xlogy_(self: Tensor, other) -> Tensor:
    """In-place ``xlogy``."""
    return (_xlogy_tt_ if isinstance(other, Tensor) else _xlogy_ts_)(self, other)


def _heaviside_pre(a, b, **_) -> None:
    if not isinstance(a, Tensor):
        raise TypeError("heaviside(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(a).__name__}")
    if not isinstance(b, Tensor):
        raise TypeError("heaviside(): argument 'values' (position 2) must be Tensor, not "
                        f"{type(b).__name__}")
    if dtype_of(a).category == 3 or dtype_of(b).category == 3:
        raise RuntimeError("heaviside is not yet implemented for complex tensors.")
    if dtype_of(a) is not dtype_of(b):
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")


def _heaviside(x, v):
    return np.where(x == 0, v, (x > 0).astype(x.dtype))


def _heaviside_backward(ctx, g):
    raise RuntimeError("derivative for aten::heaviside is not implemented")


heaviside, heaviside_ = _binary("heaviside", _heaviside, "r_heaviside(a, b)",
                                pre=_heaviside_pre,
                                backward=_heaviside_backward, node="NotImplemented", saves=())

# -- where ----------------------------------------------------------------------------------------


def _where_meta(input, condition, other) -> TensorSpec:
    if not isinstance(condition, Tensor) or condition.dtype is not D.bool_:
        dt = dtype_of(condition) if isinstance(condition, Tensor) else None
        if dt is not D.uint8:
            raise RuntimeError(
                "where expected condition to be a boolean tensor, but got a tensor with "
                f"dtype {D.type_name(dt) if dt else type(condition).__name__}")
    shape = broadcast_all(condition, input, other)
    return TensorSpec(shape, result_type(input, other), out_device(condition, input, other))


def _where_spec(input, condition, other) -> TensorSpec:
    """The output of where, after the checks and the warning both kernels give."""
    spec = _where_meta(input, condition, other)
    if spec.dtype is D.complex32:
        raise NotImplementedError(COMPLEX32_MESSAGE)
    if condition.dtype is D.uint8:
        import warnings

        warnings.warn(
            "where received a uint8 condition tensor. This behavior is deprecated and will be "
            "removed in a future version of PyTorch. Use a boolean condition instead.",
            UserWarning, stacklevel=6)
    return spec


def _where_cpu(input, condition, other) -> np.ndarray:
    spec = _where_spec(input, condition, other)
    cdt = compute_dtype(spec.dtype)
    r = np.where(condition._np.astype(bool, copy=False), operand(input, spec.dtype, cdt),
                 operand(other, spec.dtype, cdt))
    return finish(r, spec.dtype, spec.shape)


def _where_cuda(input, condition, other) -> Tensor:
    spec = _where_spec(input, condition, other)
    return run_cuda("b ? a : c", (input, condition, other), spec.dtype,
                    (spec.dtype, D.bool_, spec.dtype), None, spec.shape, None, "where")


def _where_backward(ctx, g):
    x, cond, y = ctx.args
    gx = unbroadcast(where(cond, g, 0), x) if isinstance(x, Tensor) else None
    gy = unbroadcast(where(cond, 0, g), y) if isinstance(y, Tensor) else None
    return gx, None, gy


def _where_jvp(ctx, tx, tcond=None, ty=None):
    cond = ctx.args[1]
    if tx is None and ty is None:
        return None
    return fit(where(cond, 0 if tx is None else tx, 0 if ty is None else ty), ctx.outputs[0])


# torch's aten order is where(condition, self, other); this op takes (self, condition,
# other) so that its Tensor method is ``x.where(condition, y)`` like torch's.
_where = defop("where", meta=_where_meta, cpu=_where_cpu, cuda=_where_cuda,
               backward=_where_backward, jvp=_where_jvp)


def where(condition, input=None, other=None, *, out=None):
    """Elements of ``input`` where ``condition`` holds, else of ``other`` (TENSOR-110).

    Either value may be a Python scalar; the dtype is their common dtype.
    ``where(condition)`` is ``condition.nonzero(as_tuple=True)``.
    """
    if input is None and other is None:
        return condition.nonzero(as_tuple=True)
    kw = {} if out is None else {"out": out}
    return _where(input, condition, other, **kw)


# -- lerp, addcmul, addcdiv ---------------------------------------------------------------------

_CPP_NAMES = {
    D.bool_: "bool", D.uint8: "unsigned char", D.int8: "signed char", D.int16: "short int",
    D.int32: "int", D.int64: "long int", D.float16: "c10::Half", D.bfloat16: "c10::BFloat16",
    D.float32: "float", D.float64: "double", D.complex64: "c10::complex<float>",
    D.complex128: "c10::complex<double>",
}


def _lerp_meta(self, end, weight) -> TensorSpec:
    if end.dtype is not self.dtype:
        raise RuntimeError(f"expected dtype {_CPP_NAMES[self.dtype]} for `end` but got dtype "
                           f"{_CPP_NAMES[end.dtype]}")
    if isinstance(weight, Tensor):
        if weight.dtype is not self.dtype and weight.dim() > 0:
            raise RuntimeError(f"expected dtype {_CPP_NAMES[self.dtype]} for `weight` but got "
                               f"dtype {_CPP_NAMES[weight.dtype]}")
        shape = broadcast_all(self, end, weight)
    else:
        shape = broadcast_all(self, end)
    return TensorSpec(shape, self.dtype, out_device(self, end, weight))


def _lerp_cpu(self, end, weight) -> np.ndarray:
    spec = _lerp_meta(self, end, weight)
    if self.dtype not in INEXACT:
        kernel = "lerp_kernel_tensor" if isinstance(weight, Tensor) else "lerp_kernel_scalar"
        raise not_implemented(kernel, self.dtype)
    cdt = compute_dtype(self.dtype)
    if isinstance(weight, Tensor):
        w = operand(weight, weight.dtype, cdt)
    else:
        wdt = D.float32 if self.dtype in (D.float16, D.bfloat16) else self.dtype
        w = np.asarray(checked_scalar(weight, wdt)).astype(cdt)
    a, b = operand(self, self.dtype, cdt), operand(end, self.dtype, cdt)
    with quiet():
        diff = b - a
        r = np.where(np.abs(w) < 0.5, a + w * diff, b - diff * (1 - w))
    return finish(r, self.dtype, spec.shape)


def _lerp_cuda_into(into, self, end, weight) -> Tensor:
    spec = _lerp_meta(self, end, weight)
    if self.dtype not in INEXACT:
        kernel = "lerp_kernel_tensor" if isinstance(weight, Tensor) else "lerp_kernel_scalar"
        raise not_implemented(kernel, self.dtype)
    if not isinstance(weight, Tensor):
        wdt = D.float32 if self.dtype in (D.float16, D.bfloat16) else self.dtype
        weight = checked_scalar(weight, wdt)
    return run_cuda("r_lerp(a, b, c)", (self, end, weight), self.dtype, self.dtype, None,
                    spec.shape, into, "lerp")


def _lerp_cuda(self, end, weight) -> Tensor:
    return _lerp_cuda_into(None, self, end, weight)


def _lerp_backward(ctx, g):
    a, b, w = ctx.args
    ga = unbroadcast(g * conj(1 - w), a)
    gb = unbroadcast(g * conj(w), b)
    gw = unbroadcast(g * conj(b - a), w) if isinstance(w, Tensor) else None
    return ga, gb, gw


def _lerp_jvp(ctx, ta, tb=None, tw=None):
    a, b, w = ctx.args
    r = add_tangents(None if ta is None else ta * (1 - w), None if tb is None else tb * w,
                     None if tw is None else tw * (b - a))
    return fit(r, ctx.outputs[0])


_lerp_cuda_fields = {"cuda": _lerp_cuda, "extra": _hidden(cuda_into=_lerp_cuda_into)}
_lerp_s = defop("lerp.Scalar", meta=_lerp_meta, cpu=_lerp_cpu, backward=_lerp_backward,
                jvp=_lerp_jvp, node="LerpBackward0", **_lerp_cuda_fields)
_lerp_t = defop("lerp.Tensor", meta=_lerp_meta, cpu=_lerp_cpu, backward=_lerp_backward,
                jvp=_lerp_jvp, node="LerpBackward1", **_lerp_cuda_fields)
_lerp_s_, _lerp_t_ = inplace(_lerp_s), inplace(_lerp_t)


def lerp(input: Tensor, end: Tensor, weight, *, out=None) -> Tensor:
    """``input + weight * (end - input)``; ``input`` and ``end`` share one float dtype."""
    kw = {} if out is None else {"out": out}
    return (_lerp_t if isinstance(weight, Tensor) else _lerp_s)(input, end, weight, **kw)


def lerp_(self: Tensor, end: Tensor, weight) -> Tensor:
    """In-place ``lerp``."""
    return (_lerp_t_ if isinstance(weight, Tensor) else _lerp_s_)(self, end, weight)


_ADDCDIV_INT = (
    "Integer division with addcdiv is no longer supported, and in a future  release addcdiv "
    "will perform a true division of tensor1 and tensor2. The historic addcdiv behavior can "
    "be implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for "
    "integer inputs and as (input + value * tensor1 / tensor2) for float inputs. The future "
    "addcdiv behavior is just the latter implementation: (input + value * tensor1 / tensor2), "
    "for all dtypes.")


def _addc(divide: bool):
    def meta(self, tensor1, tensor2, *, value=1) -> TensorSpec:
        if divide and tensor1.dtype.category <= 1 and tensor2.dtype.category <= 1:
            raise RuntimeError(_ADDCDIV_INT)
        shape = broadcast_all(self, tensor1, tensor2)
        return TensorSpec(shape, result_type(self, tensor1, tensor2),
                          out_device(self, tensor1, tensor2))

    def cpu(self, tensor1, tensor2, *, value=1) -> np.ndarray:
        spec = meta(self, tensor1, tensor2)
        dtype = spec.dtype
        if dtype not in (INEXACT if divide else NUMERIC):
            raise not_implemented("addcdiv_cpu" if divide else "addcmul_cpu_out", dtype)
        cdt = compute_dtype(dtype)
        v = np.asarray(checked_scalar(value, D.float32 if cdt != dtype.np else dtype))
        x, t1, t2 = (operand(t, dtype, cdt) for t in (self, tensor1, tensor2))
        with quiet():
            v = v.astype(cdt)
            r = x + v * (t1 / t2 if divide else t1 * t2)
        return finish(r, dtype, spec.shape)

    def cuda_into(into, self, tensor1, tensor2, *, value=1) -> Tensor:
        spec = meta(self, tensor1, tensor2)
        dtype = spec.dtype
        if dtype not in (INEXACT if divide else NUMERIC):
            raise not_implemented_cuda("addcdiv" if divide else "addcmul", dtype)
        vdt = D.float32 if dtype in (D.float16, D.bfloat16) else dtype
        v = checked_scalar(value, vdt)
        expr = "a + v * (b / c)" if divide else "a + v * (b * c)"
        return run_cuda(expr, (self, tensor1, tensor2), dtype, dtype, {"v": (v, dtype)},
                        spec.shape, into, "addcdiv" if divide else "addcmul")

    def cuda(self, tensor1, tensor2, *, value=1) -> Tensor:
        return cuda_into(None, self, tensor1, tensor2, value=value)

    def backward(ctx, g):
        x, t1, t2 = ctx.args
        v = ctx.kwargs.get("value", 1)
        gx = unbroadcast(g, x)
        if divide:
            g1 = unbroadcast(g * conj(v / t2), t1)
            g2 = unbroadcast(-g * conj(v * t1 / (t2 * t2)), t2)
        else:
            g1 = unbroadcast(g * conj(t2 * v), t1)
            g2 = unbroadcast(g * conj(t1 * v), t2)
        return gx, g1, g2

    def jvp(ctx, tx, t1=None, t2=None):
        _, a, b = ctx.args
        v = ctx.kwargs.get("value", 1)
        if divide:
            parts = (tx, None if t1 is None else t1 * v / b,
                     None if t2 is None else -t2 * v * a / (b * b))
        else:
            parts = (tx, None if t1 is None else t1 * b * v, None if t2 is None else t2 * a * v)
        return fit(add_tangents(*parts), ctx.outputs[0])

    return meta, cpu, backward, jvp, cuda, cuda_into


def _addc_op(name: str, divide: bool):
    meta, cpu, backward, jvp, cuda, cuda_into = _addc(divide)
    op = defop(name, meta=meta, cpu=cpu, backward=backward, jvp=jvp, cuda=cuda,
               extra={"cuda_into": cuda_into})
    return op, inplace(op)


addcmul, addcmul_ = _addc_op("addcmul", False)
addcdiv, addcdiv_ = _addc_op("addcdiv", True)

_ = (BOOL, COMPLEX, no_cuda_complex)

__all__ = [
    "addcdiv", "addcmul", "arctan2", "atan2", "copysign", "fmax", "fmin", "heaviside", "hypot",
    "lerp", "logaddexp", "logaddexp2", "maximum", "minimum", "nextafter", "where", "xlogy",
    "xlogy_",
]
TENSOR_METHODS = (
    "arctan2", "arctan2_", "copysign", "copysign_", "xlogy",
    "xlogy_", "lerp", "lerp_",
)

# fresh outputs follow their inputs' layout (TENSOR-014)
mark_pointwise("where", "lerp.Scalar", "lerp.Tensor", "addcmul", "addcdiv")
