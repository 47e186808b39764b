"""The machinery every elementwise op is built from (spec: TENSOR-105, TENSOR-108,
TENSOR-116, TENSOR-300..302, TENSOR-602).

How a call computes:

1. op-specific argument checks (torch's meta checks: bool subtraction, alpha, ...);
2. the broadcast shape of the operands, with torch's size-mismatch error;
3. the common dtype (``result_type`` over tensors, 0-dim tensors and Python
   scalars), widened to the default float dtype by ops that always compute in
   floating point (``div``, ``atan2``, ``exp`` ...); a CPU kernel without support for
   that dtype raises torch's ``"<kernel>" not implemented for '<Type>'``;
4. operands are cast to the common dtype (float16/bfloat16 compute in float32 and
   round back, like torch's CPU kernels); integer results wrap on overflow.

``Unary`` and ``Binary`` turn a numpy function into an op's meta function and CPU
kernel; ``inplace`` declares the ``name_`` form; the derivative helpers reduce
broadcast gradients and shape tangents.
"""

from __future__ import annotations

import builtins
import math

import ml_dtypes
import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.ops._helpers import _broadcast_pair, result_type, sum_to
from refimpl.ops._registry import OpDef, TensorSpec, defop

# -- dtype groups and errors ----------------------------------------------------------

BOOL = frozenset({D.bool_})
INTEGRAL = frozenset({D.uint8, D.int8, D.int16, D.int32, D.int64})
FLOATING = frozenset({D.float16, D.bfloat16, D.float32, D.float64})
COMPLEX = frozenset({D.complex64, D.complex128})
REDUCED = frozenset({D.float16, D.bfloat16})
_FAST = frozenset({D.bool_, D.uint8, D.int8, D.int16, D.int32, D.int64, D.float32, D.float64})
ALL = BOOL | INTEGRAL | FLOATING | COMPLEX
REAL = ALL - COMPLEX
NUMERIC = ALL - BOOL
INEXACT = FLOATING | COMPLEX
_F32 = np.dtype(np.float32)


def not_implemented(kernel: str, dtype: D.dtype) -> NotImplementedError:
    """torch's error for a kernel that has no implementation for ``dtype``."""
    return NotImplementedError(f'"{kernel}" not implemented for \'{dtype._legacy}\'')


COMPLEX32_MESSAGE = "refimpl does not implement complex32 tensors"
NUMBER_TYPES = (bool, int, float, complex, np.number, np.bool_)


def dtype_of(x) -> D.dtype:
    """The dtype of a tensor, or the dtype a Python scalar wraps to."""
    return x.dtype if isinstance(x, Tensor) else D.scalar_dtype(x)


def broadcast_pair(a: tuple, b: tuple) -> tuple:
    """The broadcast of two shapes with torch's error (see ``_helpers.broadcast_shapes``)."""
    return _broadcast_pair(a, b)


def shape_of(x) -> tuple:
    """A tensor's shape; () for a Python scalar."""
    return x._shape if isinstance(x, Tensor) else ()


def out_device(*xs):
    """The device of an op's output: the first tensor not a CPU 0-dim one, else the first."""
    first = None
    for x in xs:
        if isinstance(x, Tensor):
            dev = x._storage.device
            if dev.type != "cpu" or x._shape:
                return dev
            if first is None:
                first = dev
    return first


def float_dtype(dtype: D.dtype) -> D.dtype:
    """``dtype`` for floating/complex dtypes, the default float dtype for bool/integers."""
    return dtype if dtype.category >= 2 else D.get_default_dtype()


# -- operands and results ---------------------------------------------------------------

def compute_dtype(dtype: D.dtype) -> np.dtype:
    """The numpy dtype to compute ``dtype`` in: float32 for float16/bfloat16."""
    return _F32 if dtype in REDUCED else dtype.np


def scalar_np(value, cdt: np.dtype) -> np.ndarray:
    """A Python scalar as a 0-dim array of ``cdt`` (integers wrap like torch's casts)."""
    if type(value) is int and not -(2**63) <= value < 2**64:
        raise OverflowError("int too big to convert")
    arr = np.asarray(value)
    if arr.dtype != cdt:
        with np.errstate(all="ignore"):
            arr = arr.astype(cdt)
    return arr


_C_NAMES = {
    D.bool_: "bool", D.uint8: "uint8_t", D.int8: "int8_t", D.int16: "int16_t",
    D.int32: "int", D.int64: "int64_t", D.float16: "c10::Half", D.bfloat16: "c10::BFloat16",
    D.float32: "float", D.float64: "double", D.complex64: "c10::complex<float>",
    D.complex128: "c10::complex<double>",
}


def checked_scalar(value, dtype: D.dtype):
    """A Python scalar argument (alpha, clamp bounds, ...) checked to fit ``dtype``.

    torch converts such arguments with an overflow check ("value cannot be converted
    to type int8_t without overflow"); a wrapped scalar *operand* instead wraps.
    Returns the value as a Python scalar of ``dtype``'s kind.
    """
    if isinstance(value, Tensor):
        value = value.item()
    if dtype is D.bool_:
        return bool(value)
    bad = False
    if isinstance(value, complex) and dtype.category < 3:
        bad, value = value.imag != 0, value.real
    if dtype.category == 1 and not bad:
        info = np.iinfo(dtype.np)
        if isinstance(value, float):
            bad = not (math.isfinite(value) and info.min <= value <= info.max)
            value = int(value) if not bad else value
        elif info.min == 0:
            bad = not -info.max <= int(value) <= info.max
        else:
            bad = not info.min <= int(value) <= info.max
    elif dtype.category == 2 and not bad:
        limit = float(ml_dtypes.finfo(dtype.np).max)
        bad = math.isfinite(float(value)) and builtins.abs(float(value)) > limit
    if bad:
        raise RuntimeError(
            f"value cannot be converted to type {_C_NAMES[dtype]} without overflow")
    return value


def operand(x, dtype: D.dtype, cdt: np.dtype | None = None) -> np.ndarray:
    """An operand as a numpy array of the compute dtype of ``dtype``.

    Tensors of another dtype are cast to ``dtype`` first (an int tensor joining a
    bfloat16 op rounds to bfloat16, as torch's TensorIterator casts), then to the
    compute dtype.
    """
    if cdt is None:
        cdt = compute_dtype(dtype)
    if not isinstance(x, Tensor):
        return scalar_np(x, cdt)
    arr = x._np
    if arr.dtype != cdt:
        with np.errstate(all="ignore"):
            if x.dtype is not dtype and dtype in REDUCED:
                arr = arr.astype(dtype.np)
            arr = arr.astype(cdt)
    return arr


def finish(result, dtype: D.dtype, shape: tuple) -> np.ndarray:
    """A kernel's numpy result as an array of ``dtype`` and ``shape``."""
    result = np.asarray(result)
    if result.dtype != dtype.np:
        with np.errstate(all="ignore"):
            if result.dtype.kind == "c" and dtype.category < 3:
                result = result.real
            result = result.astype(dtype.np)
    if result.shape != shape:
        result = np.broadcast_to(result, shape).copy()
    return result


# -- op builders -------------------------------------------------------------------------

class Unary:
    """The meta function and CPU kernel of a unary elementwise op.

    ``result`` says how the output dtype follows the input dtype: ``"same"``,
    ``"float"`` (bool/integers compute in the default float dtype), ``"bool"``
    (predicates), ``"real"`` (complex inputs give their real dtype), ``"float_real"``
    (both). ``check(x, **kwargs)`` holds the argument checks torch makes in its meta
    function (they raise for fake tensors too). ``allow`` is the set of compute
    dtypes the CPU kernel has; for the others the kernel raises torch's
    ``"<kernel>" not implemented for '<Type>'``.
    """

    def __init__(self, fn, *, result: str = "same", allow=ALL, kernel: str = "",
                 check=None) -> None:
        self.fn, self.result, self.allow, self.kernel, self.check = (
            fn, result, allow, kernel, check)

    def prepare(self, x, args: tuple, kwargs: dict) -> tuple:
        """Run the checks; return (compute dtype, output dtype)."""
        if self.check is not None:
            self.check(x, *args, **kwargs)
        dtype = x.dtype
        result = self.result
        if result == "same":
            return dtype, dtype
        if result in ("float", "float_real"):
            dtype = float_dtype(dtype)
        if result == "bool":
            return dtype, D.bool_
        if result in ("real", "float_real"):
            return dtype, dtype.to_real()
        return dtype, dtype

    def meta(self, x, *args, **kwargs) -> TensorSpec:
        """Same shape as the input, the dtype ``result`` gives."""
        return TensorSpec(x._shape, self.prepare(x, args, kwargs)[1], x.device)

    def cpu(self, x, *args, **kwargs) -> np.ndarray:
        """Compute on numpy (float16/bfloat16 in float32)."""
        dtype, out = self.prepare(x, args, kwargs)
        if dtype not in self.allow:
            raise not_implemented(self.kernel, dtype)
        with np.errstate(all="ignore"):
            r = self.fn(operand(x, dtype), *args, **kwargs)
        return finish(r, out, x._shape)


class Binary:
    """The meta function and CPU kernel of a broadcasting binary elementwise op.

    ``result``: ``"promote"`` (the common dtype), ``"float"`` (bool/integer common
    dtypes compute in the default float dtype), ``"bool"`` (comparisons: compute in
    the common dtype, return bool). ``pre(a, b, **kw)`` runs before broadcasting,
    ``post(dtype, a, b, **kw)`` once the common dtype is known (both are torch's meta
    checks); ``allow``/``kernel`` as for ``Unary`` (``kernel`` may be a function of
    the keyword arguments). Either operand may be a Python scalar.
    """

    def __init__(self, fn, *, result: str = "promote", allow=ALL, kernel="",
                 pre=None, post=None, complex32: bool = False, name: str = "") -> None:
        self.fn, self.result, self.allow, self.kernel = fn, result, allow, kernel
        self.pre, self.post, self.complex32, self.name = pre, post, complex32, name

    def prepare(self, a, b, kwargs) -> tuple:
        """Run the checks; return (shape, compute dtype, output dtype)."""
        for position, (x, arg) in enumerate(((a, "input"), (b, "other")), start=1):
            if not isinstance(x, (Tensor, *NUMBER_TYPES)):
                raise TypeError(f"{self.name}(): argument '{arg}' (position {position}) must be "
                                f"Tensor, not {type(x).__name__}")
        if self.pre is not None:
            self.pre(a, b, **kwargs)
        sa, sb = shape_of(a), shape_of(b)
        shape = sa if sa == sb else broadcast_pair(sa, sb)
        dtype = result_type(a, b)
        if self.result == "float":
            dtype = float_dtype(dtype)
        if self.post is not None:
            self.post(dtype, a, b, **kwargs)
        return shape, dtype, (D.bool_ if self.result == "bool" else dtype)

    def check_kernel(self, dtype: D.dtype, kwargs) -> None:
        """Raise torch's kernel error when the CPU kernel lacks ``dtype``.

        ``complex32=True`` marks ops torch computes in complex32 (float16 with a complex
        scalar): refimpl cannot allocate that dtype and says so.
        """
        if dtype is D.complex32 and self.complex32:
            raise NotImplementedError(COMPLEX32_MESSAGE)
        if dtype not in self.allow:
            kernel = self.kernel(**kwargs) if callable(self.kernel) else self.kernel
            raise not_implemented(kernel, dtype)

    def meta(self, a, b, **kwargs) -> TensorSpec:
        """Broadcast shape, promoted dtype."""
        shape, _, out = self.prepare(a, b, kwargs)
        return TensorSpec(shape, out, out_device(a, b))

    def cpu(self, a, b, **kwargs) -> np.ndarray:
        """Compute on numpy in the common dtype."""
        shape, dtype, out = self.prepare(a, b, kwargs)
        self.check_kernel(dtype, kwargs)
        cdt = compute_dtype(dtype)
        with np.errstate(all="ignore"):
            r = self.fn(operand(a, dtype, cdt), operand(b, dtype, cdt), **kwargs)
        return finish(r, out, shape)


def binary_meta(a, b, **_) -> TensorSpec:
    """Broadcast shape, promoted dtype (for ops defined elsewhere)."""
    sa, sb = shape_of(a), shape_of(b)
    return TensorSpec(sa if sa == sb else broadcast_pair(sa, sb), result_type(a, b),
                      out_device(a, b))


def unary_meta(a, *_, **__) -> TensorSpec:
    """Same shape and dtype as the input."""
    return TensorSpec(a._shape, a.dtype, a.device)


def inplace(op: OpDef) -> OpDef:
    """Declare ``<name>_``: the in-place form of ``op``, writing into input 0.

    Before computing, the result must fit ``self`` as torch's TensorIterator requires:
    first its shape ("output with shape [3] doesn't match the broadcast shape [2, 3]"),
    then its dtype ("result type Float can't be cast to the desired output type Long");
    only then can the kernel raise its own errors.
    """
    base_name = op.name.split(".")[0]
    name = base_name + "_" + op.name[len(base_name):]

    def checked_cpu(self, *args, **kwargs):
        spec = op.meta(self, *args, **kwargs)
        check_fits(self, spec.shape, spec.dtype)
        return op.cpu(self, *args, **kwargs)

    checked = OpDef(op.name, meta=op.meta, cpu=checked_cpu, cuda=op.cuda, node=op.node,
                    extra=op.extra)
    return defop(name, kind="inplace", base=checked, meta=op.meta, backward=op.backward,
                 jvp=op.jvp, node=op.node, saves=op.saves, extra=dict(op.extra))


def check_fits(self: Tensor, shape: tuple, dtype: D.dtype) -> None:
    """torch's checks that an in-place result of ``shape``/``dtype`` can land in ``self``."""
    if tuple(shape) != self._shape:
        raise RuntimeError(f"output with shape {list(self._shape)} doesn't match the broadcast "
                           f"shape {list(shape)}")
    if not D.can_cast(dtype, self.dtype):
        raise RuntimeError(f"result type {D.type_name(dtype)} can't be cast to the desired "
                           f"output type {D.type_name(self.dtype)}")


def alias(fn, name: str):
    """A plain function calling ``fn`` (an op or a function), for torch's alias names.

    Plain functions bind as Tensor methods; an OpDef instance would not.
    """

    def aliased(*args, **kwargs):
        return fn(*args, **kwargs)

    aliased.__name__ = aliased.__qualname__ = name
    aliased.__doc__ = f"Alias of ``{getattr(fn, 'name', getattr(fn, '__name__', name))}``."
    return aliased


def _found_dtype(out: D.dtype, expected: D.dtype) -> str:
    return f"Found dtype {D.type_name(out)} but expected {D.type_name(expected)}"


def exact_out(op: OpDef, message=_found_dtype):
    """The public function of an op whose ``out=`` must have exactly the result dtype.

    torch's same-dtype unary ops (neg, abs, floor, ...) refuse a wider ``out`` with
    "Found dtype Long but expected Int" where other ops would cast.
    """

    def function(input, *args, out=None, **kwargs):
        if out is not None:
            expected = op.meta(input, *args, **kwargs).dtype
            if out.dtype is not expected:
                raise RuntimeError(message(out.dtype, expected))
            return op(input, *args, out=out, **kwargs)
        return op(input, *args, **kwargs)

    function.__name__ = function.__qualname__ = op.name
    function.__doc__ = f"``{op.name}`` (``out=`` must have the result's dtype)."
    return function


def _hidden(**extra) -> dict:
    """``extra`` of an overload OpDef: reached through its public function only."""
    return {"method": False, **extra}


# -- derivative helpers -----------------------------------------------------------------

def unbroadcast(grad, x):
    """The gradient for input ``x``: reduced to its shape, real for a real input."""
    if not isinstance(x, Tensor) or grad is None:
        return None
    if grad.dtype.category == 3 and x.dtype.category < 3:
        grad = grad.real
    return sum_to(grad, x._shape)


def fit(tangent, out: Tensor):
    """An output tangent with the output's shape and dtype."""
    if tangent is None:
        return None
    if tangent.dtype is not out.dtype:
        if tangent.dtype.category == 3 and out.dtype.category < 3:
            tangent = tangent.real
        tangent = tangent.to(out.dtype)
    if tangent._shape != out._shape:
        tangent = tangent.expand(out._shape)
    return tangent


def add_tangents(*ts):
    """The sum of the tangents that are not None (None if all are)."""
    total = None
    for t in ts:
        if t is not None:
            total = t if total is None else total + t
    return total


def conj(x):
    """``x.conj()`` for complex tensors, ``x`` otherwise (also for Python scalars)."""
    if isinstance(x, Tensor):
        return x.conj() if x.dtype.category == 3 else x
    return x.conjugate() if isinstance(x, complex) else x


# -- the fast path -------------------------------------------------------------------

def fast_same(a, b):
    """Both tensors of one shape and one real, non-reduced dtype, or a float32/float64
    tensor and a Python float (numpy casts the weak float to the array's dtype, as the
    general path does): numpy runs them as is."""
    if type(a) is not Tensor:
        return False
    if type(b) is float:
        return a.dtype is D.float32 or a.dtype is D.float64
    return (type(b) is Tensor and a.dtype is b.dtype and a._shape == b._shape
            and a.dtype in _FAST)


def fast_binary(ufunc, a, b):
    """``ufunc`` on ``fast_same`` operands (the lean path of add/sub/mul/div)."""
    x, y = a._np, (b if type(b) is float else b._np)
    if a.dtype.category < 2:  # integer and bool loops raise no floating-point warnings
        r = ufunc(x, y)
    elif _ERRSTATE is not None:
        token = _ERRSTATE.set(_QUIET)
        try:
            r = ufunc(x, y)
        finally:
            _ERRSTATE.reset(token)
    else:
        with np.errstate(all="ignore"):
            r = ufunc(x, y)
    return r if a._shape else np.asarray(r)


# torch never warns about floating-point overflow or invalid results; numpy does unless
# its error state says "ignore". ``np.errstate`` costs about a microsecond per call,
# more than a one-element add itself, so the fast path sets numpy's error-state context
# variable directly (what ``np.errstate.__enter__`` does), falling back to
# ``np.errstate`` on a numpy without it.
try:
    from numpy._core._ufunc_config import _extobj_contextvar as _ERRSTATE

    with np.errstate(all="ignore"):
        _QUIET = _ERRSTATE.get()
except ImportError:  # pragma: no cover - other numpy layouts
    _ERRSTATE = _QUIET = None
