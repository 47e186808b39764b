"""Binds the ops to Tensor: named methods and Python operators.

Run once when ``refimpl`` is imported. Methods come from the op registry (every op
whose ``extra`` does not say ``method=False``) and from each op module's
``TENSOR_METHODS``; the operator table below maps Python's protocol onto them.
"""

from __future__ import annotations

from refimpl._dispatch import dispatch
from refimpl._tensor import Tensor
from refimpl.ops import REGISTRY, load


def _method(op):
    def method(self, *args, **kwargs):
        return dispatch(op, (self, *args), kwargs)

    method.__name__ = op.name
    method.__doc__ = f"Tensor method form of ``{op.name}``."
    return method


def _public(modules, name: str):
    """The namespace function ``name`` (``refimpl.pow``), found in the op modules."""
    for module in modules:
        if name in getattr(module, "__all__", ()):
            return getattr(module, name)
    return None


def _returns_not_implemented(fn):
    """Python operator protocol as torch has it: a TypeError from the op (an operand the
    op does not accept, ``x == None``) becomes NotImplemented, so Python can try the
    other operand or fall back to identity."""

    def operator(self, other):
        try:
            return fn(self, other)
        except TypeError:
            return NotImplemented

    operator.__name__ = getattr(fn, "__name__", "operator")
    return operator


def _invert(self):
    if self.dtype.category > 1:
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type "
                        "tensors")
    return self.bitwise_not()


_OPERATORS = {
    "__add__": "add", "__radd__": "add", "__iadd__": "add_",
    "__sub__": "sub", "__isub__": "sub_",
    "__mul__": "mul", "__rmul__": "mul", "__imul__": "mul_",
    "__truediv__": "div", "__itruediv__": "div_",
    "__floordiv__": "floor_divide", "__ifloordiv__": "floor_divide_",
    "__mod__": "remainder", "__imod__": "remainder_",
    "__pow__": "pow", "__ipow__": "pow_",
    "__matmul__": "matmul",
    "__neg__": "neg", "__abs__": "abs", "__invert__": "bitwise_not",
    "__and__": "bitwise_and", "__rand__": "bitwise_and", "__iand__": "bitwise_and_",
    "__or__": "bitwise_or", "__ror__": "bitwise_or", "__ior__": "bitwise_or_",
    "__xor__": "bitwise_xor", "__rxor__": "bitwise_xor", "__ixor__": "bitwise_xor_",
    "__lshift__": "bitwise_left_shift", "__rshift__": "bitwise_right_shift",
    "__ilshift__": "bitwise_left_shift_", "__irshift__": "bitwise_right_shift_",
    "__eq__": "eq", "__ne__": "ne", "__lt__": "lt", "__le__": "le", "__gt__": "gt",
    "__ge__": "ge",
    "__getitem__": "__getitem__", "__setitem__": "__setitem__",
}
# ``other OP self`` with a non-tensor on the left: torch's own spellings, so that the
# result dtype and the graph node match (2 - x is rsub, 2 / x is reciprocal * 2).
_REVERSED = {
    "__rsub__": lambda fns: lambda self, other: fns["rsub"](self, other),
    "__rtruediv__": lambda fns: lambda self, other: self.reciprocal() * other,
    "__rpow__": lambda fns: lambda self, other: fns["pow"](other, self),
    "__rfloordiv__": lambda fns: lambda self, other: fns["floor_divide"](other, self),
    "__rmod__": lambda fns: lambda self, other: fns["remainder"](other, self),
    "__rmatmul__": lambda fns: lambda self, other: fns["matmul"](other, self),
    "__rlshift__": lambda fns: lambda self, other: fns["bitwise_left_shift"](other, self),
    "__rrshift__": lambda fns: lambda self, other: fns["bitwise_right_shift"](other, self),
}
_UNARY = {"__neg__", "__abs__", "__invert__", "__getitem__", "__setitem__"}


def bind() -> None:
    """Attach every op method and operator to Tensor."""
    modules = load()
    for op in REGISTRY.values():
        if op.extra.get("method", True) and not hasattr(Tensor, op.name):
            setattr(Tensor, op.name, _method(op))
    for module in modules:
        for name in getattr(module, "TENSOR_METHODS", ()):
            if not hasattr(Tensor, name) or name.startswith("__"):
                setattr(Tensor, name, getattr(module, name))
    for dunder, name in _OPERATORS.items():
        target = getattr(Tensor, name, None)
        if target is not None:
            setattr(Tensor, dunder, target if dunder in _UNARY
                    else _returns_not_implemented(target))
    fns = {n: _public(modules, n) for n in ("rsub", "pow", "floor_divide", "remainder",
                                              "matmul", "bitwise_left_shift",
                                              "bitwise_right_shift")}
    for dunder, make in _REVERSED.items():
        setattr(Tensor, dunder, _returns_not_implemented(make(fns)))
    Tensor.__invert__ = _invert
    # numpy defers to the tensor in mixed expressions (np.float64(2) * x is a tensor)
    Tensor.__array_priority__ = 1000
    Tensor.__hash__ = lambda self: id(self)
