"""torch's TypeErrors for calls that match none of a function's Python overloads (a
Number where torch's signatures want a Tensor), shared by the binary elementwise and
special-function ops."""

from __future__ import annotations

from refimpl._tensor import Tensor


def invalid_arguments(name: str, args: tuple, signatures: tuple) -> TypeError:
    """torch's error for a call that matches none of a function's overloads."""
    got = ", ".join("Tensor" if isinstance(a, Tensor) else type(a).__name__ for a in args)
    options = "".join(f"\n * ({s})" for s in signatures)
    return TypeError(f"{name}() received an invalid combination of arguments - got ({got}), "
                     f"but expected one of:{options}\n")


def tensor_first(name: str, args: tuple, second: str = "other") -> None:
    """Raise torch's error when the first operand is not a tensor (``(Tensor, Tensor)``
    and ``(Tensor, Number)`` are the only overloads)."""
    if not isinstance(args[0], Tensor):
        raise invalid_arguments(name, args, (f"Tensor input, Tensor {second}, *, Tensor out = None",
                                             f"Tensor input, Number {second}, *, Tensor out = None"))


def some_tensor(name: str, args: tuple, second: str = "other") -> None:
    """Raise torch's error when neither operand is a tensor (a Number may come first)."""
    if not any(isinstance(a, Tensor) for a in args):
        raise invalid_arguments(name, args, (f"Tensor input, Tensor {second}, *, Tensor out = None",
                                             f"Number self, Tensor {second}, *, Tensor out = None",
                                             f"Tensor input, Number {second}, *, Tensor out = None"))
