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


def _reflected(name: str):
    def method(self, other):
        return getattr(type(self), name)(_as_tensor_like(other, self), self)

    return method


def _as_tensor_like(value, like):
    from refimpl.ops.factories import tensor

    t = tensor(value, device=like.device if like.dim() == 0 or like.is_cpu else None)
    return t if like.is_cpu else t.to(like.device)


def _reverse(fn_name: str):
    """``other OP self`` for non-commutative ops with a Python scalar on the left."""

    def method(self, other):
        from refimpl.ops.factories import full

        left = full((), other, device=self.device)
        return getattr(left, fn_name)(self)

    return method


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
_REVERSED = {
    "__rsub__": "sub", "__rtruediv__": "div", "__rfloordiv__": "floor_divide",
    "__rmod__": "remainder", "__rpow__": "pow", "__rmatmul__": "matmul",
    "__rlshift__": "bitwise_left_shift", "__rrshift__": "bitwise_right_shift",
}


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
            setattr(Tensor, dunder, target)
    for dunder, name in _REVERSED.items():
        if hasattr(Tensor, name):
            setattr(Tensor, dunder, _reverse(name))
    Tensor.__hash__ = lambda self: id(self)
