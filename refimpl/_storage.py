"""Storage: the bytes under one or more tensors (spec: TENSOR-001 and following).

A ``UntypedStorage`` owns a flat byte buffer on one device:

* cpu: a numpy ``uint8`` array; its address is ``data_ptr()``;
* cuda: a block from the caching allocator (``refimpl.cuda``), released to the
  allocator when the storage is garbage-collected;
* meta: no bytes at all, only a size (fake tensors and shape inference use it).

Views share the storage object; nothing here copies behind the user's back.
"""

from __future__ import annotations

import weakref

import numpy as np

from refimpl._device import CPU, as_device, device
from refimpl._device import device as _Device


class UntypedStorage:
    """A flat buffer of bytes on a device."""

    __slots__ = ("__weakref__", "_data", "_nbytes", "_resizable", "device")

    def __init__(self, nbytes: int = 0, *, device=None, _data=None) -> None:
        self.device = device if type(device) is _Device else as_device(device)
        self._resizable = True
        if _data is not None:
            self._data = _data
            self._nbytes = int(nbytes)
            return
        self._nbytes = int(nbytes)
        self._data = _allocate(self._nbytes, self.device)

    @classmethod
    def _on_cuda(cls, nbytes: int, dev: device) -> UntypedStorage:
        """A fresh storage on ``cuda:i`` (an indexed device), straight from the allocator."""
        global _cuda_memory
        if _cuda_memory is None:
            from refimpl.cuda import _tensor_memory as _cuda_memory
        return _cuda_memory.new_storage(nbytes, dev)

    @classmethod
    def _wrap_numpy(cls, array: np.ndarray, resizable: bool = True) -> UntypedStorage:
        """A CPU storage aliasing the bytes of a C-contiguous numpy array (no copy).

        The array itself is kept as the buffer (tensors view it through the buffer
        protocol, whatever their dtype). Storages shared with numpy (``from_numpy``)
        are not resizable, as in torch.
        """
        s = object.__new__(cls)
        s.device, s._data, s._nbytes, s._resizable = CPU, array, array.nbytes, resizable
        return s

    def nbytes(self) -> int:
        """Size of the storage in bytes."""
        return self._nbytes

    def size(self) -> int:
        """Size in bytes (an untyped storage counts bytes)."""
        return self._nbytes

    def data_ptr(self) -> int:
        """Address of the first byte (0 for an empty or meta storage)."""
        if self.device.type == "cpu":
            return int(self._data.ctypes.data) if self._nbytes else 0
        if self.device.type == "cuda":
            return int(self._data.ptr) if self._nbytes else 0
        return 0

    @property
    def _cdata(self) -> int:
        """An identity of this storage (equal for every tensor that shares it, as torch's).

        ``storage_from_cdata`` turns it back into the storage while that lives.
        """
        _by_cdata[id(self)] = self
        return id(self)

    @property
    def is_cuda(self) -> bool:
        """True when the bytes live on a CUDA device."""
        return self.device.type == "cuda"

    def resize_(self, nbytes: int) -> UntypedStorage:
        """Grow or shrink in place, keeping the common prefix of the bytes."""
        if not self._resizable:
            raise RuntimeError(
                "Trying to resize storage that is not resizable"
            )
        nbytes = int(nbytes)
        if self.device.type == "cpu":
            new = np.zeros(nbytes, dtype=np.uint8)
            n = min(nbytes, self._nbytes)
            new[:n] = self._data.reshape(-1).view(np.uint8)[:n]
            self._data = new
        elif self.device.type == "cuda":
            from refimpl.cuda import _tensor_memory

            self._data = _tensor_memory.resize(self._data, self._nbytes, nbytes, self.device)
        self._nbytes = nbytes
        return self

    def _as_bytes(self):
        """A flat uint8 tensor over these bytes (shares them)."""
        from refimpl import _dtype
        from refimpl._tensor import Tensor

        return Tensor._make(self, (self._nbytes,), (1,), 0, _dtype.uint8)

    def cpu(self) -> UntypedStorage:
        """These bytes on the CPU: itself when already there, else a copy."""
        if self.device.type == "cpu":
            return self
        return self._as_bytes().cpu().untyped_storage()

    def cuda(self, device=None, non_blocking: bool = False) -> UntypedStorage:
        """These bytes on a CUDA device (the current one by default).

        As torch's: itself only when a non-zero ``device`` names the device it is on; with
        no device (or device 0) the target is plain ``"cuda"``, which never equals an
        indexed device, so a copy is made even when the bytes are already there.
        """
        target = as_device(f"cuda:{device}" if isinstance(device, int) and device
                           else device if device else "cuda")
        if self.device == target:
            return self
        return self._as_bytes().to(target, copy=True).untyped_storage()

    def pin_memory(self, device="cuda") -> UntypedStorage:
        """A copy of these CPU bytes in page-locked host memory."""
        return self._as_bytes().pin_memory().untyped_storage()

    def is_pinned(self, device="cuda") -> bool:
        """Whether these bytes are page-locked host memory."""
        return self._as_bytes().is_pinned()

    def __len__(self) -> int:
        return self._nbytes

    def __repr__(self) -> str:
        return f"UntypedStorage(device={self.device}, nbytes={self._nbytes})"


_cuda_memory = None  # refimpl.cuda._tensor_memory, imported on the first CUDA storage
_by_cdata: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def storage_from_cdata(cdata: int) -> UntypedStorage:
    """The live storage whose ``_cdata`` was read as ``cdata`` (torch's raw pointers)."""
    storage = _by_cdata.get(int(cdata))
    if storage is None:
        raise RuntimeError(f"no live storage has _cdata {cdata}")
    return storage


def _allocate(nbytes: int, dev: device):
    global _cuda_memory
    if dev.type == "cuda":
        if _cuda_memory is None:
            from refimpl.cuda import _tensor_memory as _cuda_memory
        return _cuda_memory.allocate(nbytes, dev)
    if dev.type == "cpu":
        return np.zeros(nbytes, dtype=np.uint8)
    if dev.type == "meta":
        return None
    raise NotImplementedError(f"refimpl does not implement storage on '{dev.type}'")


class VersionCounter:
    """The in-place version shared by a tensor, its views and its detached aliases."""

    __slots__ = ("version",)

    def __init__(self, version: int = 0) -> None:
        self.version = version

    def bump(self) -> None:
        """Record one in-place modification."""
        self.version += 1
