"""Fake tensors: full metadata, no data (spec: ``spec/fake.md``; torch's
``torch._subclasses.fake_tensor``).

A ``FakeTensor`` is a tensor over a ``FakeStorage``: a meta storage (no bytes) that also
records the device the tensor pretends to live on (``fake_device``) and the mode that
made it (``fake_mode``). Every op on fakes runs the op's **meta function only** (one op,
one definition: the meta function that shape inference uses is the whole fake kernel),
so a fake program costs microseconds per op whatever the sizes, allocates nothing, and
never touches a GPU driver, even for fake CUDA tensors.

Where the fake mode sits in the dispatcher (``refimpl/_dispatch.py``):

- in layer 1 (python modes), while a ``FakeTensorMode`` is active: factories make fakes,
  ``torch.tensor``-style data is lifted into fakes, real tensors among the inputs are
  refused (or converted with ``allow_non_fake_inputs``), ops on Python numbers only run
  for real and are lifted;
- below autograd (``_dispatch.FAKE_LAYER``), for every op with a fake input, inside the
  mode or after it exited (fakes outlive their mode): the output device (torch's
  common-device rule), constants, the dispatch cache, then the meta function.

Autograd therefore records graphs over fakes exactly as over real tensors, and backward
produces fake gradients.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator

from refimpl import _dispatch
from refimpl._device import device
from refimpl._functorch import config as _config
from refimpl._state import STATE
from refimpl._storage import UntypedStorage
from refimpl._subclasses import _fake_cache as C
from refimpl._subclasses._fake_cache import DispatchCacheInfo
from refimpl._subclasses._fake_converter import FakeTensorConverter
from refimpl._subclasses._fake_impls import (
    META,
    FakeTensorDeviceMismatchError,
    common_device,
    is_dynamic_shape_error,
    normalize_device,
    torch_name,
)
from refimpl._tensor import Tensor, contiguous_strides
from refimpl.ops._registry import TensorSpec
from refimpl.utils._python_dispatch import TorchDispatchMode

#: A fake keeps a real copy of its value (``constant``) only up to this many elements.
CONSTANT_NUMEL_LIMIT = 1


# -- exceptions (torch's types; ``str`` is the op name or the reason) ------------------------

class _OpError(RuntimeError):
    def __init__(self, func) -> None:
        self.func = func if isinstance(func, str) else torch_name(func)
        super().__init__(self.func)

    def __str__(self) -> str:
        return self.func


class DynamicOutputShapeException(_OpError):
    """The op's output shape depends on data (``nonzero``, ``unique``, ``masked_select``)."""


class DataDependentOutputException(_OpError):
    """The op returns a value computed from data (``item``, ``tolist``)."""


class UnsupportedOperatorException(_OpError):
    """The op has no fake implementation (a user op without a meta function)."""


class UnsupportedFakeTensorException(RuntimeError):
    """The tensor cannot be converted to a fake (``reason`` says why)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# -- storage and tensor ------------------------------------------------------------------------

class FakeStorage(UntypedStorage):
    """A meta storage (a size, no bytes) that knows its simulated device and its mode."""

    __slots__ = ("_constant_holders", "fake_device", "fake_mode")

    @classmethod
    def make(cls, nbytes: int, fake_device: device, mode) -> FakeStorage:
        """A fake storage of ``nbytes`` bytes on ``fake_device`` (nothing is allocated)."""
        if fake_device.type == "meta" and not _config.fake_tensor_allow_meta:
            raise AssertionError("fake tensors on the meta device are disabled "
                                 "(_functorch.config.fake_tensor_allow_meta is False)")
        s = object.__new__(cls)
        s.device, s._data, s._nbytes, s._resizable = META, None, int(nbytes), True
        s.fake_device, s.fake_mode, s._constant_holders = fake_device, mode, None
        return s

    def __repr__(self) -> str:
        return f"...\n[torch.storage.UntypedStorage(device=meta) of size {self._nbytes}]"


class FakeTensor(Tensor):
    """A tensor with metadata and no data; ``device`` is the simulated ``fake_device``.

    ``constant`` is a real tensor holding its value when the fake was made from data of at
    most ``CONSTANT_NUMEL_LIMIT`` elements (or computed from such constants), else None.
    Inside a kernel invocation of its mode ``device`` reads ``meta``, as in torch.
    """

    __slots__ = ()
    constant = None

    @property
    def fake_device(self) -> device:
        """The device this tensor simulates."""
        return self._storage.fake_device

    @property
    def fake_mode(self):
        """The FakeTensorMode that made this tensor."""
        return self._storage.fake_mode

    @property
    def device(self) -> device:
        """The simulated device (``meta`` during a kernel invocation of the mode)."""
        s = self._storage
        return META if s.fake_mode.in_kernel_invocation else s.fake_device

    @property
    def is_cuda(self) -> bool:
        """True when the simulated device is CUDA."""
        return self._storage.fake_device.type == "cuda"

    @property
    def is_cpu(self) -> bool:
        """True when the simulated device is the CPU."""
        return self._storage.fake_device.type == "cpu"

    @property
    def is_meta(self) -> bool:
        """True when the simulated device is meta."""
        return self._storage.fake_device.type == "meta"

    @property
    def _np(self):
        raise DataDependentOutputException("aten._local_scalar_dense.default")

    def item(self):
        """The value when the fake holds a constant; else DataDependentOutputException."""
        if self.constant is not None:
            return self.constant.item()
        raise DataDependentOutputException("aten._local_scalar_dense.default")

    def tolist(self):
        """The values when the fake holds a constant; else DataDependentOutputException."""
        if self.constant is not None:
            return self.constant.tolist()
        raise DataDependentOutputException("aten._local_scalar_dense.default")

    def resize_(self, *sizes, memory_format=None) -> FakeTensor:
        """Tensor.resize_ (metadata only); a resize drops the constants of the storage."""
        shape = self._shape
        Tensor.resize_(self, *sizes, memory_format=memory_format)
        if self._shape != shape:
            self._storage.fake_mode._invalidate_constants(self)
        return self

    def set_(self, source=None, storage_offset: int = 0, size=None, stride=None) -> FakeTensor:
        """Tensor.set_; the old and the new storage lose their constants."""
        self._storage.fake_mode._invalidate_constants(self)
        Tensor.set_(self, source, storage_offset, size, stride)
        self._storage.fake_mode._invalidate_constants(self)
        return self

    def __repr__(self) -> str:
        from refimpl import _dtype as D

        parts = ["..."]
        dev = self._storage.fake_device
        if dev.type != "cpu":
            parts.append(f"device='{dev}'")
        parts.append(f"size={tuple(self._shape)}")
        if self.dtype is not D.get_default_dtype():
            parts.append(f"dtype={self.dtype!r}")
        grad_fn = self.grad_fn
        if grad_fn is not None:
            parts.append(f"grad_fn=<{type(grad_fn).__name__}>")
        elif self.requires_grad:
            parts.append("requires_grad=True")
        return f"FakeTensor({', '.join(parts)})"

    __str__ = __repr__


FakeStorage._tensor_cls = FakeTensor


def _fakes_in(args, kwargs) -> list:
    return [t for t in _dispatch.tensors_in(args, kwargs) if type(t) is FakeTensor]


# -- the mode ----------------------------------------------------------------------------------

class FakeTensorMode(TorchDispatchMode):
    """Inside this mode, tensor creation makes FakeTensors and ops on them run meta
    functions only (FAKE-001).

    ``allow_non_fake_inputs`` converts real tensors met as op inputs instead of refusing
    them; ``allow_fallback_kernels`` is accepted for torch's signature (every refimpl op has
    a meta function, so there is nothing to fall back from). ``shape_env`` must be None:
    refimpl has no symbolic shapes.
    """

    def __init__(self, *, allow_fallback_kernels: bool = True,
                 allow_non_fake_inputs: bool = False, shape_env=None,
                 static_shapes: bool | None = None, export: bool = False) -> None:
        if shape_env is not None:
            raise NotImplementedError(
                "refimpl's FakeTensorMode has no symbolic shapes: shape_env must be None")
        self.allow_fallback_kernels = allow_fallback_kernels
        self.allow_non_fake_inputs = allow_non_fake_inputs
        self.shape_env = None
        self.static_shapes = True if static_shapes is None else static_shapes
        self.export = export
        self.fake_tensor_converter = FakeTensorConverter()
        self.in_kernel_invocation = False
        self.cache_enabled = True
        self._cuda_available = None
        _install()

    # -- the shared dispatch cache (class-level, as torch's) --------------------------------

    @classmethod
    def cache_info(cls) -> DispatchCacheInfo:
        """Hits, misses, bypasses by reason, and the number of entries (FAKE-500)."""
        return C.CACHE.info()

    @classmethod
    def cache_clear(cls) -> None:
        """Empty the cache and reset its counters."""
        C.CACHE.clear()

    # -- conversion --------------------------------------------------------------------------

    def from_tensor(self, tensor: Tensor, *, static_shapes=None, source=None,
                    symbolic_context=None, trace: bool = True) -> FakeTensor:
        """The fake of a real tensor (memoised: the same tensor gives the same fake)."""
        return self.fake_tensor_converter.from_real_tensor(self, tensor)

    def _set_constant(self, fake: FakeTensor, value: Tensor) -> None:
        fake.constant = value
        s = fake._storage
        if s._constant_holders is None:
            s._constant_holders = weakref.WeakSet()
        s._constant_holders.add(fake)

    def _invalidate_constants(self, t: Tensor) -> None:
        """A write through ``t`` drops the constant of every fake sharing its storage."""
        s = t._storage
        holders = getattr(s, "_constant_holders", None)
        if holders:
            for f in list(holders):
                f.constant = None
            holders.clear()
        if type(t) is FakeTensor and t.constant is not None:
            t.constant = None

    def _lift(self, real: Tensor) -> FakeTensor:
        """A fresh fake for freshly made data (``torch.tensor``), keeping small constants."""
        fs = FakeStorage.make(real._storage.nbytes(), real._storage.device, self)
        out = Tensor._make(fs, real._shape, real._stride, real._offset, real.dtype)
        if real.numel() <= CONSTANT_NUMEL_LIMIT and real._storage.device.type == "cpu":
            self._set_constant(out, real)
        return out

    # -- layer 1: the active mode ------------------------------------------------------------

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        """Factories and lifts make fakes; other ops are validated and re-dispatched."""
        kwargs = kwargs or {}
        if func.kind == "factory":
            kwargs = dict(kwargs)
            kwargs["device"] = normalize_device(kwargs.get("device"))
            return self._dispatch(func, args, kwargs, [])
        if func.name == "lift_fresh":
            return self._lift(args[0])
        tensors = _dispatch.tensors_in(args, kwargs)
        if not tensors:
            # only Python numbers: torch runs the op for real on the CPU and lifts it
            with _no_modes():
                out = func(*args, **kwargs)
            return self._lift(out) if isinstance(out, Tensor) else out
        if any(type(t) is not FakeTensor or t._storage.fake_mode is not self for t in tensors):
            args, kwargs = self._validate(func, args, kwargs)
        out = kwargs.get("out") if kwargs else None
        if isinstance(out, FakeTensor):
            ins = [t for t in _fakes_in(args, kwargs) if t is not out]
            dev = common_device(func, args, kwargs, ins)
            if out._storage.fake_device != dev and (ins and any(t._shape for t in ins)):
                raise FakeTensorDeviceMismatchError(func, dev, out._storage.fake_device)
        return func(*args, **kwargs)

    def _validate(self, func, args: tuple, kwargs: dict):
        """Refuse (or convert) inputs that are not this mode's fakes, as torch does."""
        def check(x):
            if not isinstance(x, Tensor) or (type(x) is FakeTensor and x.fake_mode is self):
                return x
            if func.extra.get("inplace_view"):
                raise AssertionError(
                    "Can't call metadata mutating ops on non-Fake Tensor inputs. Found in "
                    f"{render_call(func, args, kwargs)}")
            if type(x) is FakeTensor:
                raise AssertionError(
                    f"Mixing fake modes NYI x.fake_mode={x.fake_mode} vs self={self}")
            if not self.allow_non_fake_inputs:
                raise AssertionError(
                    "Please convert all Tensors to FakeTensors first or instantiate "
                    "FakeTensorMode with 'allow_non_fake_inputs'. Found in "
                    f"{render_call(func, args, kwargs)}")
            return self.fake_tensor_converter.from_real_tensor(self, x)

        def walk(a):
            if isinstance(a, (list, tuple)) and not isinstance(a, Tensor):
                return type(a)(check(x) for x in a)
            return check(a)

        return (tuple(walk(a) for a in args),
                {k: walk(v) for k, v in kwargs.items()} if kwargs else kwargs)

    # -- below autograd: the fake kernel -------------------------------------------------------

    def _dispatch(self, op, args: tuple, kwargs: dict, fakes: list):
        """Run ``op`` on fakes: device, constants, cache, then the meta function."""
        if op.kind == "factory":
            dev = kwargs["device"]
        else:
            dev = common_device(op, args, kwargs, fakes)
        writes = op.kind == "inplace" or op.extra.get("writes_input0")
        if fakes and all(t.constant is not None for t in fakes) and self._may_fold(op, args, kwargs, dev):
            return self._run_on_constants(op, args, kwargs, dev)
        if not self.cache_enabled:
            out = self._run_meta(op, args, kwargs, dev)[0]
        else:
            out = self._cached(op, args, kwargs, dev)
        if writes and args:
            self._invalidate_constants(args[0])
        return out

    def _cached(self, op, args, kwargs, dev):
        cache = C.CACHE
        try:
            key = C.cache_key(self, op, args, kwargs)
        except C.BypassDispatchCache as e:
            cache.bypasses[e.reason] += 1
            return self._run_meta(op, args, kwargs, dev)[0]
        entry = cache.entries.get(key)
        if entry is not None:
            if entry[0] is C.BYPASS:
                cache.bypasses[entry[1]] += 1
                return self._run_meta(op, args, kwargs, dev)[0]
            cache.hits += 1
            if entry[0] is C.INPLACE:
                self_ = args[0]
                self_._version_counter.bump()
                return self_
            return self._from_spec(entry[1], dev)
        cache.misses += 1
        out, spec = self._run_meta(op, args, kwargs, dev)
        if op.kind == "view":
            return out  # views alias their input: made fresh by the view's meta function
        if op.kind == "inplace" or op.extra.get("writes_input0"):
            cache.entries[key] = (C.INPLACE,)
        elif spec is not None:
            cache.entries[key] = ("spec", spec)
        else:
            cache.bypasses["non-FakeTensor output"] += 1
            cache.entries[key] = (C.BYPASS, "non-FakeTensor output")
        return out

    def _run_meta(self, op, args, kwargs, dev):
        """The fake kernel: the op's meta function (views, in-place ops through the
        dispatcher's own view and in-place paths, on meta storage). Returns the output and,
        for compute ops, the resolved output specs (what the cache stores)."""
        prev = self.in_kernel_invocation
        self.in_kernel_invocation = True
        try:
            kind = op.kind
            extra = op.extra
            if kind == "view" or kind == "inplace":
                return _dispatch.kernel_layer(op, args, kwargs), None
            if extra.get("inplace_view"):
                return op.cpu(*args, **kwargs), None  # restriding touches metadata only
            if op.meta is None:
                raise UnsupportedOperatorException(op)
            spec = op.meta(*args, **kwargs)
            if extra.get("writes_input0"):
                args[0]._version_counter.bump()
                return args[0], None
            spec = _resolve_spec(spec, dev)
            if spec is None:
                return None, None
            layout = extra.get("layout")
            if layout is not None and type(spec) is TensorSpec and len(spec.shape) > 1:
                strides = layout(spec.shape, args, kwargs)
                if strides is not None:
                    spec = spec._replace(stride=strides)
            return self._from_spec(spec, dev), spec
        except NotImplementedError as e:
            if is_dynamic_shape_error(e):
                raise DynamicOutputShapeException(op) from None
            raise
        finally:
            self.in_kernel_invocation = prev

    def _from_spec(self, spec, dev):
        if type(spec) is TensorSpec:
            shape = spec.shape
            fs = FakeStorage.make(_numel(shape) * spec.dtype.itemsize, spec.device, self)
            t = Tensor._make(fs, shape, spec.stride or contiguous_strides(shape), 0, spec.dtype)
            if STATE.inference_mode:
                t._is_inference = True  # tensors made in inference mode are inference tensors
            return t
        return tuple(self._from_spec(s, dev) for s in spec)

    def _may_fold(self, op, args, kwargs, dev) -> bool:
        """Whether an op on constants may run for real (not for metadata-only changes,
        and not onto a CUDA device where CUDA is unavailable: that would initialise it)."""
        if op.extra.get("inplace_view") or op.extra.get("nondeterministic_seeded"):
            return False
        targets = [a for a in (*args, *kwargs.values()) if isinstance(a, device)]
        if any(d.type == "meta" for d in targets):
            return False
        if dev.type == "cuda" or any(d.type == "cuda" for d in targets):
            if self._cuda_available is None:
                from refimpl import cuda

                self._cuda_available = cuda.is_available()
            return self._cuda_available
        return dev.type == "cpu"

    def _run_on_constants(self, op, args, kwargs, dev):
        """Compute the fake result from metadata and the constant by running the op on the
        constants; small results stay constant (FAKE-300)."""
        out = self._run_meta(op, args, kwargs, dev)[0]

        def real(x):
            if type(x) is FakeTensor:
                return x.constant
            if isinstance(x, (list, tuple)):
                return type(x)(real(v) for v in x)
            return x

        with _no_modes():
            value = _dispatch.kernel_layer(op, tuple(real(a) for a in args),
                                           {k: real(v) for k, v in kwargs.items()})
        outs = out if isinstance(out, tuple) else (out,)
        values = value if isinstance(value, tuple) else (value,)
        for o, v in zip(outs, values):
            if type(o) is FakeTensor and isinstance(v, Tensor):
                if o.numel() <= CONSTANT_NUMEL_LIMIT:
                    self._set_constant(o, v)
                else:
                    self._invalidate_constants(o)
        return out


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _resolve_spec(spec, dev):
    """Output specs with their devices: the meta function's own device when it names a
    real one (``_to_copy`` to another device), else the common device of the inputs."""
    if type(spec) is TensorSpec:
        d = spec.device
        if d is None or (isinstance(d, device) and d.type == "meta"):
            return TensorSpec(tuple(spec.shape), spec.dtype, dev)
        return TensorSpec(tuple(spec.shape), spec.dtype, normalize_device(d))
    if isinstance(spec, (tuple, list)):
        return tuple(_resolve_spec(s, dev) for s in spec)
    return None


def _fake_layer(op, args: tuple, kwargs: dict):
    """``_dispatch.FAKE_LAYER``: ops with a fake input go to their mode's fake kernel."""
    for a in args:
        if type(a) is FakeTensor:
            mode = a._storage.fake_mode
            break
        if isinstance(a, (list, tuple)):
            found = next((x for x in a if type(x) is FakeTensor), None)
            if found is not None:
                mode = found._storage.fake_mode
                break
    else:
        found = next((x for x in _dispatch.tensors_in((), kwargs) if type(x) is FakeTensor),
                     None) if kwargs else None
        if found is None:
            return _dispatch.kernel_layer(op, args, kwargs)
        mode = found._storage.fake_mode
    fakes = _fakes_in(args, kwargs)
    for t in _dispatch.tensors_in(args, kwargs):
        if type(t) is not FakeTensor:
            args, kwargs = mode._validate(op, args, kwargs)
            fakes = _fakes_in(args, kwargs)
            break
        if t._storage.fake_mode is not mode:
            raise AssertionError(
                f"Mixing fake modes NYI x.fake_mode={t._storage.fake_mode} vs self={mode}")
    return mode._dispatch(op, args, kwargs, fakes)


def _install() -> None:
    _dispatch.FAKE_LAYER = _fake_layer


@contextlib.contextmanager
def _no_modes() -> Iterator[None]:
    stack = _dispatch.MODE_STACK
    saved = stack[:]
    del stack[:]
    try:
        yield
    finally:
        stack[:] = saved + stack


@contextlib.contextmanager
def unset_fake_temporarily() -> Iterator[FakeTensorMode | None]:
    """Run the block without the active fake modes (other modes stay); yields the
    innermost one set aside, or None."""
    stack = _dispatch.MODE_STACK
    removed = [(i, m) for i, m in enumerate(stack) if isinstance(m, FakeTensorMode)]
    for i, _ in reversed(removed):
        del stack[i]
    try:
        yield removed[-1][1] if removed else None
    finally:
        for i, m in removed:
            stack.insert(i, m)


def render_call(func, args, kwargs) -> str:
    """``aten.add.Tensor(tensor([...], size=(2,)), FakeTensor(..., size=(2,)))``, as
    torch renders a call in its messages (tensor data is never printed)."""
    def render(a):
        if type(a) is FakeTensor:
            return repr(a)
        if isinstance(a, Tensor):
            parts = ["[...]"]
            if a.device.type != "cpu":
                parts.append(f"device='{a.device}'")
            parts.append(f"size={tuple(a._shape)}")
            return f"tensor({', '.join(parts)})"
        if isinstance(a, (list, tuple)):
            inner = ", ".join(render(x) for x in a)
            return f"[{inner}]"
        return repr(a)

    items = [render(a) for a in args]
    items += [f"{k}={render(v)}" for k, v in (kwargs or {}).items()]
    return f"{torch_name(func)}({', '.join(items)})"


__all__ = [
    "CONSTANT_NUMEL_LIMIT",
    "DataDependentOutputException",
    "DispatchCacheInfo",
    "DynamicOutputShapeException",
    "FakeTensor",
    "FakeTensorConverter",
    "FakeTensorDeviceMismatchError",
    "FakeTensorMode",
    "UnsupportedFakeTensorException",
    "UnsupportedOperatorException",
    "unset_fake_temporarily",
]
