"""Typed storages (torch's ``torch.storage``): the legacy, dtype-aware view of a storage.

``tensor.storage()`` returns a ``TypedStorage``: the tensor's ``UntypedStorage`` read as
elements of the tensor's dtype. torch deprecates it (and warns once); it survives for its
printing and for ``set_``. Spec: FAKE-601.
"""

from __future__ import annotations

import warnings

import numpy as np

from refimpl import _dtype as D
from refimpl._storage import UntypedStorage

_warned = False


def _warn_typed_storage_removal() -> None:
    global _warned
    if _warned:
        return
    _warned = True
    warnings.warn(
        "TypedStorage is deprecated. It will be removed in the future and UntypedStorage will "
        "be the only storage class. This should only matter to you if you are using storages "
        "directly.  To access UntypedStorage directly, use tensor.untyped_storage() instead "
        "of tensor.storage()", UserWarning, stacklevel=3)


class TypedStorage:
    """An ``UntypedStorage`` seen as a flat sequence of ``dtype`` elements."""

    def __init__(self, *, wrap_storage: UntypedStorage, dtype: D.dtype) -> None:
        self._untyped_storage = wrap_storage
        self.dtype = dtype

    @property
    def device(self):
        """The device of the bytes (``meta`` for a fake tensor's storage)."""
        return self._untyped_storage.device

    @property
    def is_cuda(self) -> bool:
        """True on a CUDA device."""
        return self.device.type == "cuda"

    @property
    def _cdata(self) -> int:
        return self._untyped_storage._cdata

    def untyped(self) -> UntypedStorage:
        """The underlying untyped storage."""
        return self._untyped_storage

    def size(self) -> int:
        """The number of elements."""
        return self._untyped_storage.nbytes() // self.dtype.itemsize

    def __len__(self) -> int:
        return self.size()

    def nbytes(self) -> int:
        """The size in bytes."""
        return self._untyped_storage.nbytes()

    def element_size(self) -> int:
        """Bytes per element."""
        return self.dtype.itemsize

    def data_ptr(self) -> int:
        """Address of the first element."""
        return self._untyped_storage.data_ptr()

    def _values(self) -> np.ndarray:
        s = self._untyped_storage
        if s.device.type == "cuda":
            from refimpl._tensor import Tensor

            t = Tensor._make(s, (self.size(),), (1,), 0, self.dtype)
            return t.cpu()._np
        raw = np.asarray(s._data).reshape(-1).view(np.uint8)[: self.size() * self.dtype.itemsize]
        return raw.view(self.dtype.np)

    def tolist(self) -> list:
        """The elements as Python numbers."""
        if self.device.type == "meta":
            raise NotImplementedError("Not available for 'meta' device type")
        values = self._values()
        if self.dtype in (D.bfloat16, D.float16):
            values = values.astype(np.float32)
        return values.tolist()

    def __getitem__(self, idx):
        return self.tolist()[idx]

    def __repr__(self) -> str:
        tail = (f"[torch.storage.TypedStorage(dtype={self.dtype!r}, device={self.device}) "
                f"of size {self.size()}]")
        if self.device.type == "meta":
            return "...\n" + tail
        body = "\n".join(f" {v}" for v in self.tolist()) if self.size() else " "
        return body + "\n" + tail

    __str__ = __repr__


__all__ = ["TypedStorage", "UntypedStorage"]
