"""Typed storages: ``TypedStorage`` and the legacy ``FloatStorage``... classes.

A ``TypedStorage`` is an ``UntypedStorage`` (the bytes) seen as elements of one dtype,
as ``Tensor.storage()`` returns it in torch (deprecated there, still used by old code
and by checkpoints). The legacy classes (``refimpl.FloatStorage``,
``refimpl.cuda.FloatStorage``, ...) construct typed storages and answer ``isinstance``
for any typed storage of their dtype and device type, as torch's do.

Every element access goes through a 1-D tensor over the same bytes, so CUDA storages
read and write on the GPU through the ordinary tensor machinery.
"""

from __future__ import annotations

import builtins
import warnings

from refimpl import _dtype as D
from refimpl._device import as_device
from refimpl._storage import UntypedStorage
from refimpl._tensor import Tensor

__all__ = ["TypedStorage", "UntypedStorage"]

_DEPRECATION = (
    "TypedStorage is deprecated. It will be removed in the future and UntypedStorage will "
    "be the only storage class. This should only matter to you if you are using storages "
    "directly.  To access UntypedStorage directly, use tensor.untyped_storage() instead "
    "of tensor.storage()"
)
_warned = False


def _warn_typed_storage() -> None:
    # torch warns once per process
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(_DEPRECATION, UserWarning, stacklevel=3)


class TypedStorage:
    """An untyped storage's bytes seen as a flat array of ``dtype`` elements."""

    is_sparse = False
    _legacy_device: str | None = None  # set on the legacy classes: "cpu" or "cuda"
    _legacy_dtype: D.dtype | None = None

    def __init__(self, *args, wrap_storage: UntypedStorage | None = None,
                 dtype: D.dtype | None = None, device=None, _internal: bool = False) -> None:
        if not _internal:
            _warn_typed_storage()
        cls = type(self)
        if cls._legacy_dtype is not None:
            dtype = cls._legacy_dtype
            home = as_device(cls._legacy_device)
            if device is not None and as_device(device).type != home.type:
                raise RuntimeError(
                    f"{cls.__name__}: device argument must be {home.type}, not "
                    f"{as_device(device).type}"
                )
            device = home
        self.dtype = dtype if dtype is not None else D.get_default_dtype()
        if wrap_storage is not None:
            if args:
                raise RuntimeError("TypedStorage(): no positional arguments with wrap_storage")
            self._untyped_storage = wrap_storage
            return
        dev = as_device(device) if device is not None else as_device("cpu")
        import refimpl

        if not args:
            flat = refimpl.empty(0, dtype=self.dtype, device=dev)
        elif len(args) == 1 and type(args[0]) is builtins.int:
            flat = refimpl.empty(args[0], dtype=self.dtype, device=dev)
        elif len(args) == 1:
            flat = refimpl.tensor(list(args[0]), dtype=self.dtype, device=dev)
        else:
            raise TypeError(
                f"{cls.__name__}(): expected a size (int), a sequence of values or no "
                f"argument, got {len(args)} arguments"
            )
        self._untyped_storage = flat.untyped_storage()

    @classmethod
    def _wrap(cls, untyped: UntypedStorage, dtype: D.dtype) -> TypedStorage:
        return TypedStorage(wrap_storage=untyped, dtype=dtype, _internal=True)

    # -- metadata -------------------------------------------------------------------------

    @property
    def device(self):
        """The device of the bytes."""
        return self._untyped_storage.device

    @property
    def is_cuda(self) -> builtins.bool:
        """True when the bytes live on a CUDA device."""
        return self.device.type == "cuda"

    @property
    def _cdata(self) -> builtins.int:
        return self._untyped_storage._cdata

    def element_size(self) -> builtins.int:
        """Bytes per element."""
        return self.dtype.itemsize

    def size(self) -> builtins.int:
        """Number of elements."""
        return self._untyped_storage.nbytes() // self.dtype.itemsize

    def __len__(self) -> builtins.int:
        return self.size()

    def nbytes(self) -> builtins.int:
        """Number of bytes."""
        return self._untyped_storage.nbytes()

    def data_ptr(self) -> builtins.int:
        """Address of the first element."""
        return self._untyped_storage.data_ptr()

    def untyped(self) -> UntypedStorage:
        """The bytes underneath."""
        return self._untyped_storage

    def get_device(self) -> builtins.int:
        """The CUDA device index, or -1 on the CPU."""
        return self.device.index if self.is_cuda else -1

    def type(self, dtype=None, non_blocking: builtins.bool = False):
        """The legacy class name (``torch.FloatStorage``), or a copy converted to it."""
        if dtype is None:
            prefix = "torch.cuda." if self.is_cuda else "torch."
            return f"{prefix}{self.dtype._legacy}Storage"
        raise NotImplementedError("refimpl does not implement TypedStorage.type(dtype)")

    # -- elements -------------------------------------------------------------------------

    def _flat(self) -> Tensor:
        """A 1-D tensor over all the elements (shares the bytes)."""
        return Tensor._make(self._untyped_storage, (self.size(),), (1,), 0, self.dtype)

    def __getitem__(self, idx: builtins.int):
        n = self.size()
        if not isinstance(idx, builtins.int):
            # torch raises RuntimeError here (not TypeError)
            raise RuntimeError(  # noqa: TRY004
                f"can't index a <class 'torch.storage.TypedStorage'> with {type(idx)}"
            )
        if not -n <= idx < n:
            raise IndexError(f"index {idx} out of range for storage of size {n}")
        return self._flat()[idx].item()

    def __setitem__(self, idx: builtins.int, value) -> None:
        self._flat()[idx] = value

    def tolist(self) -> list:
        """The elements as Python numbers."""
        if self.device.type == "meta":
            raise NotImplementedError("Not available for 'meta' device type")
        return self._flat().cpu().tolist()

    def fill_(self, value) -> TypedStorage:
        """Set every element to ``value``."""
        self._flat().fill_(value)
        return self

    def __iter__(self):
        return iter(self.tolist())

    def __repr__(self) -> str:
        head = f"[torch.storage.TypedStorage(dtype={self.dtype}, device={self.device}) " \
               f"of size {self.size()}]"
        if self.device.type == "meta":  # a meta or fake tensor's storage has no values
            return f"...\n{head}"
        body = "\n".join(f" {v}" for v in self.tolist())
        return f"{body}\n{head}" if body else head

    # -- conversions ----------------------------------------------------------------------

    def _converted(self, flat: Tensor) -> TypedStorage:
        return TypedStorage._wrap(flat.untyped_storage(), flat.dtype)

    def to(self, *, device=None, dtype: D.dtype | None = None,
           non_blocking: builtins.bool = False) -> TypedStorage:
        """A copy on ``device`` / of ``dtype`` (the same storage when nothing changes)."""
        flat = self._flat().to(device=device, dtype=dtype)
        if flat.untyped_storage() is self._untyped_storage:
            return self
        return self._converted(flat.contiguous())

    def cpu(self) -> TypedStorage:
        """This storage on the CPU (a new view of the same bytes when it is there already)."""
        if self.device.type == "cpu":
            return TypedStorage._wrap(self._untyped_storage, self.dtype)
        return self.to(device="cpu")

    def cuda(self, device=None, non_blocking: builtins.bool = False) -> TypedStorage:
        """This storage on a CUDA device (the current one by default): a new typed storage
        over what ``untyped_storage().cuda(device)`` gives, as torch's."""
        return TypedStorage._wrap(self._untyped_storage.cuda(device, non_blocking), self.dtype)

    def pin_memory(self, device="cuda") -> TypedStorage:
        """A copy of this CPU storage in page-locked memory."""
        if self.is_cuda:
            raise TypeError(f"cannot pin '{self.type()}' only CPU memory can be pinned")
        return self._converted(self._flat().pin_memory())

    def is_pinned(self, device="cuda") -> builtins.bool:
        """Whether the bytes are page-locked host memory."""
        return builtins.bool(self._flat().is_pinned())

    def _cast(self, dtype: D.dtype) -> TypedStorage:
        if dtype is self.dtype:
            return TypedStorage._wrap(self._untyped_storage, dtype)  # a new view, as torch
        return self._converted(self._flat().to(dtype))

    def float(self) -> TypedStorage:
        """A float32 copy (a new view of the same bytes when already float32)."""
        return self._cast(D.float32)

    def double(self) -> TypedStorage:
        """A float64 copy."""
        return self._cast(D.float64)

    def half(self) -> TypedStorage:
        """A float16 copy."""
        return self._cast(D.float16)

    def bfloat16(self) -> TypedStorage:
        """A bfloat16 copy."""
        return self._cast(D.bfloat16)

    def int(self) -> TypedStorage:
        """An int32 copy."""
        return self._cast(D.int32)

    def long(self) -> TypedStorage:
        """An int64 copy."""
        return self._cast(D.int64)

    def short(self) -> TypedStorage:
        """An int16 copy."""
        return self._cast(D.int16)

    def char(self) -> TypedStorage:
        """An int8 copy."""
        return self._cast(D.int8)

    def byte(self) -> TypedStorage:
        """A uint8 copy."""
        return self._cast(D.uint8)

    def bool(self) -> TypedStorage:
        """A bool copy."""
        return self._cast(D.bool_)


class _LegacyStorageMeta(type):
    """Metaclass of FloatStorage...: isinstance matches any typed storage of that kind."""

    def __instancecheck__(cls, obj) -> builtins.bool:
        if type(obj) is TypedStorage and cls._legacy_dtype is not None:
            return obj.dtype is cls._legacy_dtype and obj.device.type == cls._legacy_device
        return type.__instancecheck__(cls, obj)

    @property
    def dtype(cls) -> D.dtype:
        """The dtype of the storages this class builds."""
        return cls._legacy_dtype

    def __repr__(cls) -> str:
        where = "torch.cuda." if cls._legacy_device == "cuda" else "torch."
        return f"<class '{where}{cls.__name__}'>"


def _lazy_new(cls, *args, **kwargs):
    """``__new__`` of the CUDA storage classes: constructing one initialises CUDA first."""
    from refimpl.cuda._lazy import _lazy_init

    _lazy_init()
    return object.__new__(cls)


def make_storage_types(cuda: builtins.bool) -> dict[str, type]:
    """The legacy storage classes for the CPU or for CUDA, by name."""
    out = {}
    for d in D.DTYPES.values():
        if d is D.complex32:
            continue
        name = f"{d._legacy}Storage"
        doc = (f"Legacy storage of {d} elements on {'CUDA devices' if cuda else 'the CPU'}.")
        body = {"_legacy_dtype": d, "_legacy_device": "cuda" if cuda else "cpu",
                "__module__": "refimpl.cuda" if cuda else "refimpl", "__doc__": doc}
        if cuda:
            body["__new__"] = _lazy_new
        out[name] = _LegacyStorageMeta(name, (TypedStorage,), body)
    return out
