"""Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict (NN-060..).

Each keeps its items in the Module registries under string keys ("0", "1", ... for the
list-like ones), so parameters, state dicts and ``to()`` see through them.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Self

from refimpl._tensor import Tensor
from refimpl.nn.modules.module import Module, _addindent
from refimpl.nn.parameter import Parameter


def _abs_index(idx, size: int) -> int:
    idx = operator.index(idx)
    if not -size <= idx < size:
        raise IndexError(f"index {idx} is out of range")
    return idx % size if size else idx


def _grouped_repr(name: str, reprs: list[str]) -> str:
    """``Name((0-2): 3 x Linear(...) ...)``: runs of equal reprs printed once."""
    if not reprs:
        return name + "()"
    runs: list[list] = []
    for i, r in enumerate(reprs):
        if runs and runs[-1][2] == r:
            runs[-1][1] = i
        else:
            runs.append([i, i, r])
    lines = []
    for start, end, r in runs:
        head = f"({start}): {r}" if start == end else f"({start}-{end}): {end - start + 1} x {r}"
        lines.append(_addindent(head, 2))
    return name + "(\n  " + "\n  ".join(lines) + "\n)"


class Sequential(Module):
    """Modules called in order, each on the previous one's output."""

    def __init__(self, *args) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        keys = list(self._modules)
        return self._modules[keys[_abs_index(idx, len(keys))]]

    def __setitem__(self, idx: int, module: Module) -> None:
        keys = list(self._modules)
        setattr(self, keys[_abs_index(idx, len(keys))], module)

    def __delitem__(self, idx) -> None:
        keys = list(self._modules)
        if isinstance(idx, slice):
            for key in keys[idx]:
                delattr(self, key)
        else:
            delattr(self, keys[_abs_index(idx, len(keys))])
        self._modules = OrderedDict((str(i), m) for i, m in enumerate(self._modules.values()))

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __add__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError(  # noqa: TRY004 (torch's type)
                "add operator supports only objects of Sequential class, but "
                f"{type(other)} is given.")
        out = Sequential()
        for m in (*self, *other):
            out.append(m)
        return out

    def __mul__(self, other: int) -> Sequential:
        if not isinstance(other, int):
            raise TypeError(f"unsupported operand type(s) for *: {type(self)} and {type(other)}")
        if other <= 0:
            raise ValueError(f"Non-positive multiplication factor {other} for {type(self)}")
        out = Sequential()
        for _ in range(other):
            for m in self:
                out.append(m)
        return out

    def append(self, module: Module) -> Sequential:
        """Add ``module`` at the end."""
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        """Insert ``module`` before position ``index``."""
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")  # noqa: TRY004 (torch)
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules = OrderedDict((str(i), m) for i, m in enumerate(items))
        return self

    def extend(self, sequential: Iterable[Module]) -> Sequential:
        """Append every module of ``sequential``."""
        for m in sequential:
            self.append(m)
        return self

    def pop(self, key: int) -> Module:
        """Remove and return the module at ``key``."""
        v = self[key]
        del self[key]
        return v

    def forward(self, input):
        """Run the modules in order."""
        for module in self:
            input = module(input)
        return input


class ModuleList(Module):
    """A list of submodules, registered as "0", "1", ..."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self += modules

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_abs_index(idx, len(self)))]

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, str(_abs_index(idx, len(self))), module)

    def __delitem__(self, idx) -> None:
        if isinstance(idx, slice):
            for k in range(len(self._modules))[idx]:
                delattr(self, str(k))
        else:
            delattr(self, str(_abs_index(idx, len(self))))
        self._modules = OrderedDict((str(i), m) for i, m in enumerate(self._modules.values()))

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __iadd__(self, modules: Iterable[Module]) -> Self:
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        out = ModuleList()
        for m in (*self, *other):
            out.append(m)
        return out

    def __repr__(self) -> str:
        return _grouped_repr(self._get_name(), [repr(m) for m in self])

    def insert(self, index: int, module: Module) -> None:
        """Insert ``module`` before position ``index``."""
        for i in range(len(self._modules), index, -1):
            self._modules[str(i)] = self._modules[str(i - 1)]
        self._modules[str(index)] = module

    def append(self, module: Module) -> ModuleList:
        """Add ``module`` at the end."""
        self.add_module(str(len(self)), module)
        return self

    def pop(self, key: int) -> Module:
        """Remove and return the module at ``key``."""
        v = self[key]
        del self[key]
        return v

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        """Append every module of ``modules``."""
        if not isinstance(modules, Iterable):
            raise TypeError("ModuleList.extend should be called with an iterable, but got "
                            + type(modules).__name__)
        offset = len(self)
        for i, module in enumerate(modules):
            self.add_module(str(offset + i), module)
        return self


def _pairs(name: str, values) -> Iterable:
    if not isinstance(values, Iterable):
        raise TypeError(f"{name}.update should be called with an iterable of key/value pairs, "
                        f"but got {type(values).__name__}")
    if isinstance(values, (OrderedDict, ModuleDict, ParameterDict)):
        return list(values.items())
    if isinstance(values, Mapping):
        # ParameterDict sorts a plain mapping's keys; ModuleDict keeps its order (torch)
        return sorted(values.items()) if name == "ParametersDict" else list(values.items())
    out = []
    for j, m in enumerate(values):
        if not isinstance(m, Iterable):
            raise TypeError(f"{name} update sequence element #{j} should be Iterable; is"
                            + type(m).__name__)
        m = tuple(m)
        if len(m) != 2:
            raise ValueError(f"{name} update sequence element #{j} has length {len(m)}; "
                             "2 is required")
        out.append(m)
    return out


class ModuleDict(Module):
    """An ordered dict of submodules by name."""

    def __init__(self, modules: Mapping[str, Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def clear(self) -> None:
        """Remove every module."""
        self._modules.clear()

    def pop(self, key: str) -> Module:
        """Remove and return the module ``key``."""
        v = self[key]
        del self[key]
        return v

    def keys(self):
        """The names."""
        return self._modules.keys()

    def items(self):
        """(name, module) pairs."""
        return self._modules.items()

    def values(self):
        """The modules."""
        return self._modules.values()

    def update(self, modules) -> None:
        """Add (name, module) pairs from a mapping or an iterable of pairs."""
        for key, module in _pairs("ModuleDict", modules):
            self[key] = module


def _param_line(key, p) -> str:
    if not isinstance(p, Tensor):
        return f"  ({key}): Object of type: {type(p).__name__}"
    size = "x".join(str(s) for s in p.size())
    dev = f" ({p.device})" if p.device.type == "cuda" else ""
    kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
    return f"  ({key}): {kind} containing: [{p.dtype} of size {size}{dev}]"


class ParameterList(Module):
    """A list of parameters (plain tensors become Parameters)."""

    def __init__(self, values: Iterable | None = None) -> None:
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)([self[i] for i in range(len(self))[idx]])
        return getattr(self, str(_abs_index(idx, len(self))))

    def __setitem__(self, idx: int, param) -> None:
        idx = _abs_index(idx, len(self))
        if isinstance(param, Tensor) and not isinstance(param, Parameter):
            param = Parameter(param)
        setattr(self, str(idx), param)

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator:
        return (self[i] for i in range(len(self)))

    def __iadd__(self, parameters: Iterable) -> Self:
        return self.extend(parameters)

    def __dir__(self) -> list:
        return [k for k in super().__dir__() if not k.isdigit()]

    def append(self, value) -> ParameterList:
        """Add ``value`` at the end."""
        n = len(self)
        self._size += 1
        self[n] = value
        return self

    def extend(self, values: Iterable) -> ParameterList:
        """Append every value."""
        if not isinstance(values, Iterable) or isinstance(values, Tensor):
            raise TypeError("ParameterList.extend should be called with an iterable, but got "
                            + type(values).__name__)
        for v in values:
            self.append(v)
        return self

    def extra_repr(self) -> str:
        return "\n".join(_param_line(k, p) for k, p in enumerate(self))

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """An ordered dict of parameters by name (plain tensors become Parameters)."""

    def __init__(self, parameters=None) -> None:
        super().__init__()
        self._keys: dict[str, None] = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str):
        return getattr(self, key)

    def __setitem__(self, key: str, value) -> None:
        self._keys[key] = None
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, key, value)

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def keys(self):
        """The names."""
        return self._keys.keys()

    def items(self):
        """(name, parameter) pairs."""
        return ((k, self[k]) for k in self._keys)

    def values(self):
        """The parameters."""
        return (self[k] for k in self._keys)

    def get(self, key: str, default=None):
        """The parameter ``key``, or ``default``."""
        return self[key] if key in self else default  # noqa: SIM401 (this is get)

    def pop(self, key: str):
        """Remove and return the parameter ``key``."""
        v = self[key]
        del self[key]
        return v

    def clear(self) -> None:
        """Remove every parameter."""
        for k in list(self._keys):
            del self[k]

    def update(self, parameters) -> None:
        """Add (name, parameter) pairs from a mapping or an iterable of pairs."""
        for key, value in _pairs("ParametersDict", parameters):
            self[key] = value

    def extra_repr(self) -> str:
        return "\n".join(_param_line(k, p) for k, p in self.items())

    def __call__(self, input):
        raise RuntimeError("ParameterDict should not be called.")
