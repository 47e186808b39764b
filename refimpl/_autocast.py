"""The autocast layer of the dispatcher and autocast's thread-local state (spec AUTOCAST).

State, per thread as in torch: for each device type whether autocast is enabled and its
lower-precision dtype; whether the weight-cast cache is on; the nesting depth of autocast
context managers. The cast cache itself is process-wide (torch keeps one map behind a
mutex) and is emptied when the outermost autocast region of a thread exits.

The layer runs first, before Python modes, forward AD and autograd, as torch's Autocast
dispatch keys come before Autograd: the casts it inserts are ordinary ops that autograd
records (``ToCopyBackward0``), so a low-precision op saves low-precision inputs for
backward and gradients flow back to the float32 leaves in float32. While it runs the op
it excludes itself, so the casts and anything the op calls are not autocast again.

Which device's autocast applies to an op: the highest-priority enabled device among the
op's tensor arguments (CUDA before CPU, as torch orders the dispatch keys). Only
floating-point tensors on that device are cast; float64 tensors are left alone.
"""

from __future__ import annotations

import functools
import threading
import weakref

from refimpl.amp import _op_lists

# device types torch's autocast knows, with their default lower-precision dtype names
_DEFAULT_DTYPES = {
    "cpu": "bfloat16", "cuda": "float16", "xla": "bfloat16", "xpu": "float16",
    "mps": "float16", "hpu": "bfloat16", "ipu": "float16", "privateuseone": "float16",
    "mtia": "float16", "maia": "bfloat16",
}
# the device types whose ops refimpl can actually autocast (its tensors live there)
_RUNTIME_DEVICES = ("cuda", "cpu")


class _AutocastState(threading.local):
    """Autocast's per-thread flags; ``active`` is the one the dispatcher reads per op."""

    # process-wide: every name some list mentions, and the layer (set below)
    ops: frozenset = _op_lists.all_names()
    layer = None

    def __init__(self) -> None:
        self.enabled: dict[str, bool] = dict.fromkeys(_DEFAULT_DTYPES, False)
        self.dtype: dict = {}
        self.cache_enabled = True
        self.nesting = 0
        self.excluded = False
        self.active = False

    def refresh(self) -> None:
        """Recompute ``active``: some runtime device enabled and the layer not excluded."""
        self.active = not self.excluded and any(self.enabled[d] for d in _RUNTIME_DEVICES)


AUTOCAST = _AutocastState()

# id(source) -> (weak reference to the source, its cast); see cached_cast
_CACHE: dict[int, tuple] = {}
_CACHE_LOCK = threading.Lock()


# -- state ------------------------------------------------------------------------------

def check_device_type(device_type: str) -> str:
    """``device_type`` if autocast has state for it; torch's errors otherwise."""
    if device_type in _DEFAULT_DTYPES:
        return device_type
    from refimpl._device import device

    kind = device(device_type).type  # raises torch's message for an unknown type
    if kind in _DEFAULT_DTYPES:
        return kind
    raise RuntimeError(
        "unknown device type for autocast in get_autocast_dispatch_key_from_device_type"
    )


def is_enabled(device_type: str) -> bool:
    """Whether autocast is enabled for ``device_type`` in this thread."""
    return AUTOCAST.enabled[check_device_type(device_type)]


def set_enabled(device_type: str, enabled: bool) -> None:
    """Enable or disable autocast for ``device_type`` in this thread."""
    AUTOCAST.enabled[check_device_type(device_type)] = bool(enabled)
    AUTOCAST.refresh()


def get_dtype(device_type: str):
    """The lower-precision dtype of ``device_type``'s autocast in this thread."""
    from refimpl import _dtype as D

    if device_type not in _DEFAULT_DTYPES:
        try:
            device_type = check_device_type(device_type)
        except RuntimeError as e:
            if "unknown device type" in str(e):
                raise RuntimeError("unsupported scalarType") from None
            raise
    found = AUTOCAST.dtype.get(device_type)
    return found if found is not None else getattr(D, _DEFAULT_DTYPES[device_type])


def set_dtype(device_type: str, dtype) -> None:
    """Set ``device_type``'s autocast dtype in this thread (any dtype is stored, as torch
    does; the context manager is the one that rejects unsupported dtypes)."""
    AUTOCAST.dtype[check_device_type(device_type)] = dtype


def clear_cache() -> None:
    """Drop every cached cast."""
    with _CACHE_LOCK:
        _CACHE.clear()


class excluded:
    """Context manager: run with the autocast layer switched off (the layer's own guard)."""

    def __enter__(self) -> None:
        self.prev = AUTOCAST.excluded
        AUTOCAST.excluded = True
        AUTOCAST.active = False

    def __exit__(self, *exc) -> None:
        AUTOCAST.excluded = self.prev
        AUTOCAST.refresh()


# -- casting ----------------------------------------------------------------------------

def _eligible(t, device_type: str) -> bool:
    """A floating tensor on the autocast device that is not float64."""
    dt = t.dtype
    return dt.is_floating_point and dt.itemsize != 8 and t.device.type == device_type


def cached_cast(to_dtype, t, device_type: str):
    """``t`` cast to ``to_dtype`` when eligible; casts of float32 leaves that require grad
    to the autocast dtype are cached until the outermost autocast region exits."""
    from refimpl import _dtype as D

    if not _eligible(t, device_type) or t.dtype == to_dtype:
        return t
    cacheable = (to_dtype == get_dtype(device_type) and t.dtype == D.float32
                 and t.requires_grad and t.is_leaf and t._base is None
                 and AUTOCAST.cache_enabled)
    if not cacheable:
        return t.to(to_dtype)
    with _CACHE_LOCK:
        hit = _CACHE.get(id(t))
        if hit is not None and hit[0]() is t:
            return hit[1]
        cast = t.to(to_dtype)
        _CACHE[id(t)] = (weakref.ref(t), cast)
        return cast


def _map(fn, value):
    """Apply ``fn`` to the tensors of an argument (lists and tuples one level deep)."""
    from refimpl._tensor import Tensor

    if isinstance(value, Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)) and any(isinstance(v, Tensor) for v in value):
        return type(value)(fn(v) if isinstance(v, Tensor) else v for v in value)
    return value


def _tensors(args, kwargs) -> list:
    from refimpl._dispatch import tensors_in

    return tensors_in(args, kwargs)


def _device_type(tensors: list) -> str | None:
    """The device type whose autocast applies to an op with these tensor inputs."""
    types = {t.device.type for t in tensors}
    for d in _RUNTIME_DEVICES:
        if d in types and AUTOCAST.enabled[d]:
            return d
    return None


def _promote_type(tensors: list, device_type: str):
    from refimpl import _dtype as D

    lower = get_dtype(device_type)
    current = lower
    for t in tensors:
        if not t.dtype.is_floating_point or t.device.type != device_type:
            continue
        nxt = t.dtype
        if nxt == D.float64:
            continue
        if current == D.float32 or nxt == D.float32:
            current = D.float32
        elif current == lower and nxt == lower:
            current = lower
        else:
            raise RuntimeError("Unexpected floating ScalarType in at::autocast::prioritize")
    return current


def _cast_all(to_dtype, args: tuple, kwargs: dict, device_type: str):
    cast = functools.partial(cached_cast, to_dtype, device_type=device_type)
    return (tuple(_map(cast, a) for a in args),
            {k: _map(cast, v) for k, v in kwargs.items()})


def apply_policy(name: str, run, args: tuple, kwargs: dict, whole: bool = False):
    """Run ``run(*args, **kwargs)`` (the op ``name``) under its autocast policy.

    ``run`` must not re-enter the autocast check for the same call (the dispatcher passes
    the layers below autocast; a composite passes its own body). ``whole``: ``run`` is a
    composite written in refimpl ops for what is one op in torch, whose inner ops are not
    autocast even when the op itself is on no list (unless torch decomposes that op on
    this device, ``_op_lists.DECOMPOSED``)."""
    from refimpl import _dtype as D

    if kwargs.get("out") is not None:
        # torch's out= overloads have no autocast kernels: they fall through, as called
        return run(*args, **kwargs)
    tensors = _tensors(args, kwargs)
    device_type = _device_type(tensors)
    policy = None if device_type is None else _op_lists.policy_of(device_type, name)
    if policy is None:  # not listed for this device: falls through (inner ops may cast)
        if whole and name not in _op_lists.DECOMPOSED.get(device_type, ()):
            with excluded():
                return run(*args, **kwargs)
        return run(*args, **kwargs)
    if policy == "banned":
        raise RuntimeError(_op_lists.BANNED[device_type][name])
    with excluded():
        if policy == "lower_precision_fp":
            args, kwargs = _cast_all(get_dtype(device_type), args, kwargs, device_type)
        elif policy == "fp32":
            args, kwargs = _cast_all(D.float32, args, kwargs, device_type)
        elif policy in ("fp32_set_opt_dtype", "fp32_append_dtype"):
            first = tensors[0] if tensors else None
            if (first is not None and kwargs.get("dtype") is None
                    and _eligible(first, device_type)):
                # same dtypes as passing dtype=float32: the op runs on a float32 input
                args = (_map(lambda t: cached_cast(D.float32, t, device_type), args[0]),
                        *args[1:])
        elif policy == "promote":
            args, kwargs = _cast_all(_promote_type(tensors, device_type), args, kwargs,
                                     device_type)
        return run(*args, **kwargs)


def _layer(op, args: tuple, kwargs: dict):
    """The dispatcher's autocast layer for a listed op (the dispatcher checks the name)."""
    from refimpl._dispatch import below_autocast

    def run(*a, **k):
        return below_autocast(op, a, k)

    return apply_policy(op.name, run, args, kwargs)


_AutocastState.layer = staticmethod(_layer)


def composite(name: str):
    """Decorator: make a composite function (one written in refimpl ops, not an OpDef)
    behave as torch's op ``name`` does: it takes that op's autocast policy (inside, the
    ops it calls are not autocast again, listed or not: in torch it is one op), and a
    running profiler records it as ``aten::<name>`` around the ops it calls."""

    def wrap(fn):
        AUTOCAST.__class__.ops = AUTOCAST.ops | {name}

        def call(*args, **kwargs):
            if AUTOCAST.active:
                return apply_policy(name, fn, args, kwargs, whole=True)
            return fn(*args, **kwargs)

        @functools.wraps(fn)
        def run(*args, **kwargs):
            profiler = (_DISPATCH or _bind_dispatch()).PROFILE_LAYER
            if profiler is not None:
                return profiler.composite(name, call, args, kwargs)
            if AUTOCAST.active:  # call(), written out: this runs on every composite call
                return apply_policy(name, fn, args, kwargs, whole=True)
            return fn(*args, **kwargs)

        return run

    return wrap


_DISPATCH = None  # refimpl._dispatch, bound on first use (it imports this module)


def _bind_dispatch():
    global _DISPATCH
    from refimpl import _dispatch

    _DISPATCH = _dispatch
    return _dispatch


def snapshot() -> tuple:
    """This thread's autocast state (enabled flags, dtypes, cache flag) to restore later."""
    return dict(AUTOCAST.enabled), dict(AUTOCAST.dtype), AUTOCAST.cache_enabled


def restore(state: tuple) -> None:
    """Restore a ``snapshot()``."""
    AUTOCAST.enabled, AUTOCAST.dtype, AUTOCAST.cache_enabled = (
        dict(state[0]), dict(state[1]), state[2])
    AUTOCAST.refresh()
