"""Op namespaces and user-defined ops (torch's ``torch.ops`` and ``torch.library``).

``refimpl.ops.aten.<name>.<overload>`` reaches refimpl's ops by torch's names (overloads
all lead to the one definition of the op; ``aten.copy`` and ``aten.copy.out`` are the
functional copies torch has). ``Library(ns, "DEF")`` declares ops of a user namespace,
reached as ``refimpl.ops.<ns>.<name>.default``; ``impl(lib, name, "CPU")`` gives them a
kernel. A user op has no meta function unless registered for ``"Meta"``, so fake tensors
refuse it with ``UnsupportedOperatorException`` (spec: FAKE-400), as torch does for ops
outside its own namespaces.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from refimpl.ops._registry import REGISTRY, OpDef, TensorSpec


class OpOverload:
    """One overload of an op: callable, with torch's ``name()``."""

    def __init__(self, namespace: str, name: str, overload: str, fn: Callable) -> None:
        self._namespace, self._name, self._overload, self._fn = namespace, name, overload, fn

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def name(self) -> str:
        """``namespace::name.overload`` (``.default`` is left out, as torch prints it)."""
        suffix = "" if self._overload == "default" else f".{self._overload}"
        return f"{self._namespace}::{self._name}{suffix}"

    def __repr__(self) -> str:
        return f"{self._namespace}.{self._name}.{self._overload}"


class OpOverloadPacket:
    """All overloads of one op name: ``packet.default``, ``packet.Tensor``, ... ."""

    def __init__(self, namespace: str, name: str, resolve: Callable[[str], Callable]) -> None:
        self._namespace, self._name, self._resolve = namespace, name, resolve

    def __getattr__(self, overload: str) -> OpOverload:
        if overload.startswith("__"):
            raise AttributeError(overload)
        return OpOverload(self._namespace, self._name, overload, self._resolve(overload))

    def __call__(self, *args, **kwargs):
        return self._resolve("default")(*args, **kwargs)


def _copy(self, src, non_blocking: bool = False):
    return self.clone().copy_(src, non_blocking)


def _copy_out(self, src, non_blocking: bool = False, *, out):
    return out.resize_(self.shape).copy_(src, non_blocking)


def _slice_scatter(self, src, dim: int = 0, start=None, end=None, step: int = 1):
    out = self.clone()
    index = [slice(None)] * self.dim()
    index[dim] = slice(start, end, step)
    out[tuple(index)] = src
    return out


def _slice_scatter_out(self, src, dim: int = 0, start=None, end=None, step: int = 1, *, out):
    return out.resize_(self.shape).copy_(_slice_scatter(self, src, dim, start, end, step))


# aten ops whose torch form refimpl spells as a composition of its own ops
_COMPOSITES = {
    ("copy", "default"): _copy, ("copy", "out"): _copy_out,
    ("slice_scatter", "default"): _slice_scatter, ("slice_scatter", "out"): _slice_scatter_out,
}


def register_composite(name: str, overloads: tuple, fn: Callable) -> None:
    """Make ``ops.aten.<name>.<overload>`` call ``fn`` (an op refimpl composes of its own)."""
    for overload in overloads:
        _COMPOSITES[(name, overload)] = fn


class _AtenNamespace:
    """``ops.aten``: refimpl's ops under torch's names."""

    def __getattr__(self, name: str) -> OpOverloadPacket:
        if name.startswith("__"):
            raise AttributeError(name)

        def resolve(overload: str) -> Callable:
            fn = _COMPOSITES.get((name, overload))
            if fn is not None:
                return fn
            op = REGISTRY.get(f"{name}.{overload}") or REGISTRY.get(name)
            if op is None:
                raise NotImplementedError(f"refimpl has no op aten::{name}.{overload}")
            return op

        return OpOverloadPacket("aten", name, resolve)


class _UserNamespace:
    """``ops.<ns>`` for a namespace declared with ``Library(ns, "DEF")``."""

    def __init__(self, ns: str) -> None:
        self._ns = ns
        self._ops: dict[str, OpDef] = {}

    def __getattr__(self, name: str) -> OpOverloadPacket:
        op = self._ops.get(name) if not name.startswith("__") else None
        if op is None:
            raise AttributeError(f"'_OpNamespace' '{self._ns}' object has no attribute '{name}'")
        return OpOverloadPacket(self._ns, name, lambda overload: op)


NAMESPACES: dict[str, object] = {"aten": _AtenNamespace()}
_SCHEMA = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z0-9_]+))?\s*\(")


class Library:
    """A set of op declarations and kernels for one namespace (``kind`` "DEF" or "IMPL")."""

    def __init__(self, ns: str, kind: str) -> None:
        if kind not in ("DEF", "IMPL", "FRAGMENT"):
            raise ValueError("Unsupported kind: ", kind)
        self.ns, self.kind = ns, kind
        self._defined: list[str] = []
        if kind == "DEF":
            if ns in NAMESPACES:
                raise RuntimeError(f"Only a single TORCH_LIBRARY can be used to register the "
                                   f"namespace {ns}")
            NAMESPACES[ns] = _UserNamespace(ns)

    def define(self, schema: str) -> str:
        """Declare an op from its schema (``"foo(Tensor self) -> Tensor"``)."""
        m = _SCHEMA.match(schema)
        if m is None:
            raise RuntimeError(f"Invalid schema: {schema}")
        name = m.group(1)
        space = NAMESPACES[self.ns]
        space._ops[name] = OpDef(f"{self.ns}::{name}", differentiable=False,
                                 extra={"custom": True, "method": False})
        self._defined.append(name)
        return name

    def impl(self, op_name: str, fn: Callable, dispatch_key: str = "") -> None:
        """Register ``fn`` as the op's kernel for ``dispatch_key`` (CPU, CUDA or Meta)."""
        op = NAMESPACES[self.ns]._ops[op_name]
        if dispatch_key == "CPU":
            op.cpu = fn
        elif dispatch_key == "CUDA":
            op.cuda = fn
        elif dispatch_key == "Meta":
            def meta(*args, **kwargs):
                out = fn(*args, **kwargs)
                return TensorSpec(tuple(out.shape), out.dtype, None)
            op.meta = meta
        else:
            raise NotImplementedError(f"refimpl's Library has no dispatch key {dispatch_key!r}")

    def _destroy(self) -> None:
        """Forget everything this library registered."""
        if self.kind == "DEF":
            NAMESPACES.pop(self.ns, None)


def impl(lib: Library, name: str, dispatch_key: str = "") -> Callable:
    """Decorator form of ``Library.impl``."""
    def register(fn: Callable) -> Callable:
        lib.impl(name, fn, dispatch_key)
        return fn

    return register


__all__ = ["Library", "OpOverload", "OpOverloadPacket", "impl"]
