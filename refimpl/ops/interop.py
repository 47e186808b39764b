"""Interop with Python and numpy: numpy(), __array__, tolist(), item(), DLPack, pickling.

``numpy()`` shares memory with the tensor, as in torch; DLPack exchange is zero-copy
for CPU tensors (it goes through numpy's own DLPack support).
"""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl._math_views import resolved
from refimpl._state import STATE
from refimpl._tensor import Tensor


def numpy(self: Tensor, *, force: bool = False) -> np.ndarray:
    """A numpy array sharing this CPU tensor's memory (``force`` detaches and copies to CPU)."""
    if force:
        return resolved(self.detach().cpu())._np
    if self.requires_grad and STATE.grad_enabled:
        raise RuntimeError(
            "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
            "instead."
        )
    if self.device.type != "cpu":
        raise TypeError(
            f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to "
            "copy the tensor to host memory first."
        )
    if self.dtype is D.bfloat16:
        raise TypeError("Got unsupported ScalarType BFloat16")
    if self._conj_bit:
        raise RuntimeError("Can't call numpy() on Tensor that has conjugate bit set. Use "
                           "tensor.resolve_conj().numpy() instead.")
    if self._neg_bit:
        raise RuntimeError("Can't call numpy() on Tensor that has negative bit set. Use "
                           "tensor.resolve_neg().numpy() instead.")
    return self._np


def __array__(self: Tensor, dtype=None, copy=None) -> np.ndarray:
    arr = numpy(self)
    return arr if dtype is None else arr.astype(dtype, copy=False)


def _python_scalar(value, dtype: D.dtype):
    if dtype is D.bool_:
        return bool(value)
    if dtype.category == 1:
        return int(value)
    if dtype.is_complex:
        return complex(value)
    return float(value)


def item(self: Tensor):
    """The single value as a Python number."""
    if self.numel() != 1:
        raise RuntimeError(
            f"a Tensor with {self.numel()} elements cannot be converted to Scalar"
        )
    if self.device.type == "meta":
        raise RuntimeError("Tensor.item() cannot be called on meta tensors")
    if (self._storage.device.type == "cuda" and type(self) is Tensor
            and not (self._conj_bit or self._neg_bit)):
        from refimpl import _dispatch

        if not _dispatch.MODE_STACK and _dispatch.PROFILE_LAYER is None:
            # no mode or profiler watches the ops: read the one element straight back
            from refimpl.cuda import _tensor_ops

            return _python_scalar(_tensor_ops.read_element(self), self.dtype)
    host = self if self.device.type == "cpu" else _to_host(self)
    return _python_scalar(resolved(host)._np.reshape(-1)[0], self.dtype)


def _to_host(self: Tensor) -> Tensor:
    """A CUDA tensor's values on the host, after the synchronisation torch's item() does."""
    from refimpl.cuda import _tensor_ops

    if self._storage.device.type == "cuda":  # not a meta or fake tensor
        _tensor_ops.check_sync_allowed(self)
    return self.detach().cpu()


def tolist(self: Tensor):
    """Nested Python lists of Python numbers (a number for a 0-dim tensor)."""
    host = self if self.device.type == "cpu" else _to_host(self)
    arr = resolved(host)._np
    if self.dtype in (D.bfloat16, D.float16):
        arr = arr.astype(np.float32)
    return arr.tolist()


def __dlpack__(self: Tensor, *, stream=None, max_version=None, dl_device=None, copy=None):
    """A DLPack capsule aliasing this tensor (CPU tensors)."""
    if self.requires_grad:
        raise RuntimeError(
            "Can't export tensors that require gradient, use tensor.detach()"
        )
    if self.device.type != "cpu":
        raise NotImplementedError("refimpl: DLPack export of CUDA tensors is not implemented")
    arr = self._np
    if max_version is None:
        return arr.__dlpack__(stream=stream)
    return arr.__dlpack__(stream=stream, max_version=max_version)


def __dlpack_device__(self: Tensor) -> tuple:
    """(device type, index) in DLPack's numbering: (1, 0) for the CPU, (2, i) for CUDA."""
    if self.device.type == "cuda":
        return (2, self.device.index)
    return (1, 0)


def from_dlpack(ext) -> Tensor:
    """A tensor aliasing the memory of a DLPack producer (numpy arrays, torch CPU tensors)."""
    from refimpl.ops.factories import from_numpy

    if hasattr(ext, "__dlpack_device__") and ext.__dlpack_device__()[0] != 1:
        raise NotImplementedError("refimpl: DLPack import is implemented for CPU memory only")
    return from_numpy(np.from_dlpack(ext))


def _rebuild(array: np.ndarray, dtype_name: str, requires_grad: bool) -> Tensor:
    from refimpl._dispatch import MODE_STACK

    if any(hasattr(m, "fake_tensor_converter") for m in MODE_STACK):
        # under a fake mode torch rebuilds the storage on the meta device and the mode
        # sees a meta tensor being made: a fake on meta (spec FAKE-600)
        from refimpl._device import device
        from refimpl.ops.factories import empty_op

        t = empty_op(array.shape, dtype=D.DTYPES[dtype_name], device=device("meta"))
        return t.requires_grad_(True) if requires_grad else t
    t = Tensor._from_array(array, D.DTYPES[dtype_name])
    return t.requires_grad_(True) if requires_grad else t


def tensor_reduce(self: Tensor):
    """Pickle support: values, dtype and requires_grad (CPU copies of the data)."""
    host = self.detach().cpu()
    return (_rebuild, (np.array(host._np), self.dtype.name, self.requires_grad))


__all__ = ["from_dlpack"]
TENSOR_METHODS = ("numpy", "__array__", "item", "tolist", "__dlpack__", "__dlpack_device__")
