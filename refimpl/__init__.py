"""refimpl: a small, readable runtime with PyTorch's semantics.

``import refimpl as t`` reads like ``import torch as t``: dtypes, devices, tensors,
the ops, autograd (``refimpl.autograd``) and the CUDA runtime (``refimpl.cuda``).
CPU tensors compute with numpy; CUDA tensors live on a real GPU through the CUDA
driver API.
"""

from __future__ import annotations

from refimpl import _dtype, _tensor_methods
from refimpl import ops as _ops
from refimpl._device import device, get_default_device, set_default_device
from refimpl._dtype import (
    bfloat16,
    complex32,
    complex64,
    complex128,
    dtype,
    float16,
    float32,
    float64,
    get_default_dtype,
    int8,
    int16,
    int32,
    int64,
    set_default_dtype,
    uint8,
)
from refimpl._generic_streams import Event, Stream
from refimpl._memory_format import (
    channels_last,
    channels_last_3d,
    contiguous_format,
    memory_format,
    preserve_format,
)
from refimpl._storage import UntypedStorage
from refimpl._tensor import Size, Tensor
from refimpl.backends._precision import (
    get_float32_matmul_precision,
    set_float32_matmul_precision,
)
from refimpl.serialization import load, save

bool = _dtype.bool_
half, float, double = float16, float32, float64
cfloat, cdouble, chalf = complex64, complex128, complex32
short, int, long = int16, int32, int64

__version__ = "0.1.0"

_tensor_methods.bind()

# The legacy typed classes (refimpl.FloatTensor...): construct and match CPU tensors.
from refimpl._typed import make_types as _make_types

globals().update(_make_types(cuda=False))

# Typed storages (Tensor.storage(), refimpl.FloatStorage...).
from refimpl import storage
from refimpl.storage import TypedStorage
from refimpl.storage import make_storage_types as _make_storage_types

globals().update(_make_storage_types(cuda=False))
for _module in _ops.loaded:
    for _name in getattr(_module, "__all__", ()):
        globals()[_name] = getattr(_module, _name)

from refimpl import autograd
from refimpl.autograd.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)


def promote_types(type1: dtype, type2: dtype) -> dtype:
    """The smallest dtype both can be cast to (spec TENSOR-101)."""
    return _dtype.promote_types(type1, type2)


def result_type(tensor1, tensor2) -> dtype:
    """The dtype an arithmetic op on the two operands produces (spec TENSOR-102)."""
    from refimpl.ops._helpers import result_type as _rt

    return _rt(tensor1, tensor2)


def can_cast(from_: dtype, to: dtype) -> builtins_bool:  # type: ignore[name-defined]
    """Whether torch's casting rules allow ``from_`` into ``to`` (spec TENSOR-103)."""
    return _dtype.can_cast(from_, to)


def is_tensor(obj) -> builtins_bool:  # type: ignore[name-defined]
    """True for refimpl tensors."""
    return isinstance(obj, Tensor)


def is_floating_point(input: Tensor) -> builtins_bool:  # type: ignore[name-defined]
    """True when the tensor's dtype is floating."""
    return input.dtype.is_floating_point


def is_complex(input: Tensor) -> builtins_bool:  # type: ignore[name-defined]
    """True when the tensor's dtype is complex."""
    return input.dtype.is_complex


def numel(input: Tensor) -> builtins_int:  # type: ignore[name-defined]
    """The number of elements."""
    return input.numel()


import builtins as _builtins

builtins_bool, builtins_int = _builtins.bool, _builtins.int


_warn_always = False


def set_warn_always(b: builtins_bool) -> None:  # type: ignore[name-defined]
    """Make warnings that torch emits once per process be emitted every time."""
    global _warn_always
    _warn_always = _builtins.bool(b)


def is_warn_always_enabled() -> builtins_bool:  # type: ignore[name-defined]
    """Whether ``set_warn_always(True)`` is in force."""
    return _warn_always


def __getattr__(name: str):
    # refimpl.cuda imports lazily so that CPU-only use never touches the driver.
    if name in ("cuda", "backends", "_C", "_subclasses", "_functorch", "storage", "library",
                "nn", "linalg", "special", "profiler", "optim", "utils",
                "fft", "signal",
                "masked"):
        import importlib

        return importlib.import_module(f"refimpl.{name}")
    raise AttributeError(f"module 'refimpl' has no attribute '{name}'")


# Automatic mixed precision: refimpl.autocast, refimpl.amp, refimpl.cpu.amp (spec AUTOCAST),
# and torch.GradScaler, which is torch.amp.GradScaler (spec AMP-SCALER).
from refimpl import amp, cpu
from refimpl.amp import GradScaler, autocast
from refimpl.amp._functions import *
