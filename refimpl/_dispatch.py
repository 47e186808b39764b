"""The dispatcher: the one place where the layers of an op call are ordered.

    dispatch(op, args, kwargs)
      0. autocast          (refimpl._autocast: casts listed ops' inputs, then the rest;
                            first, as torch's Autocast keys precede Autograd, so that
                            autograd records the casts; skipped when no autocast is on)
      1. python modes      (fake tensor mode, user dispatch modes)   _modes
      2. out= handling     (compute, then write into ``out``)
      3. autograd          (records a graph node; refimpl.autograd._record)
      4. (below autograd: the fake-tensor layer when fake tensors are in use)
      5. the device kernel (cpu: numpy, cuda: refimpl.cuda kernels, meta: meta fn);
         inputs carrying a conjugate or negative bit are resolved first
         (refimpl._math_views), and fresh outputs get the layout the op's ``layout``
         rule gives (refimpl._memory_format)

Each layer hands the call to the next through ``redispatch``-style functions below, so
a layer that wants "the op without me" calls the next layer directly.
"""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl import _math_views
from refimpl._autocast import AUTOCAST
from refimpl._device import CPU, device, resolve
from refimpl._state import FW, STATE
from refimpl._tensor import PLAIN, Tensor
from refimpl.ops._registry import OpDef, TensorSpec, ViewSpec

# Python modes, innermost last (refimpl.utils._python_dispatch pushes and pops them).
MODE_STACK: list = []
# refimpl.autograd.forward_ad.forward_layer (installed when that module loads; it runs
# instead of the autograd layer only while a forward-AD level is active)
FORWARD_LAYER = None

# The fake-tensor layer (refimpl._subclasses.fake_tensor installs it when imported): it
# sits below autograd, as torch's fake mode does, and runs the op on metadata alone when
# an input is a FakeTensor. None until fake tensors exist, so other programs pay nothing.
FAKE_LAYER = None

# The profiler (refimpl.profiler._collect.Collector, installed while a profile records):
# it records the op and dispatches it again, and ``wraps`` tells that re-entry apart.
# None otherwise, so an unprofiled program pays one check per op.
PROFILE_LAYER = None


def tensors_in(args, kwargs=None) -> list:
    """The tensors among ``args`` (and ``kwargs``), lists and tuples flattened once."""
    found = []
    for a in args:
        ta = type(a)
        if ta is int or ta is float or a is None:
            continue
        if ta in PLAIN or isinstance(a, Tensor):
            found.append(a)
        elif ta is list or ta is tuple:
            for x in a:  # (sizes, strides and dims are ints: no isinstance call for them)
                if type(x) is not int and isinstance(x, Tensor):
                    found.append(x)
    if kwargs:
        for a in kwargs.values():
            if isinstance(a, Tensor):
                found.append(a)
            elif isinstance(a, (list, tuple)):
                found.extend([x for x in a if isinstance(x, Tensor)])
    return found


def dispatch(op: OpDef, args: tuple, kwargs: dict):
    """Run ``op`` through the layers in order (see the module docstring)."""
    if PROFILE_LAYER is not None and PROFILE_LAYER.wraps(op):
        return PROFILE_LAYER(op, args, kwargs)  # records the op, then dispatches it again
    if AUTOCAST.active and op.name in AUTOCAST.ops:
        return AUTOCAST.layer(op, args, kwargs)
    return below_autocast(op, args, kwargs)


def below_autocast(op: OpDef, args: tuple, kwargs: dict):
    """Layers 1 to 5: everything below autocast."""
    if MODE_STACK:
        mode = MODE_STACK.pop()
        try:
            return mode.__torch_dispatch__(op, (), args, kwargs)
        finally:
            MODE_STACK.append(mode)
    if op.kind == "factory":
        # no tensor inputs: nothing for autograd or out=; the device comes from kwargs
        dev = kwargs.get("device")
        if dev is not None and type(dev) is device and dev.type == "cuda" and op.cuda:
            return op.cuda(*args, **kwargs)
        return kernel_layer(op, args, kwargs)
    if FW.active:
        return FORWARD_LAYER(op, args, kwargs)
    if kwargs and kwargs.get("out") is not None:
        return _with_out(op, args, kwargs)
    return autograd_layer(op, args, kwargs)


def autograd_layer(op: OpDef, args: tuple, kwargs: dict):
    """Layer 3: record a graph node when grad mode is on and an input requires grad.

    View ops always go through the recorder: a view remembers how it was made (and
    whether it shares its base with sibling views) even when no graph is built, so
    that a later in-place op on it can be checked or replayed.
    """
    if op.kind == "view":
        return (_RECORD or _recorder())(op, args, kwargs)
    if STATE.grad_enabled and op.differentiable:
        for a in args:
            if isinstance(a, Tensor):
                # requires_grad without the property calls (this runs on every op):
                # a leaf flag, a graph node, or a differentiable view of such a base
                if a._rg or a._gfn is not None or (
                    a._view_meta is not None and a._base.requires_grad
                ):
                    break
            elif isinstance(a, (list, tuple)) and any(
                isinstance(x, Tensor) and x.requires_grad for x in a
            ):
                break
        else:
            if not (kwargs and any(t.requires_grad for t in tensors_in((), kwargs))):
                return below_autograd(op, args, kwargs)
        return (_RECORD or _recorder())(op, args, kwargs)
    return below_autograd(op, args, kwargs)


_RECORD = None


def _recorder():
    """refimpl.autograd._record.record, bound on first use (it imports this module)."""
    global _RECORD
    from refimpl.autograd._record import record

    _RECORD = record
    return record


def below_autograd(op: OpDef, args: tuple, kwargs: dict):
    """Layers 4 and 5: the kernel of the inputs' device (or the fake layer)."""
    if FAKE_LAYER is not None:
        return FAKE_LAYER(op, args, kwargs)
    return kernel_layer(op, args, kwargs)


def common_device(op: OpDef, tensors: list) -> device:
    """The device all tensor inputs share; 0-dim CPU tensors may join a CUDA op."""
    dev = None
    for i, t in enumerate(tensors):
        d = t._storage.device
        if dev is None or d is dev or dev == d:
            dev = d
            continue
        if d.type == "cpu" and t.dim() == 0:
            continue
        if dev.type == "cpu" and _first_zero_dim_cpu(tensors, dev):
            dev = d
            continue
        check = op.extra.get("device_check")
        if check is not None and dev.type == d.type == "cuda":
            # torch's generated device check of a non-TensorIterator kernel names the
            # argument and the kernel wrapper
            wrapper, names = check
            name = names[min(i, len(names) - 1)]
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but got {name} is on {d}, "
                f"different from other tensors on {dev} (when checking argument in method "
                f"wrapper_CUDA_{wrapper})")
        raise RuntimeError(
            "Expected all tensors to be on the same device, but found at least two devices, "
            f"{dev} and {d}!"
        )
    return dev if dev is not None else CPU


def _shared_device(args: tuple) -> device | None:
    """The device of the tensor arguments when they are plain tensors on one device
    object (the usual call, decided without building a list); None: common_device
    decides (other tensor types, tensors in lists, several devices, no tensor)."""
    dev = None
    for a in args:
        ta = type(a)
        if ta in PLAIN:
            d = a._storage.device
            if dev is None:
                dev = d
            elif d is not dev:
                return None
        elif ta is int or ta is float or a is None:
            continue
        elif ta is list or ta is tuple:
            for x in a:  # sizes, strides, dims, output masks
                if type(x) is not int and isinstance(x, Tensor):
                    return None
        elif isinstance(a, Tensor):
            return None
    return dev


def _first_zero_dim_cpu(tensors: list, dev: device) -> bool:
    return all(t.dim() == 0 for t in tensors if t._storage.device == dev)


def kernel_layer(op: OpDef, args: tuple, kwargs: dict):
    """Layer 5: views alias, in-place ops write input 0, others run the device kernel."""
    kind = op.kind
    if kind == "view":
        return _make_view(op, args, kwargs)
    if _math_views.ACTIVE:  # an input may be a lazily conjugated / negated view
        result = _math_views.kernel(op, args, kwargs, kernel_layer)
        if result is not _math_views.PASS:
            return result
    if kind == "inplace":
        return _inplace(op, args, kwargs)
    if kind == "factory":
        dev = kwargs.get("device")
        dev = CPU if dev is None else resolve(dev)
    elif op.extra.get("cross_device"):
        # copies between devices run on the CUDA side (it owns the copy engine)
        devs = [t._storage.device for t in tensors_in(args, kwargs)]
        dev = next((d for d in devs if d.type == "cuda"), devs[0] if devs else CPU)
    elif len(args) == 2 and not kwargs and type(args[0]) in PLAIN and (
            type(args[1]) is float or type(args[1]) is int
            or (type(args[1]) in PLAIN
                and args[0]._storage.device is args[1]._storage.device)):
        dev = args[0]._storage.device  # the common binary case, decided without a scan
    else:
        dev = None if kwargs else _shared_device(args)
        if dev is None:
            dev = common_device(op, tensors_in(args, kwargs))
    dtype_ = dev.type
    if dtype_ == "cpu":
        if op.cpu is None:
            raise NotImplementedError(f"refimpl has no CPU kernel for '{op.name}'")
        result = _wrap(op.cpu(*args, **kwargs))
        if args and result is args[0]:
            return result  # an in-place kernel wrote into self: self keeps its own layout
        layout = op.extra.get("layout")
        if layout is not None and type(result) is Tensor and len(result._shape) > 1:
            strides = layout(result._shape, args, kwargs)
            if strides is not None and strides != result._stride:
                return _restrided(result, strides)
        return result
    if dtype_ == "cuda":
        if op.cuda is None:
            raise NotImplementedError(
                f"refimpl has no CUDA kernel for '{op.name}' yet (no CPU fallback is used)"
            )
        layout = op.extra.get("layout")
        if layout is not None:
            into = op.extra.get("cuda_into")
            strides = layout(None, args, kwargs)
            if strides is not None and into is not None:
                spec = op.meta(*args, **kwargs)
                out = _empty_strided(spec.shape, strides, spec.dtype, dev)
                into(out, *args, **kwargs)
                out._version_counter.version = 0
                return out
            result = op.cuda(*args, **kwargs)
            if strides is not None and type(result) is Tensor and strides != result._stride:
                return _restrided(result, strides)
            return result
        return op.cuda(*args, **kwargs)
    if dtype_ == "meta":
        return _meta_kernel(op, args, kwargs, dev)
    raise NotImplementedError(f"refimpl does not implement the '{dev.type}' device")


def _empty_strided(shape, strides, dtype, dev: device) -> Tensor:
    """A fresh tensor of ``shape`` laid out densely with ``strides``."""
    span = 0 if 0 in shape else 1 + sum((n - 1) * st for n, st in zip(shape, strides))
    return Tensor._make(Tensor._empty((span,), dtype, dev)._storage, shape, strides, 0, dtype)


def _restrided(result: Tensor, strides) -> Tensor:
    """A fresh tensor with ``result``'s values laid out with ``strides``."""
    out = _empty_strided(result._shape, strides, result.dtype, result._storage.device)
    copy_into(out, result)
    out._version_counter.version = 0
    return out


def _meta_kernel(op: OpDef, args: tuple, kwargs: dict, dev: device):
    """The meta device's kernel of every op: its meta function, outputs without data."""
    extra = op.extra
    if extra.get("inplace_view"):
        return op.cpu(*args, **kwargs)  # restriding touches metadata only
    spec = op.meta(*args, **kwargs)
    if extra.get("writes_input0"):
        return args[0]  # copy_, fill_ return the tensor they write, as their kernels do
    out = _from_spec(spec, dev)
    layout = extra.get("layout")
    if layout is not None and type(out) is Tensor and len(out._shape) > 1:
        strides = layout(out._shape, args, kwargs)
        if strides is not None:
            out = Tensor._make(out._storage, out._shape, strides, 0, out.dtype)
    for t in out if isinstance(out, tuple) else (out,):
        if t._storage.device.type != "meta":
            raise NotImplementedError("Cannot copy out of meta tensor; no data!")
    return out


def _wrap(result):
    """Turn a CPU kernel's numpy results into tensors (tensors pass through)."""
    if type(result) is np.ndarray:
        return Tensor._from_array(result)
    if type(result) is tuple:  # several arrays (a kernel's outputs): wrapped in one pass
        out = []
        for r in result:
            out.append(Tensor._from_array(r) if type(r) is np.ndarray else _wrap(r))
        return tuple(out)
    if isinstance(result, tuple):
        if hasattr(result, "_fields"):  # a named tuple (values, indices) keeps its type
            return type(result)(*(_wrap(r) for r in result))
        return tuple(_wrap(r) for r in result)
    if isinstance(result, list):
        return [_wrap(r) for r in result]
    if result is None or isinstance(result, (Tensor, bool, int, float, complex)):
        return result
    return Tensor._from_array(result)


def _from_spec(spec, dev: device):
    """Meta-device outputs from a meta function's specs."""
    if isinstance(spec, tuple) and not isinstance(spec, TensorSpec):
        return tuple(_from_spec(s, dev) for s in spec)
    return Tensor._empty(spec.shape, spec.dtype, spec.device or dev)


def _make_view(op: OpDef, args: tuple, kwargs: dict):
    """A view: same storage and version counter, metadata from the op's meta function."""
    spec = op.meta(*args, **kwargs)
    src = args[0]
    if isinstance(spec, ViewSpec):
        out = _alias(src, spec)
        bits = op.extra.get("math_bits")
        if bits is not None:
            bits(src, out)
        return out
    return tuple(_alias(src, s) for s in spec)


def _alias(src: Tensor, spec: ViewSpec) -> Tensor:
    # a view of an inference tensor is a plain alias, not a view (INFER-005/010)
    base = None if src._is_inference else (src._base if src._base is not None else src)
    t = Tensor._make(src._storage, spec.shape, spec.stride, spec.offset,
                     spec.dtype or src.dtype, src._version_counter, base)
    t._is_inference = src._is_inference
    if src._conj_bit or src._neg_bit:  # views keep the math-view bits
        t._conj_bit, t._neg_bit = src._conj_bit, src._neg_bit
    return t


INFERENCE_INPLACE = (
    "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a "
    "clone to get a normal tensor before doing inplace update.See "
    "https://github.com/pytorch/rfcs/pull/17 for more details."
)


def check_inplace_allowed(t: Tensor) -> None:
    """Inference tensors may only be written inside inference mode (INFER-009)."""
    if t._is_inference and not STATE.inference_mode:
        raise RuntimeError(INFERENCE_INPLACE)


def _inplace(op: OpDef, args: tuple, kwargs: dict):
    """Compute the base op, check the result fits ``self``, write it, bump the version."""
    self = args[0]
    if self._is_inference and not STATE.inference_mode:
        raise RuntimeError(INFERENCE_INPLACE)
    result = kernel_layer(op.base, args, kwargs)
    if result is self:  # the kernel wrote into self (CUDA elementwise ops)
        self._version_counter.bump()
    else:
        write_into(self, result, op.name)
    return self


def write_into(dst: Tensor, result: Tensor, name: str) -> None:
    """Store ``result`` into ``dst`` (in-place ops, out=): shape and cast checks, version bump."""
    if not D.can_cast(result.dtype, dst.dtype):
        raise RuntimeError(
            f"result type {D.type_name(result.dtype)} can't be cast to the desired output "
            f"type {D.type_name(dst.dtype)}"
        )
    if result._shape != dst._shape:
        from refimpl.ops._helpers import broadcast_shapes

        try:
            ok = broadcast_shapes(dst._shape, result._shape) == dst._shape
        except RuntimeError:
            ok = False
        if not ok:
            raise RuntimeError(
                f"output with shape {list(dst._shape)} doesn't match the broadcast shape "
                f"{list(broadcast_shapes(dst._shape, result._shape))}"
            )
    copy_into(dst, result)


def copy_into(dst: Tensor, src: Tensor) -> None:
    """Copy (broadcasting, casting) the values of ``src`` into ``dst``; bumps the version."""
    if dst._is_inference and not STATE.inference_mode:
        raise RuntimeError(INFERENCE_INPLACE)  # every device's copy_ and out= come here
    if _math_views.ACTIVE and (_math_views.has_bits(dst) or _math_views.has_bits(src)):
        counter = dst._version_counter
        dst, src = _math_views.stored_form(dst, src)  # store what makes dst's values src's
        dst._version_counter = counter
    dd, sd = dst._storage.device.type, src._storage.device.type
    if dd == "cpu" and sd == "cpu":
        np_dst = dst._np
        np_src = src._np
        if dst._storage is src._storage:
            np_src = np_src.copy()
        import numpy as np

        np.copyto(np_dst, np_src.astype(dst.dtype.np, copy=False), casting="unsafe")
    elif sd == "meta" and dd != "meta":
        raise NotImplementedError("Cannot copy out of meta tensor; no data!")
    elif dd != "meta":  # writing into a meta tensor stores nothing
        from refimpl.cuda import _tensor_ops

        _tensor_ops.copy_(dst, src)
    dst._version_counter.bump()


def _with_out(op: OpDef, args: tuple, kwargs: dict):
    """``op(..., out=t)``: compute without autograd, resize ``out`` if needed, write."""
    kwargs = dict(kwargs)
    out = kwargs.pop("out")
    name = op.name.split(".")[0]  # the overload suffix (sum.dim_IntList) is not shown
    if STATE.grad_enabled and any(t.requires_grad for t in tensors_in(args, kwargs)):
        raise RuntimeError(
            f"{name}(): functions with out=... arguments don't support automatic "
            "differentiation, but one of the arguments requires grad."
        )
    if STATE.grad_enabled and isinstance(out, Tensor) and out.requires_grad:
        raise RuntimeError(
            f"{name}(): functions with out=... arguments don't support automatic "
            "differentiation, but one of the arguments requires grad."
        )
    _check_out_memory(op, out, args, kwargs)
    into = op.extra.get("cuda_into")
    if into is not None and type(out) is Tensor and out._storage.device.type == "cuda":
        from refimpl.ops._pointwise_cuda import write_out_directly

        if write_out_directly(op, into, out, args, kwargs):
            out._version_counter.bump()
            return out
    result = below_autograd(op, args, kwargs)
    _check_out_dtypes(op, out, result, args)
    def recheck() -> None:  # an output resized to the result's shape may meet an input now
        _check_out_memory(op, out, args, kwargs)

    if isinstance(out, (tuple, list)):
        for o, r in zip(out, result):
            _write_out(o, r, op.name, recheck)
        return type(out)(out) if isinstance(out, tuple) else out
    _write_out(out, result, op.name, recheck)
    return out


def _write_out(out: Tensor, result: Tensor, name: str, after_resize=None) -> None:
    check_inplace_allowed(out)
    if out._storage.device != result._storage.device:
        raise RuntimeError(
            f"Expected out tensor to have device {result.device}, but got {out.device} instead"
        )
    if out._shape != result._shape:
        if out.numel() != 0:
            import warnings

            warnings.warn(
                f"An output with one or more elements was resized since it had shape "
                f"{list(out._shape)}, which does not match the required output shape "
                f"{list(result._shape)}. This behavior is deprecated, and in a future PyTorch "
                "release outputs will not be resized unless they have zero elements. You can "
                "explicitly reuse an out tensor t by resizing it, inplace, to zero elements "
                "with t.resize_(0).",
                UserWarning,
                stacklevel=4,
            )
        out.resize_(result._shape)
        if after_resize is not None:
            after_resize()
    write_into(out, result, name)


_OVERLAP = ("unsupported operation: {} refer{} to a single memory location. Please clone() "
            "the tensor before performing the operation.")


def _check_out_memory(op: OpDef, out, args: tuple, kwargs: dict) -> None:
    """torch's memory-overlap checks of out=: no two elements of an output share memory;
    for ops marked ``extra["out_overlap"]`` (gather, take, cat...) no output shares memory
    with an input."""
    outs = [o for o in (out if isinstance(out, (tuple, list)) else (out,))
            if type(o) is Tensor]
    for o in outs:
        assert_no_internal_overlap(o)
    if not op.extra.get("out_overlap"):
        return
    inputs = tensors_in(args, {k: v for k, v in kwargs.items() if k != "out"})
    for o in outs:
        assert_no_input_overlap(o, inputs)


def assert_no_input_overlap(out: Tensor, inputs) -> None:
    """torch's error for an output sharing memory with one of ``inputs`` (the same tensor,
    even empty, or intersecting memory)."""
    for t in inputs:
        if t is out or t._storage is out._storage and _spans_meet(t, out):
            raise RuntimeError(_OVERLAP.format(
                "some elements of the input tensor and the written-to tensor", ""))


def assert_no_internal_overlap(t: Tensor) -> None:
    """torch's error for an output some of whose elements share memory (a zero stride)."""
    if any(st == 0 and n > 1 for st, n in zip(t._stride, t._shape)):
        raise RuntimeError(_OVERLAP.format("more than one element of the written-to tensor",
                                           "s"))


def _spans_meet(a: Tensor, b: Tensor) -> bool:
    """Whether the memory ranges of two tensors of one storage intersect."""
    if a.numel() == 0 or b.numel() == 0:
        return False

    def span(t: Tensor) -> tuple:
        size = t.dtype.itemsize
        last = sum((n - 1) * st for n, st in zip(t._shape, t._stride))
        return t._offset * size, (t._offset + last + 1) * size

    (a0, a1), (b0, b1) = span(a), span(b)
    return a0 < b1 and b0 < a1


def _check_out_dtypes(op: OpDef, out, result, args: tuple) -> None:
    """Ops whose outputs must have exactly the result's dtype (``extra["out_dtype"]``: the
    message, with ``{out}``/``{res}`` torch's C++ type names and ``{OUT}``/``{RES}`` its
    scalar-type names of the output and the result; or a dict of them by device type)."""
    template = op.extra.get("out_dtype")
    if template is None:
        return
    if isinstance(template, dict):  # per device type
        kind = (result[0] if isinstance(result, tuple) else result).device.type
        template = template.get(kind, template["cpu"])
    from refimpl._typed import _C_NAMES

    pairs = zip(out, result) if isinstance(out, (tuple, list)) else ((out, result),)
    for o, r in pairs:
        if type(o) is Tensor and isinstance(r, Tensor) and o.dtype != r.dtype:
            raise RuntimeError(template.format(
                out=_C_NAMES.get(o.dtype.name, o.dtype.name),
                res=_C_NAMES.get(r.dtype.name, r.dtype.name),
                OUT=D.type_name(o.dtype), RES=D.type_name(r.dtype)))
