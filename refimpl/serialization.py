"""``refimpl.save`` / ``refimpl.load`` in torch's zip checkpoint format.

A checkpoint is an uncompressed zip archive whose records sit under one folder
(``archive/`` for file objects; torch itself accepts any folder name):

* ``data.pkl``: the object graph, pickled with protocol 2. A tensor pickles as a call
  to ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad,
  OrderedDict())``; its storage is a *persistent id*
  ``('storage', torch.<Type>Storage, key, location, numel)`` whose bytes are the record
  ``data/<key>``. Tensors sharing a storage share the key, so views keep aliasing.
* ``byteorder`` (``little``), ``version`` (``3``), ``.format_version``,
  ``.storage_alignment`` and ``.data/serialization_id``, as torch writes them.

The names in the pickle are torch's (``torch.FloatStorage``, ``torch._utils...``), so
files written here load in torch and files written by torch load here. Loading maps
those names back onto refimpl's objects by hand: torch is never imported.

``weights_only=True`` (the default, as in torch since 2.6) unpickles through an
allow-list: only tensors, storages, dtypes, devices, containers and plain scalars may
be named by the file, so a hostile pickle (one that names ``os.system``) raises
``pickle.UnpicklingError`` before anything runs.
"""

from __future__ import annotations

import _compat_pickle
import collections
import io
import os
import pickle
import secrets
import sys
import zipfile
from typing import Any, BinaryIO, ClassVar

import numpy as np

from refimpl import _dtype as D
from refimpl._device import as_device
from refimpl._device import device as _Device
from refimpl._storage import UntypedStorage
from refimpl._tensor import Tensor
from refimpl.storage import TypedStorage

__all__ = ["load", "save"]

_ARCHIVE = "archive"
_ALIGNMENT = 64  # torch aligns each data record's payload on 64 bytes (for mmap)

# torch's storage class name for every dtype (``FloatStorage`` holds float32, ...).
_STORAGE_NAME = {d: f"{d._legacy}Storage" for d in D.DTYPES.values() if d is not D.complex32}
_DTYPE_OF_STORAGE = {name: d for d, name in _STORAGE_NAME.items()}


class _Global:
    """A name ``module.qualname`` written into the pickle as a GLOBAL opcode.

    refimpl writes torch's names without importing torch: the pickler below writes
    these markers verbatim instead of looking the object up.
    """

    __slots__ = ("module", "name")

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def __call__(self, *args):
        # pickle insists that a reduce function be callable; this one is only a name
        raise TypeError(f"{self.module}.{self.name} is a name written into a checkpoint")


_REBUILD_TENSOR = _Global("torch._utils", "_rebuild_tensor_v2")
_ORDERED_DICT = collections.OrderedDict


class _StorageRef:
    """A tensor's storage seen with the tensor's dtype (torch pickles typed storages)."""

    __slots__ = ("dtype", "storage")

    def __init__(self, storage: UntypedStorage, dtype: D.dtype) -> None:
        self.storage, self.dtype = storage, dtype


class _Pickler(pickle._Pickler):
    """Protocol-2 pickler writing tensors and storages the way torch does."""

    dispatch: ClassVar[dict] = dict(pickle._Pickler.dispatch)

    def __init__(self, file, protocol: int) -> None:
        super().__init__(file, protocol)
        self.records: dict[str, tuple[UntypedStorage, D.dtype]] = {}
        self._keys: dict[int, str] = {}

    def _save_marker(self, obj: _Global) -> None:
        # GLOBAL "module\nname\n", memoised like any global.
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
        self.memoize(obj)

    dispatch[_Global] = _save_marker

    def _save_dtype(self, obj: D.dtype) -> None:
        self._save_marker(_Global("torch", obj.name))

    dispatch[D.dtype] = _save_dtype

    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            return _reduce_tensor(obj)
        if isinstance(obj, _Device):
            return (_Global("torch", "device"), (str(obj),))
        if isinstance(obj, UntypedStorage):
            raise NotImplementedError(
                "refimpl.save does not implement saving a bare storage; save a tensor over it"
            )
        return NotImplemented

    def persistent_id(self, obj):
        if isinstance(obj, TypedStorage):
            obj = _StorageRef(obj._untyped_storage, obj.dtype)
        elif type(obj) is not _StorageRef:
            return None
        storage, dtype = obj.storage, obj.dtype
        key = self._keys.get(id(storage))
        if key is None:
            key = str(len(self._keys))
            self._keys[id(storage)] = key
            self.records[key] = (storage, dtype)
        elif self.records[key][1] is not dtype:
            raise RuntimeError(
                "Cannot save multiple tensors or storages that view the same data as "
                "different types"
            )
        numel = storage.nbytes() // dtype.itemsize
        return ("storage", _Global("torch", _STORAGE_NAME[dtype]), key,
                _location(storage.device), numel)


def _reduce_tensor(t: Tensor):
    if t.device.type == "meta":
        raise NotImplementedError("refimpl.save does not implement saving meta tensors")
    if t.dtype is D.complex32:
        raise NotImplementedError("refimpl.save does not implement complex32 tensors")
    args = (_StorageRef(t.untyped_storage(), t.dtype), t.storage_offset(), tuple(t.shape),
            tuple(t.stride()), bool(t.requires_grad), _ORDERED_DICT())
    return (_REBUILD_TENSOR, args)


def _location(dev: _Device) -> str:
    if dev.type == "cuda":
        return f"cuda:{dev.index if dev.index is not None else 0}"
    return dev.type


def _storage_bytes(storage: UntypedStorage) -> bytes:
    """The storage's bytes on the host (a device-to-host copy for CUDA storages)."""
    n = storage.nbytes()
    if n == 0:
        return b""
    raw = Tensor._make(storage, (n,), (1,), 0, D.uint8)
    if storage.device.type != "cpu":
        raw = raw.cpu()
    return np.asarray(raw._np).tobytes()


def save(obj: Any, f, pickle_module: Any = pickle, pickle_protocol: int = 2,
         _use_new_zipfile_serialization: bool = True, _disable_byteorder_record: bool = False
         ) -> None:
    """Write ``obj`` to ``f`` (a path or a writable binary file) in torch's zip format."""
    if pickle_module is not pickle:
        raise NotImplementedError("refimpl.save does not implement a custom pickle_module")
    if not _use_new_zipfile_serialization:
        raise NotImplementedError("refimpl.save does not implement torch's legacy format")
    buf = io.BytesIO()
    pickler = _Pickler(buf, pickle_protocol)
    pickler.dump(obj)
    records: list[tuple[str, bytes]] = [
        ("data.pkl", buf.getvalue()),
        (".format_version", b"1"),
        (".storage_alignment", str(_ALIGNMENT).encode()),
    ]
    if not _disable_byteorder_record:
        records.append(("byteorder", sys.byteorder.encode()))
    for key, (storage, _dtype) in pickler.records.items():
        records.append((f"data/{key}", _storage_bytes(storage)))
    records.append(("version", b"3\n"))
    records.append((".data/serialization_id", str(secrets.randbits(128)).rjust(40, "0").encode()))
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            _write_zip(fh, records)
    else:
        _write_zip(f, records)


def _write_zip(fh: BinaryIO, records: list[tuple[str, bytes]]) -> None:
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED) as z:
        for name, data in records:
            info = zipfile.ZipInfo(f"{_ARCHIVE}/{name}", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            if name.startswith("data/"):
                # pad the local header's extra field so the payload starts aligned
                start = fh.tell() + 30 + len(info.filename.encode()) + 4
                info.extra = _padding(start)
            z.writestr(info, data)


def _padding(payload_start: int) -> bytes:
    pad = (-payload_start) % _ALIGNMENT
    # an unknown extra-field block (id 0x4650, as torch uses): 4 header bytes + pad
    return b"FP" + pad.to_bytes(2, "little") + b"Z" * pad


# -- loading ----------------------------------------------------------------------------

_WEIGHTS_ONLY_HEAD = (
    "Weights only load failed. In PyTorch 2.6, we changed the default value of the "
    "`weights_only` argument in `torch.load` from `False` to `True`. Re-running "
    "`torch.load` with `weights_only` set to `False` will likely succeed, but it can result "
    "in arbitrary code execution. Do it only if you got the file from a trusted source."
)
_WEIGHTS_ONLY_TAIL = (
    "Check the documentation of torch.load to learn more about types accepted by default "
    "with weights_only https://pytorch.org/docs/stable/generated/torch.load.html."
)
# Modules whose names a weights-only file may never mention (torch words these apart).
_BLOCKED_MODULES = frozenset({"os", "posix", "nt", "subprocess", "sys", "builtins", "shutil",
                              "socket", "importlib", "runpy", "pty", "code", "ctypes"})

_SAFE_BUILTINS = {("collections", "OrderedDict"): collections.OrderedDict,
                  ("builtins", "set"): set, ("builtins", "frozenset"): frozenset,
                  ("builtins", "bytearray"): bytearray, ("builtins", "complex"): complex}


def _weights_only_error(detail: str) -> pickle.UnpicklingError:
    return pickle.UnpicklingError(f"{_WEIGHTS_ONLY_HEAD}\n\n\n{detail}\n\n{_WEIGHTS_ONLY_TAIL}")


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
                       backward_hooks, metadata=None) -> Tensor:
    """Rebuild a tensor over a loaded storage (the callable the pickle names)."""
    t = Tensor._make(storage._untyped_storage, tuple(size), tuple(stride),
                     int(storage_offset), storage.dtype)
    if requires_grad:
        t.requires_grad_(True)
    return _fake_if_in_mode(t)


def _fake_if_in_mode(t: Tensor) -> Tensor:
    """Under a fake tensor mode a loaded tensor comes back as that mode's fake of it (as
    torch's load: the mode sees every tensor the unpickler makes)."""
    from refimpl._dispatch import MODE_STACK

    mode = next((m for m in reversed(MODE_STACK) if hasattr(m, "fake_tensor_converter")), None)
    return t if mode is None else mode.from_tensor(t)


def _rebuild_parameter(data: Tensor, requires_grad: bool, backward_hooks) -> Tensor:
    """``nn.Parameter`` entries: refimpl has no Parameter class, the tensor stands for it."""
    data.requires_grad_(bool(requires_grad))
    return data


def _codecs_encode(text: str, encoding: str = "utf-8") -> bytes:
    """Byte strings pickled by protocol 2 go through ``_codecs.encode(text, 'latin1')``."""
    return text.encode(encoding)


def _torch_global(module: str, name: str):
    """refimpl's object for a torch name a checkpoint may mention, or None."""
    if module == "torch._utils":
        return {"_rebuild_tensor_v2": _rebuild_tensor_v2,
                "_rebuild_parameter": _rebuild_parameter}.get(name)
    if module == "torch":
        if name in _DTYPE_OF_STORAGE:
            return _StorageType(_DTYPE_OF_STORAGE[name])
        if name in D.DTYPES:
            return D.DTYPES[name]
        if name == "device":
            return as_device
        if name == "Size":
            from refimpl._tensor import Size

            return Size
    return None


class _StorageType:
    """A ``torch.<Type>Storage`` name read from a checkpoint: stands for its dtype."""

    __slots__ = ("dtype",)

    def __init__(self, dtype: D.dtype) -> None:
        self.dtype = dtype


class _Unpickler(pickle.Unpickler):
    """Reads ``data.pkl``: storages come from the zip records, torch names map to refimpl."""

    def __init__(self, file, zf: zipfile.ZipFile, prefix: str, map_location,
                 weights_only: bool) -> None:
        super().__init__(file, encoding="utf-8")
        self._zip, self._prefix = zf, prefix
        self._map_location, self._weights_only = map_location, weights_only
        self._loaded: dict[str, UntypedStorage] = {}

    def find_class(self, module: str, name: str):
        # protocol 2 writes Python 2 names (``__builtin__.set``): read them as Python 3's
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        found = _torch_global(module, name)
        if found is not None:
            return found
        if module == "_codecs" and name == "encode":
            return _codecs_encode
        if (module, name) in _SAFE_BUILTINS:
            return _SAFE_BUILTINS[(module, name)]
        if self._weights_only:
            root = module.split(".")[0]
            if root in _BLOCKED_MODULES:
                raise _weights_only_error(
                    f"Trying to load unsupported GLOBAL {module}.{name} whose module "
                    f"{module} is blocked."
                )
            raise _weights_only_error(
                f"Unsupported global: GLOBAL {module}.{name} was not an allowed global by "
                "default."
            )
        if module.startswith("torch"):
            raise NotImplementedError(
                f"refimpl.load does not implement the torch name {module}.{name}"
            )
        return super().find_class(module, name)

    def persistent_load(self, pid):
        if not isinstance(pid, tuple) or not pid or pid[0] != "storage":
            raise pickle.UnpicklingError(f"unsupported persistent id {pid!r}")
        _, storage_type, key, location, numel = pid
        if not isinstance(storage_type, _StorageType):
            raise pickle.UnpicklingError(f"unsupported storage type {storage_type!r}")
        dtype = storage_type.dtype
        storage = self._loaded.get(key)
        if storage is None:
            data = self._zip.read(f"{self._prefix}data/{key}")
            if len(data) < int(numel) * dtype.itemsize:
                raise RuntimeError(
                    f"storage record data/{key} holds {len(data)} bytes, fewer than its "
                    f"{numel} elements of {dtype} need"
                )
            storage = _restore(_host_storage(data), str(location), self._map_location)
            self._loaded[key] = storage
        return TypedStorage._wrap(storage, dtype)


def _host_storage(data: bytes) -> UntypedStorage:
    array = np.frombuffer(data, dtype=np.uint8).copy()
    return UntypedStorage._wrap_numpy(array)


def _restore(cpu: UntypedStorage, location: str, map_location) -> UntypedStorage:
    """Place a loaded storage where ``map_location`` (or the saved location) says."""
    if callable(map_location) and not isinstance(map_location, (str, _Device)):
        result = map_location(cpu, location)
        if result is not None:
            return result
        target = location
    elif isinstance(map_location, dict):
        target = map_location.get(location, location)
    elif map_location is None:
        target = location
    else:
        target = map_location
    dev = target if isinstance(target, _Device) else as_device(str(target))
    if dev.type == "cpu":
        return cpu
    if dev.type == "cuda":
        _check_cuda(dev)
        raw = Tensor._make(cpu, (cpu.nbytes(),), (1,), 0, D.uint8)
        return raw.to(dev).untyped_storage()
    raise NotImplementedError(f"refimpl.load does not implement restoring to '{dev.type}'")


def _check_cuda(dev: _Device) -> None:
    from refimpl import cuda

    if not cuda.is_available():
        raise RuntimeError(
            "Attempting to deserialize object on a CUDA device but "
            "torch.cuda.is_available() is False. If you are running on a CPU-only machine, "
            "please use torch.load with map_location=torch.device('cpu') to map your "
            "storages to the CPU."
        )
    index = dev.index if dev.index is not None else 0
    count = cuda.device_count()
    if index >= count:
        raise RuntimeError(
            f"Attempting to deserialize object on CUDA device {index} but "
            f"torch.cuda.device_count() is {count}. Please use torch.load with map_location "
            "to map your storages to an existing device."
        )


def load(f, map_location=None, pickle_module: Any = None, *, weights_only: bool | None = None,
         mmap: bool | None = None, **pickle_load_args) -> Any:
    """Read an object written by ``refimpl.save`` or ``torch.save`` (zip format)."""
    if pickle_module is not None and pickle_module is not pickle:
        raise NotImplementedError("refimpl.load does not implement a custom pickle_module")
    if mmap:
        raise NotImplementedError("refimpl.load does not implement mmap=True")
    if weights_only is None:
        weights_only = os.environ.get("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "0") in ("0", "")
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            return _load_file(fh, map_location, weights_only)
    return _load_file(f, map_location, weights_only)


def _load_file(fh: BinaryIO, map_location, weights_only: bool) -> Any:
    if not zipfile.is_zipfile(fh):
        raise NotImplementedError(
            "refimpl.load reads torch's zip checkpoint format only (torch's legacy "
            "pre-1.6 format is not implemented)"
        )
    fh.seek(0)
    with zipfile.ZipFile(fh) as zf:
        names = zf.namelist()
        pkl = next((n for n in names if n.endswith("/data.pkl") and n.count("/") == 1), None)
        if pkl is None:
            raise RuntimeError("PytorchStreamReader failed locating file data.pkl: file not found")
        prefix = pkl[: -len("data.pkl")]
        if f"{prefix}byteorder" in names:
            order = zf.read(f"{prefix}byteorder").decode()
            if order != sys.byteorder:
                raise NotImplementedError(
                    f"refimpl.load does not implement loading {order}-endian checkpoints"
                )
        unpickler = _Unpickler(io.BytesIO(zf.read(pkl)), zf, prefix, map_location, weights_only)
        try:
            return unpickler.load()
        except pickle.UnpicklingError:
            raise
        except (NotImplementedError, RuntimeError):
            raise
        except Exception as e:
            if weights_only:
                raise _weights_only_error(f"{type(e).__name__}: {e}") from e
            raise
