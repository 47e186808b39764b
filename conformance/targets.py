"""Targets: the module a case's ``t`` is bound to, and the tiny adapters around it.

A target is any importable module speaking the torch-like API: ``refimpl`` (the
default), ``torch`` (the oracle) or ``--target some.module``. The engine touches a
target only through :class:`Adapter`, which keeps three things in one place:

- ``names``: extra names a program sees, mapped to dotted module paths that are
  imported on first use (for torch, ``fake`` is ``torch._subclasses.fake_tensor``);
- helpers whose spelling differs between targets (storage pointer, memory stats,
  building a tensor from a numpy array);
- facts about the target (version, CUDA devices) for requirements and reports.

A third-party module may extend ``names`` without code here by defining
``__tensorctl_names__ = {"fake": "mymodule.fake"}``.
"""

from __future__ import annotations

import builtins
import importlib
import importlib.metadata
import importlib.util
import types
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

#: Names that only exist under these spellings on some targets.
_SUBSTITUTE_DTYPE = {"bfloat16": np.float32}


class TargetImportError(Exception):
    """The target module could not be imported (the message is one line)."""


@dataclass
class TargetInfo:
    """What the report and the requirement checks need to know about a target."""

    name: str
    version: str | None = None
    torch_version: str | None = None
    cuda_devices: list[str] = field(default_factory=list)

    @property
    def cuda_available(self) -> bool:
        """Whether the target sees at least one CUDA device."""
        return bool(self.cuda_devices)


class LazyModule(types.ModuleType):
    """A module proxy that imports ``dotted`` on first attribute access."""

    def __init__(self, dotted: str) -> None:
        super().__init__(dotted)
        self.__dict__["_dotted"] = dotted

    def _load(self) -> types.ModuleType:
        return importlib.import_module(self.__dict__["_dotted"])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._load(), name)

    def __repr__(self) -> str:
        return f"<lazy module {self.__dict__['_dotted']!r}>"


def installed_torch_version() -> str | None:
    """The installed torch's version, read from package metadata (torch is not imported)."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


class Adapter:
    """Binds one imported target module to the names and helpers the engine uses."""

    names: ClassVar[dict[str, str]] = {}
    #: Whether the module may be imported once in the fork server and inherited by
    #: forked workers: its import starts no threads and touches no GPU.
    preload: ClassVar[bool] = False

    def __init__(self, name: str, module: types.ModuleType) -> None:
        self.name = name
        self.t = module
        self._tensor_type = getattr(module, "Tensor", None)
        self._dtype_type = type(getattr(module, "float32", None))
        self._device_type = getattr(module, "device", None)
        names = dict(self.names)
        names.update(getattr(module, "__tensorctl_names__", {}) or {})
        self._extra = {key: LazyModule(path) for key, path in names.items()}

    # -- the namespace -------------------------------------------------------------
    def namespace(self) -> dict[str, Any]:
        """The names every program starts with that come from the target."""
        return {"t": self.t, "target": self.name, **self._extra}

    # -- dtypes and tensors --------------------------------------------------------
    def dtype(self, name: str) -> Any:
        """The target's dtype object called ``name`` (FORMAT.md dtype names)."""
        try:
            return getattr(self.t, name)
        except AttributeError:
            raise AttributeError(f"target {self.name!r} has no dtype {name!r}") from None

    def dtype_name(self, dtype: Any) -> str:
        """``"float32"`` for the target's float32 dtype object."""
        return str(dtype).rsplit(".", 1)[-1]

    def is_tensor(self, value: Any) -> bool:
        """Whether ``value`` is a tensor of the target."""
        if self._tensor_type is not None and isinstance(self._tensor_type, type):
            return isinstance(value, self._tensor_type)
        return hasattr(value, "dtype") and hasattr(value, "shape") and hasattr(value, "tolist")

    def is_dtype(self, value: Any) -> bool:
        """Whether ``value`` is a dtype object of the target."""
        return self._dtype_type is not type(None) and isinstance(value, self._dtype_type)

    def is_device(self, value: Any) -> bool:
        """Whether ``value`` is a device object of the target."""
        return isinstance(self._device_type, type) and isinstance(value, self._device_type)

    def make_tensor(self, array: np.ndarray, dtype: str, device: str, requires_grad: bool) -> Any:
        """A target tensor holding ``array`` (built through ``t.tensor``).

        dtypes numpy lacks (bfloat16) are built in float32 and converted, so the
        values the target holds are the values the harness rounded them to.
        """
        t = self.t
        if dtype in _SUBSTITUTE_DTYPE:
            tensor = t.tensor(array, dtype=t.float32, device=device).to(self.dtype(dtype))
            return tensor.requires_grad_(True) if requires_grad else tensor
        return t.tensor(array, dtype=self.dtype(dtype), device=device, requires_grad=requires_grad)

    def tensor_data(self, tensor: Any) -> Any:
        """The tensor's values as nested Python lists, or None when it has no data."""
        if str(getattr(tensor.device, "type", tensor.device)) == "meta":
            return None
        host = tensor.detach()
        if self.dtype_name(host.dtype) == "bfloat16":
            host = host.to(self.t.float32)
        if str(getattr(host.device, "type", host.device)) != "cpu":
            host = host.cpu()
        return host.tolist()

    def storage_ptr(self, tensor: Any) -> int:
        """The address of the storage behind ``tensor`` (equal for views of one storage)."""
        return int(tensor.untyped_storage().data_ptr())

    # -- devices and memory --------------------------------------------------------
    def cuda_devices(self) -> list[str]:
        """Names of the CUDA devices the target sees (empty without CUDA)."""
        cuda = getattr(self.t, "cuda", None)
        try:
            if cuda is None or not cuda.is_available():
                return []
            return [str(cuda.get_device_name(i)) for i in range(cuda.device_count())]
        except Exception:  # noqa: BLE001 - a broken CUDA layer means "no CUDA" here
            return []

    def memory_stat(self, stat: str, device: str = "cuda") -> int:
        """One entry of the target's ``cuda.memory_stats(device)`` (0 when absent)."""
        return int(self.t.cuda.memory_stats(device).get(stat, 0))

    # -- names of exceptions and warnings -------------------------------------------
    def resolve_class(self, name: str) -> type:
        """A builtin exception/warning class by name, or ``t.a.B`` looked up on the target."""
        if name.startswith("t."):
            value: Any = self.t
            for part in name.split(".")[1:]:
                value = getattr(value, part)
            if not isinstance(value, type):
                raise TypeError(f"{name} is not a class on target {self.name!r}")
            return value
        return getattr(builtins, name)

    def info(self) -> TargetInfo:
        """Version and devices of the target, for reports and requirements."""
        version = getattr(self.t, "__version__", None)
        torch_version = str(version) if self.name == "torch" else installed_torch_version()
        return TargetInfo(
            name=self.name,
            version=None if version is None else str(version),
            torch_version=torch_version,
            cuda_devices=self.cuda_devices(),
        )


class TorchAdapter(Adapter):
    """Real torch, the oracle."""

    names: ClassVar[dict[str, str]] = {"fake": "torch._subclasses.fake_tensor"}
    preload: ClassVar[bool] = True  # CUDA initialises lazily; DataLoader forks after import too


class RefimplAdapter(Adapter):
    """tensorctl's own runtime."""

    names: ClassVar[dict[str, str]] = {"fake": "refimpl._subclasses.fake_tensor"}
    preload: ClassVar[bool] = True  # the CUDA driver is loaded lazily (ARCHITECTURE.md)


ADAPTERS: dict[str, type[Adapter]] = {"torch": TorchAdapter, "refimpl": RefimplAdapter}


def target_missing(name: str) -> bool:
    """Whether ``name``'s top-level package is not installed at all."""
    try:
        return importlib.util.find_spec(name.split(".")[0]) is None
    except (ImportError, ValueError):
        return True


def load_target(name: str) -> Adapter:
    """Import the target module ``name`` and wrap it in its adapter.

    Raises TargetImportError with a one-line reason when the import fails in any way.
    """
    try:
        module = importlib.import_module(name)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a target may fail in any way
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise TargetImportError(
            f"cannot import target {name!r}: {type(exc).__name__}: {detail}"
        ) from None
    return ADAPTERS.get(name, Adapter)(name, module)
