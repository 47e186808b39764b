"""The fake mode's dispatch cache (spec: FAKE-500..505).

An op on fake tensors is a pure function of metadata, so its result metadata can be
remembered. The key is what torch keys on: the op, the default dtype, the default
device, whether inference mode is on, the shape-environment settings (always None here),
then per argument either the metadata of a fake tensor (dtype, shape, strides, device,
layout, memory format, storage offset, requires_grad, quantized/conj/neg bits,
inference-ness, sparsity) or ``(type(value), value)`` for anything else, so ``1`` and
``1.0`` differ. Lists, tuples and dicts are flattened.

An entry is either the output specs of a compute op (a hit makes fresh fakes from them,
without running the meta function) or "the op returns its input 0" (in-place ops: a hit
returns that very tensor and bumps its version as the op would). Ops that cannot be cached
*bypass* the cache, counted by torch's reason strings; a bypass is itself remembered per
key, as torch does. The cache and its counters are shared by all modes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from refimpl import _device
from refimpl import _dtype as D
from refimpl._memory_format import channels_last, is_contiguous_in
from refimpl._state import STATE
from refimpl._tensor import Tensor


@dataclass
class DispatchCacheInfo:
    """The state of the fake-tensor dispatch cache: counters and number of entries."""

    hits: int
    misses: int
    bypasses: dict
    size: int


class BypassDispatchCache(Exception):
    """The call cannot be cached; ``reason`` is torch's reason string."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Cache:
    """The shared cache state (FakeTensorMode exposes it through class attributes)."""

    def __init__(self) -> None:
        self.entries: dict = {}
        self.hits = 0
        self.misses = 0
        self.bypasses: defaultdict = defaultdict(int)

    def info(self) -> DispatchCacheInfo:
        return DispatchCacheInfo(self.hits, self.misses, dict(self.bypasses), len(self.entries))

    def clear(self) -> None:
        self.entries.clear()
        self.hits = self.misses = 0
        self.bypasses.clear()


CACHE = _Cache()

# Entry kinds
INPLACE = "inplace"       # the op returns its input 0
BYPASS = "bypass"         # remembered bypass: (BYPASS, reason)


def _memory_format(t: Tensor):
    # torch records the suggested memory format only when the tensor is dense in it
    if t.is_contiguous():
        return "contiguous_format"
    if len(t._shape) == 4 and is_contiguous_in(t._shape, t._stride, channels_last):
        return "channels_last"
    return None


def _tensor_key(t, mode) -> tuple:
    from refimpl._subclasses.fake_tensor import FakeTensor

    if not isinstance(t, FakeTensor):
        raise BypassDispatchCache("non-fake tensor")
    if t._storage.fake_mode is not mode:
        raise BypassDispatchCache("not our fake")
    if t.constant is not None:
        raise BypassDispatchCache("constant attribute")
    return (t.dtype, t._shape, t._stride, t._storage.fake_device, "strided", _memory_format(t),
            t._offset, t.requires_grad, False, t._conj_bit, t._neg_bit, t._is_inference, False)


def _append(out: list, value, mode) -> None:
    if isinstance(value, Tensor):
        out.append(_tensor_key(value, mode))
    elif isinstance(value, (list, tuple)):
        out.append((type(value), len(value)))
        for v in value:
            _append(out, v, mode)
    elif isinstance(value, dict):
        out.append((dict, len(value)))
        for k, v in value.items():
            out.append(k)
            _append(out, v, mode)
    elif callable(value) and not isinstance(value, (D.dtype, type)):
        raise BypassDispatchCache("function argument")
    else:
        out.append(type(value))
        out.append(value)


def cache_key(mode, op, args: tuple, kwargs: dict) -> tuple:
    """The key of one call; raises BypassDispatchCache when the call cannot be cached."""
    from refimpl._subclasses._fake_impls import DYNAMIC_OUTPUT_SHAPE

    extra = op.extra
    if op.name in DYNAMIC_OUTPUT_SHAPE:
        raise BypassDispatchCache("dynamic output shape")
    if extra.get("inplace_view"):
        raise BypassDispatchCache("inplace view")
    if op.name == "_unsafe_view":
        raise BypassDispatchCache("unsafe view")
    if op.name == "lift_fresh":
        raise BypassDispatchCache("lift")
    if extra.get("custom"):
        raise BypassDispatchCache("non-builtin")
    key = [op, D.get_default_dtype(), _device.DEFAULT, STATE.inference_mode, None]
    for a in args:
        _append(key, a, mode)
    if kwargs:
        for k, v in kwargs.items():
            key.append(k)
            _append(key, v, mode)
    key = tuple(key)
    try:
        hash(key)
    except TypeError:
        raise BypassDispatchCache("unhashable argument") from None
    return key
