"""dtypes and torch's type promotion (spec: TENSOR-100 and following).

A dtype is a small immutable object. Promotion follows torch's rules:

* ``promote_types(a, b)``: the lattice bool < unsigned/signed integers < floating <
  complex, the wider type winning inside a category; ``uint8`` with a signed type
  widens to the next signed type that holds both; ``float16`` with ``bfloat16`` gives
  ``float32``; a complex with a wider real float widens the complex.
* ``result_type(*operands)``: operands fall in three priority classes, dimensioned
  tensors, zero-dim tensors, and Python scalars ("wrapped numbers"). A lower class
  only matters when it is of a higher *category* (bool < int < float < complex) than
  every higher class; Python floats and complexes take the default dtype.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

_BOOL, _INT, _FLOAT, _COMPLEX = 0, 1, 2, 3


class dtype:
    """A tensor element type, printed as torch prints it (``torch.float32``)."""

    __slots__ = ("_legacy", "_rank", "category", "is_signed", "itemsize", "name", "np")

    def __init__(self, name: str, np_dtype, category: int, rank: int, legacy: str) -> None:
        self.name = name
        self.np = np.dtype(np_dtype)
        self.itemsize = self.np.itemsize
        self.category = category
        self.is_signed = name not in ("bool", "uint8")
        self._rank = rank
        self._legacy = legacy

    @property
    def is_floating_point(self) -> bool:
        """True for float16, bfloat16, float32 and float64."""
        return self.category == _FLOAT

    @property
    def is_complex(self) -> bool:
        """True for complex64 and complex128."""
        return self.category == _COMPLEX

    def to_real(self) -> dtype:
        """The real counterpart of a complex dtype; other dtypes map to themselves."""
        return {"complex32": float16, "complex64": float32, "complex128": float64}.get(
            self.name, self)

    def to_complex(self) -> dtype:
        """The complex counterpart of a floating dtype (float16/bfloat16 -> complex64)."""
        if self.category == _COMPLEX:
            return self
        if self is float16:
            return complex32
        return complex128 if self is float64 else complex64

    def __repr__(self) -> str:
        return f"torch.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))


def _by_name(name: str) -> dtype:
    return DTYPES[name]


bool_ = dtype("bool", np.bool_, _BOOL, 0, "Bool")
uint8 = dtype("uint8", np.uint8, _INT, 1, "Byte")
int8 = dtype("int8", np.int8, _INT, 1, "Char")
int16 = dtype("int16", np.int16, _INT, 2, "Short")
int32 = dtype("int32", np.int32, _INT, 3, "Int")
int64 = dtype("int64", np.int64, _INT, 4, "Long")
float16 = dtype("float16", np.float16, _FLOAT, 1, "Half")
bfloat16 = dtype("bfloat16", ml_dtypes.bfloat16, _FLOAT, 1, "BFloat16")
float32 = dtype("float32", np.float32, _FLOAT, 2, "Float")
float64 = dtype("float64", np.float64, _FLOAT, 3, "Double")
# complex32 exists for promotion (float16 with a complex operand gives it, as in torch);
# numpy has no such type, so refimpl cannot allocate it (NotImplementedError).
complex32 = dtype("complex32", np.complex64, _COMPLEX, 1, "ComplexHalf")
complex64 = dtype("complex64", np.complex64, _COMPLEX, 2, "ComplexFloat")
complex128 = dtype("complex128", np.complex128, _COMPLEX, 3, "ComplexDouble")

DTYPES: dict[str, dtype] = {
    d.name: d
    for d in (bool_, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64,
              complex64, complex128)
}
# torch's aliases (torch.float is float32, torch.long is int64, ...).
ALIASES = {
    "float": float32, "double": float64, "half": float16, "long": int64, "int": int32,
    "short": int16, "cfloat": complex64, "cdouble": complex128, "bool": bool_,
    "complex32": complex32, "chalf": complex32,
}
_FROM_NP = {d.np: d for d in DTYPES.values()}


def from_numpy_dtype(npdt) -> dtype:
    """The dtype for a numpy dtype; raises TypeError like torch for unsupported ones."""
    try:
        return _FROM_NP[np.dtype(npdt)]
    except KeyError:
        raise TypeError(
            f"can't convert np.ndarray of type numpy.{np.dtype(npdt).name}. The only "
            "supported types are: float64, float32, float16, complex64, complex128, int64, "
            "int32, int16, int8, uint8, and bool."
        ) from None


_default_dtype = float32


def get_default_dtype() -> dtype:
    """The dtype of floating tensors made from Python floats (float32 at start)."""
    return _default_dtype


def set_default_dtype(d: dtype) -> None:
    """Set the default floating dtype; only float32, float64 (and float16/bfloat16)."""
    global _default_dtype
    if not isinstance(d, dtype) or d.category != _FLOAT:
        raise TypeError("only floating-point types are supported as the default type")
    _default_dtype = d


def default_complex_dtype() -> dtype:
    """complex128 when the default dtype is float64, complex64 otherwise."""
    return complex128 if _default_dtype is float64 else complex64


def promote_types(a: dtype, b: dtype) -> dtype:
    """The smallest dtype to which both ``a`` and ``b`` can be cast (torch's table)."""
    if a is b:
        return a
    if a.category != b.category:
        hi, lo = (a, b) if a.category > b.category else (b, a)
        if hi.category == _COMPLEX and lo.category == _FLOAT:
            if lo._rank > hi._rank:
                return lo.to_complex()
            if lo is bfloat16 and hi is complex32:
                return complex64
        return hi
    if a.category == _INT:
        if a is uint8 or b is uint8:
            other = b if a is uint8 else a
            return int16 if other is int8 else other
        return a if a._rank > b._rank else b
    if a.category == _FLOAT and a._rank == b._rank == 1:
        return float32  # float16 with bfloat16
    return a if a._rank > b._rank else b


def _combine(higher: dtype | None, lower: dtype | None) -> dtype | None:
    """Fold a lower-priority class into a higher one (torch's combine_categories)."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.category == _COMPLEX:
        return higher
    if lower.category == _COMPLEX:
        return higher.to_complex() if higher.category == _FLOAT else lower
    if higher.category == _FLOAT:
        return higher
    if higher is bool_ or lower.category == _FLOAT:
        return promote_types(higher, lower)
    return higher


def scalar_dtype(value) -> dtype:
    """The dtype a Python scalar takes when it is wrapped as a 0-dim tensor."""
    if isinstance(value, (bool, np.bool_)):
        return bool_
    if isinstance(value, (int, np.integer)):
        return int64
    if isinstance(value, (float, np.floating)):
        return _default_dtype
    if isinstance(value, (complex, np.complexfloating)):
        return default_complex_dtype()
    raise TypeError(f"unsupported scalar type {type(value).__name__}")


def result_type_of(dim_dtypes, zero_dtypes, scalars) -> dtype:
    """result_type from the dtypes of dimensioned tensors, 0-dim tensors and Python scalars."""
    dim = zero = wrapped = None
    for d in dim_dtypes:
        dim = d if dim is None else promote_types(dim, d)
    for d in zero_dtypes:
        zero = d if zero is None else promote_types(zero, d)
    for s in scalars:
        d = scalar_dtype(s)
        wrapped = d if wrapped is None else promote_types(wrapped, d)
    return _combine(dim, _combine(zero, wrapped))


def can_cast(from_: dtype, to: dtype) -> bool:
    """Whether torch allows an in-place/out= result of ``from_`` to land in ``to``."""
    if from_.category == _COMPLEX and to.category != _COMPLEX:
        return False
    if from_.category == _FLOAT and to.category < _FLOAT:
        return False
    return from_ is bool_ or to is not bool_  # only bool casts into bool


def dtype_from_any(d) -> dtype:
    """Accept a refimpl dtype, a numpy dtype, a Python type, or a name."""
    if isinstance(d, dtype):
        return d
    if d is float:
        return float64
    if d is int:
        return int64
    if d is bool:
        return bool_
    if d is complex:
        return complex128
    if isinstance(d, str):
        name = d.removeprefix("torch.")
        if name in DTYPES:
            return DTYPES[name]
        if name in ALIASES:
            return ALIASES[name]
    if hasattr(d, "name") and getattr(d, "name", None) in DTYPES and not isinstance(d, np.dtype):
        return DTYPES[d.name]  # another library's dtype object with torch's names
    try:
        return from_numpy_dtype(d)
    except TypeError:
        raise TypeError(f"unsupported dtype {d!r}") from None


def legacy_type_name(d: dtype) -> str:
    """``FloatTensor``-style name used in some torch messages."""
    return f"{d._legacy}Tensor"


def type_name(d: dtype) -> str:
    """The scalar-type name torch uses in messages (``Float``, ``Long``, ``ComplexFloat``)."""
    return d._legacy
