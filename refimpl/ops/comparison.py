"""Comparisons, predicates, logical and bitwise ops (spec: TENSOR-109, TENSOR-111).

Comparisons compute in the common dtype of their operands and return bool (a
Python scalar operand is cast to that dtype first, so ``uint8_tensor < -1`` compares
with 255, as in torch). Logical ops test ``!= 0`` on any dtype; bitwise ops and
shifts work on bool and integer dtypes (a shift by a negative amount or by the
width of the type or more gives 0, or the sign fill for right shifts of signed
types). None of these ops is differentiable.
"""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.ops._helpers import result_type
from refimpl.ops._pointwise import (
    ALL,
    BOOL,
    INTEGRAL,
    NUMBER_SELF,
    REAL,
    TENSOR_OR_NUMBER,
    Binary,
    Unary,
    alias,
    broadcast_pair,
    cuda_fields,
    exact_out,
    finish,
    float_dtype,
    inplace,
    is_cuda,
    mark_pointwise,
    operand,
    run_cuda,
)
from refimpl.ops._registry import TensorSpec, defop


def _compare(name: str, fn, cuda: str, allow=ALL):
    impl = Binary(fn, result="bool", allow=allow, kernel=f"{name}_cpu", name=name, cuda=cuda,
                  cuda_complex=True, first=TENSOR_OR_NUMBER)
    op = defop(name, meta=impl.meta, cpu=impl.cpu, differentiable=False, **cuda_fields(impl))
    return op, inplace(op)


eq, eq_ = _compare("eq", np.equal, "a == b", ALL | {D.complex32})
ne, ne_ = _compare("ne", np.not_equal, "a != b", ALL | {D.complex32})
lt, lt_ = _compare("lt", np.less, "a < b", REAL)
le, le_ = _compare("le", np.less_equal, "a <= b", REAL)
gt, gt_ = _compare("gt", np.greater, "a > b", REAL)
ge, ge_ = _compare("ge", np.greater_equal, "a >= b", REAL)
not_equal, not_equal_ = alias(ne, "not_equal"), alias(ne_, "not_equal_")
less, less_ = alias(lt, "less"), alias(lt_, "less_")
less_equal, less_equal_ = alias(le, "less_equal"), alias(le_, "less_equal_")
greater, greater_ = alias(gt, "greater"), alias(gt_, "greater_")
greater_equal, greater_equal_ = alias(ge, "greater_equal"), alias(ge_, "greater_equal_")


def equal(input: Tensor, other: Tensor) -> bool:
    """True when both tensors have the same shape and equal elements (NaN != NaN)."""
    if input.shape != other.shape:
        return False
    if is_cuda(input) or is_cuda(other):
        return bool(eq(input, other).all())  # reduced on the device
    return bool(np.all(eq(input, other)._np))


# -- predicates --------------------------------------------------------------------------------


def _predicate(name: str, fn, cuda, *, real_only: str | None = None):
    def check(x, **_):
        if real_only and x.dtype.category == 3:
            raise RuntimeError(real_only)

    impl = Unary(fn, result="bool", check=check if real_only else None, cuda=cuda,
                 cuda_complex=True, name=name)
    return defop(name, meta=impl.meta, cpu=impl.cpu, differentiable=False,
                 **cuda_fields(impl))


def _exactly(value: bool):
    def fn(x):
        return np.full(x.shape, value)

    return fn


def _floating(fn, otherwise: bool):
    def apply(x):
        return fn(x) if x.dtype.kind in "fc" else np.full(x.shape, otherwise)

    return apply


isnan = _predicate("isnan", _floating(np.isnan, False), "r_isnan(a)")
isinf = _predicate("isinf", _floating(np.isinf, False), "r_isinf(a)")
isfinite = _predicate("isfinite", _floating(np.isfinite, True), "r_isfinite(a)")
isposinf = _predicate("isposinf", _floating(np.isposinf, False), "r_isinf(a) && a > 0",
                      real_only="isposinf does not support complex inputs.")
isneginf = _predicate("isneginf", _floating(np.isneginf, False), "r_isinf(a) && a < 0",
                      real_only="isneginf does not support complex inputs.")
isreal = _predicate("isreal", lambda x: x.imag == 0 if x.dtype.kind == "c"
                    else np.full(x.shape, True),
                    lambda dtype, x: ("a.im == 0" if dtype.category == 3 else "true", None))


def _check_tol(input: Tensor, other: Tensor, rtol: float, atol: float, equal_nan: bool):
    if not isinstance(other, Tensor):
        raise TypeError(
            f"isclose(): argument 'other' (position 2) must be Tensor, not {type(other).__name__}")
    if input.dtype is not other.dtype:
        raise RuntimeError(f"{D.type_name(input.dtype)} did not match {D.type_name(other.dtype)}")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol:g}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol:g}")


def _isclose_cpu(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> np.ndarray:
    _check_tol(input, other, rtol, atol, equal_nan)
    shape = broadcast_pair(input._shape, other._shape)
    a, b = np.broadcast_arrays(input._np, other._np)
    close = a == b
    if input.dtype.category < 2:  # bool/integers: errors in the default float dtype
        work = float_dtype(input.dtype).np
    else:
        work = np.complex128 if input.dtype.category == 3 else np.float64
        if equal_nan:
            close |= np.isnan(a) & np.isnan(b)
    with np.errstate(all="ignore"):
        aw, bw = a.astype(work), b.astype(work)
        actual = np.abs(aw - bw)
        allowed = atol + np.abs(rtol * bw)
        close |= np.isfinite(actual) & (actual <= allowed)
    return finish(close, D.bool_, shape)


def _isclose_meta(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    from refimpl.ops.elementwise import binary_meta

    _check_tol(input, other, rtol, atol, equal_nan)
    spec = binary_meta(input, other)
    return spec._replace(dtype=D.bool_)


_ISCLOSE = ("a == b || (eq_nan && r_isnan(a) && r_isnan(b)) || "
            "(r_isfinite(r_abs(a - b)) && r_abs(a - b) <= atol + r_abs(rtol * b))")


def _isclose_cuda(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    spec = _isclose_meta(input, other, rtol, atol, equal_nan)
    # the same working precision as the CPU kernel: float64 (complex128) for floats
    if input.dtype.category < 2:
        work = float_dtype(input.dtype)
    else:
        work = D.complex128 if input.dtype.category == 3 else D.float64
    params = {"rtol": (rtol, D.float64), "atol": (atol, D.float64),
              "eq_nan": (bool(equal_nan), D.bool_)}
    return run_cuda(_ISCLOSE, (input, other), D.bool_, work, params, spec.shape, None,
                    "isclose")


isclose = defop("isclose", meta=_isclose_meta, cpu=_isclose_cpu, cuda=_isclose_cuda,
                differentiable=False)


def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> bool:
    """``isclose(...).all()`` as a Python bool: ``|input - other| <= atol + rtol * |other|``."""
    close = isclose(input, other, rtol, atol, equal_nan)
    if is_cuda(close):
        return bool(close.all())  # reduced on the device
    return bool(np.all(close._np))


# -- logical ------------------------------------------------------------------------------------


def _tensor_other(name: str):
    def pre(a, b, **_) -> None:
        if not isinstance(b, Tensor):
            raise TypeError(
                f"{name}(): argument 'other' (position 2) must be Tensor, not {type(b).__name__}")

    return pre


def _logical(name: str, fn, cuda: str):
    impl = Binary(lambda x, y: fn(x != 0, y != 0), result="bool", pre=_tensor_other(name),
                  name=name, cuda=cuda, cuda_complex=True, first="tensor")
    op = defop(name, meta=impl.meta, cpu=impl.cpu, differentiable=False, **cuda_fields(impl))
    return op, inplace(op)


logical_and, logical_and_ = _logical("logical_and", np.logical_and, "r_nz(a) && r_nz(b)")
logical_or, logical_or_ = _logical("logical_or", np.logical_or, "r_nz(a) || r_nz(b)")
logical_xor, logical_xor_ = _logical("logical_xor", np.logical_xor, "r_nz(a) != r_nz(b)")
_not_impl = Unary(lambda x: x == 0, result="bool", cuda="!r_nz(a)", cuda_complex=True,
                  name="logical_not")
logical_not = defop("logical_not", meta=_not_impl.meta, cpu=_not_impl.cpu,
                    differentiable=False, **cuda_fields(_not_impl))
logical_not_ = inplace(logical_not)

# -- bitwise ------------------------------------------------------------------------------------

_BITS = BOOL | INTEGRAL


def _bitwise(name: str, fn, kernel: str, cuda: str, allow=_BITS):
    impl = Binary(fn, allow=allow, kernel=kernel, name=name, cuda=cuda, first=NUMBER_SELF)
    op = defop(name, meta=impl.meta, cpu=impl.cpu, differentiable=False, **cuda_fields(impl))
    return op, inplace(op)


bitwise_and, bitwise_and_ = _bitwise("bitwise_and", np.bitwise_and, "bitwise_and_cpu", "a & b")
bitwise_or, bitwise_or_ = _bitwise("bitwise_or", np.bitwise_or, "bitwise_or_cpu", "a | b")
bitwise_xor, bitwise_xor_ = _bitwise("bitwise_xor", np.bitwise_xor, "bitwise_xor_cpu", "a ^ b")
_bnot_impl = Unary(np.invert, result="same", allow=_BITS, kernel="bitwise_not_cpu",
                   cuda=lambda dtype, x: ("!a" if dtype is D.bool_ else "~a", None),
                   name="bitwise_not")
bitwise_not = defop("bitwise_not", meta=_bnot_impl.meta, cpu=_bnot_impl.cpu,
                    differentiable=False, **cuda_fields(_bnot_impl))
bitwise_not_ = inplace(bitwise_not)
bitwise_not = exact_out(bitwise_not)


def _shift_amount(x, y):
    """The width of x's type and the shift amounts as int64 (no wrap-around)."""
    return x.dtype.itemsize * 8, y.astype(np.int64)


def _lshift(x, y):
    bits, s = _shift_amount(x, y)
    bad = (s < 0) | (s >= bits)
    return np.where(bad, np.zeros((), x.dtype), np.left_shift(x, np.where(bad, 0, s).astype(
        x.dtype)))


def _rshift(x, y):
    bits, s = _shift_amount(x, y)
    limit = bits - 1 if x.dtype.kind == "i" else bits
    bad = (s < 0) | (s >= limit)
    shifted = np.right_shift(x, np.where(bad, 0, s).astype(x.dtype))
    fill = np.right_shift(x, limit) if x.dtype.kind == "i" else np.zeros((), x.dtype)
    return np.where(bad, fill, shifted)


bitwise_left_shift, bitwise_left_shift_ = _bitwise("bitwise_left_shift", _lshift, "lshift_cpu",
                                                   "r_lshift(a, b)", INTEGRAL)
bitwise_right_shift, bitwise_right_shift_ = _bitwise("bitwise_right_shift", _rshift,
                                                     "rshift_cpu", "r_rshift(a, b)", INTEGRAL)

# -- membership -----------------------------------------------------------------------------


def _isin_operands(elements, test_elements):
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError(
            f"isin() received an invalid combination of arguments - got "
            f"({type(elements).__name__}, {type(test_elements).__name__}), but expected one of:")
    dtype = result_type(elements, test_elements)
    if dtype.category == 3:
        raise RuntimeError(f"Unsupported input type encountered for isin(): {D.type_name(dtype)}")
    return dtype


def _isin_meta(elements, test_elements, *, assume_unique=False, invert=False):
    _isin_operands(elements, test_elements)
    shape = elements._shape if isinstance(elements, Tensor) else ()
    device = (elements if isinstance(elements, Tensor) else test_elements).device
    return TensorSpec(shape, D.bool_, device)


def _isin_cpu(elements, test_elements, *, assume_unique=False, invert=False):
    dtype = _isin_operands(elements, test_elements)
    a, b = operand(elements, dtype), operand(test_elements, dtype)
    return np.asarray(np.isin(a, b, invert=invert))


def _isin_cuda(elements, test_elements, *, assume_unique=False, invert=False):
    """isin on the device, composed of device ops as torch's CUDA kernel is: a brute-force
    comparison for small test sets, sort + searchsorted for large ones."""
    dtype = _isin_operands(elements, test_elements)
    if not isinstance(test_elements, Tensor):
        out = elements.to(dtype) == test_elements
    elif not isinstance(elements, Tensor):
        out = (test_elements.to(dtype) == elements).any()
    else:
        el = elements.to(dtype)
        tst = test_elements.to(dtype).reshape(-1)
        if tst.numel() == 0:
            from refimpl.ops.factories import zeros

            out = zeros(el.shape, dtype=D.bool_, device=el.device)  # an empty set holds nothing
        elif el.numel() * tst.numel() <= 1 << 24:
            out = (el.unsqueeze(-1) == tst).any(-1)
        else:
            from refimpl.ops.searching import searchsorted

            ordered = tst.sort().values
            flat = el.reshape(-1)
            idx = searchsorted(ordered, flat).clamp(max=ordered.numel() - 1)
            out = (ordered[idx] == flat).reshape(el.shape)
    return out.logical_not() if invert else out


isin = defop("isin", meta=_isin_meta, cpu=_isin_cpu, cuda=_isin_cuda, differentiable=False,
             extra={"method": False})


__all__ = [
    "allclose", "bitwise_and", "bitwise_left_shift", "bitwise_not", "bitwise_or",
    "bitwise_right_shift", "bitwise_xor", "eq", "equal", "ge", "greater", "greater_equal", "gt",
    "isclose", "isfinite", "isin", "isinf", "isnan", "isneginf", "isposinf", "isreal", "le",
    "less", "less_equal", "logical_and", "logical_not", "logical_or", "logical_xor", "lt", "ne",
    "not_equal",
]
TENSOR_METHODS = (
    "equal", "allclose", "not_equal", "not_equal_", "less", "less_", "less_equal",
    "less_equal_", "greater", "greater_", "greater_equal", "greater_equal_",
)

# fresh outputs follow their inputs' layout (TENSOR-014)
mark_pointwise("isclose")
