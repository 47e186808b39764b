"""Copies, fills, dtype/device conversion: copy_, clone, contiguous, to, fill_, zero_."""

from __future__ import annotations

import builtins

import numpy as np

from refimpl import _dtype as D
from refimpl._device import as_device, resolve
from refimpl._dispatch import copy_into
from refimpl._memory_format import contiguous_format, preserve_layout
from refimpl._tensor import Tensor
from refimpl.ops._registry import TensorSpec, defop


def _same_meta(self, *a, **k) -> TensorSpec:
    return TensorSpec(self._shape, self.dtype, self.device)


def _check_copy_source(self: Tensor, src) -> None:
    """copy_'s argument checks: a tensor that broadcasts to self's shape."""
    if not isinstance(src, Tensor):
        raise TypeError(f"copy_(): argument 'other' must be Tensor, not {type(src).__name__}")
    from refimpl.ops._helpers import broadcast_shapes

    if broadcast_shapes(self._shape, src._shape) != self._shape:
        raise RuntimeError(
            f"output with shape {list(self._shape)} doesn't match the broadcast shape "
            f"{list(broadcast_shapes(self._shape, src._shape))}"
        )


def _copy_cuda(self: Tensor, src, non_blocking: bool = False) -> Tensor:
    if self._is_inference:
        from refimpl._dispatch import check_inplace_allowed

        check_inplace_allowed(self)
    _check_copy_source(self, src)
    from refimpl.cuda import _tensor_ops

    _tensor_ops.copy_(self, src, non_blocking=non_blocking)
    self._version_counter.bump()
    return self


def _copy_cpu(self: Tensor, src, non_blocking: bool = False) -> Tensor:
    _check_copy_source(self, src)
    copy_into(self, src)
    return self


def _copy_backward(ctx, grad):
    src = ctx.args[1]
    gsrc = None
    if isinstance(src, Tensor):
        from refimpl.ops._helpers import sum_to

        gsrc = sum_to(grad, src.shape)
        if gsrc.dtype.category == 3 and src.dtype.category < 3:
            gsrc = gsrc.real  # a real source of a complex copy gets the real part
        if gsrc.dtype != src.dtype:
            gsrc = gsrc.to(src.dtype)
    # the old value of self is overwritten: it gets a zero gradient
    return grad.mul(0), gsrc


def _copy_jvp(ctx, t_self, t_src=None, *_):
    # self's old values are overwritten: its tangent becomes src's (zero when src has none)
    if t_src is None:
        return None
    self = ctx.outputs[0]
    if t_src.dtype.category == 3 and self.dtype.category < 3:
        t_src = t_src.real
    return t_src.to(self.dtype).expand(self.shape)


# copy_ writes into input 0 itself (not through a base op), so it is its own kind.
copy_ = defop("copy_", kind="compute", meta=_same_meta, cpu=_copy_cpu, cuda=_copy_cuda, backward=_copy_backward,
              jvp=_copy_jvp, node="CopyBackwards", extra={"writes_input0": True, "cross_device": True})


def _fill_cpu(self: Tensor, value) -> Tensor:
    if self._is_inference:
        from refimpl._dispatch import check_inplace_allowed

        check_inplace_allowed(self)
    if isinstance(value, Tensor):
        if value.dim() != 0:
            raise RuntimeError(
                "fill_ only supports 0-dimension value tensor but got tensor with "
                f"{value.dim()} dimensions."
            )
        value = value.item()
    arr = self._np
    with np.errstate(all="ignore"):
        arr[...] = np.asarray(value).astype(self.dtype.np) if not (
            self.dtype.category < 3 and isinstance(value, complex)) else value
    self._version_counter.bump()
    return self


def _fill_cuda(self: Tensor, value) -> Tensor:
    if self._is_inference:
        from refimpl._dispatch import check_inplace_allowed

        check_inplace_allowed(self)
    from refimpl.cuda import _tensor_ops

    if isinstance(value, Tensor):
        value = value.item()
    _tensor_ops.fill_(self, value)
    self._version_counter.bump()
    return self


fill_ = defop("fill_", meta=_same_meta, cpu=_fill_cpu, cuda=_fill_cuda,
              backward=lambda ctx, g: (g.mul(0), g.sum().to(ctx.args[1].dtype)
                                       if isinstance(ctx.args[1], Tensor) else None),
              jvp=lambda ctx, t_self, t_value=None: (
                  None if t_value is None else t_value.expand(ctx.outputs[0].shape)),
              node="FillBackward0", extra={"writes_input0": True})


def zero_(self: Tensor) -> Tensor:
    """Fill with zeros in place."""
    return fill_(self, 0)


def _clone_cpu(self: Tensor, *, memory_format=None) -> np.ndarray:
    return np.array(self._np, copy=True, order="C")


def _clone_cuda(self: Tensor, *, memory_format=None) -> Tensor:
    out = Tensor._empty(self._shape, self.dtype, self.device)
    copy_into(out, self)
    out._version_counter.version = 0
    return out


clone = defop("clone", meta=_same_meta, cpu=_clone_cpu, cuda=_clone_cuda,
              backward=lambda ctx, g: (g,), jvp=lambda ctx, t: t.clone(),
              extra={"layout": preserve_layout})


def contiguous(self: Tensor, memory_format=None) -> Tensor:
    """Self when already contiguous, else a contiguous copy (in ``memory_format``)."""
    if memory_format is not None and memory_format.name in ("channels_last",
                                                            "channels_last_3d"):
        from refimpl._memory_format import to_format

        return to_format(self, memory_format)
    return self if self.is_contiguous() else clone(self, memory_format=contiguous_format)


def _to_dtype_cpu(self: Tensor, dtype) -> np.ndarray:
    with np.errstate(all="ignore"):
        if dtype.category < 3 and self.dtype.category == 3:
            import warnings

            warnings.warn(
                "Casting complex values to real discards the imaginary part",
                UserWarning, stacklevel=4,
            )
            return self._np.real.astype(dtype.np)
        return self._np.astype(dtype.np)


def _to_dtype_cuda(self: Tensor, dtype) -> Tensor:
    out = Tensor._empty(self._shape, dtype, self.device)
    copy_into(out, self)
    out._version_counter.version = 0
    return out


def _to_dtype_backward(ctx, grad):
    src = ctx.args[0]
    if grad.dtype.category == 3 and src.dtype.category < 3:
        grad = grad.real  # real -> complex: the real input gets the real part
    return (grad.to(src.dtype) if grad.dtype != src.dtype else grad,)


def _to_dtype_jvp(ctx, tg, *_):
    out = ctx.outputs[0]
    if tg.dtype.category == 3 and out.dtype.category < 3:
        tg = tg.real
    return tg.to(out.dtype)


_to_copy = defop("_to_copy", meta=lambda self, dtype: TensorSpec(self._shape, dtype, self.device),
                 cpu=_to_dtype_cpu, cuda=_to_dtype_cuda, backward=_to_dtype_backward,
                 jvp=_to_dtype_jvp, node="ToCopyBackward0", extra={"layout": preserve_layout})


def _to_device_cpu(self: Tensor, device, non_blocking: bool = False) -> Tensor:
    if device.type == "cpu" and self.device.type == "cuda" and non_blocking:
        # torch: a non-blocking copy to the host lands in pinned memory
        from refimpl.cuda import _tensor_ops

        out = _tensor_ops.empty_pinned(self._shape, self.dtype)
        _tensor_ops.copy_(out, self, non_blocking=True)
        return out
    out = Tensor._empty(self._shape, self.dtype, device)
    if device.type == "cuda" or self.device.type == "cuda":
        from refimpl.cuda import _tensor_ops

        _tensor_ops.copy_(out, self, non_blocking=non_blocking)
        return out
    copy_into(out, self)
    out._version_counter.version = 0
    return out


def _to_device_backward(ctx, grad):
    return (grad.to(ctx.args[0].device),)


to_device = defop("_to_device", meta=lambda self, device, non_blocking=False: TensorSpec(
    self._shape, self.dtype, device), cpu=_to_device_cpu, cuda=_to_device_cpu,
    backward=_to_device_backward, jvp=lambda ctx, tg, *_: tg.to(ctx.outputs[0].device),
    node="ToCopyBackward0", extra={"layout": preserve_layout})


def _parse_to(args, kwargs) -> tuple:
    """``(device, dtype, non_blocking, copy)`` of a ``Tensor.to`` call: a device and/or
    dtype (or a tensor giving both), then ``non_blocking`` and ``copy`` positionally."""
    dev = dtype = None
    flags: list = []
    for a in args:
        if isinstance(a, builtins.bool):
            flags.append(a)
        elif isinstance(a, Tensor):
            dev, dtype = a.device, a.dtype
        elif isinstance(a, D.dtype):
            dtype = a
        elif a is not None:
            dev = a
    flags += [False] * (2 - len(flags))
    dev = kwargs.get("device", dev)
    dtype = kwargs.get("dtype", dtype)
    return (resolve(as_device(dev)) if dev is not None else None,
            D.dtype_from_any(dtype) if dtype is not None else None,
            kwargs.get("non_blocking", flags[0]), kwargs.get("copy", flags[1]))


def to(self: Tensor, *args, **kwargs) -> Tensor:
    """Convert dtype and/or device; returns self when nothing changes (unless copy=True)."""
    dev, dtype, non_blocking, copy = _parse_to(args, kwargs)
    out = self
    if dtype is not None and dtype != out.dtype:
        out = _to_copy(out, dtype)
    if dev is not None and dev != out.device:
        out = to_device(out, dev, non_blocking)
    fmt = kwargs.get("memory_format")
    if fmt is not None and fmt.name in ("channels_last", "channels_last_3d"):
        out = contiguous(out, memory_format=fmt)
    if copy and out is self:
        out = clone(self)
    return out


def cpu(self: Tensor) -> Tensor:
    """A CPU copy (self when already on the CPU)."""
    return to(self, "cpu")


def cuda(self: Tensor, device=None, non_blocking: bool = False) -> Tensor:
    """A CUDA copy on ``device`` (the current device by default)."""
    # ``int`` is the Tensor.int method in this module: the builtin is spelled out
    dev = as_device("cuda" if device is None else
                    f"cuda:{device}" if isinstance(device, builtins.int) else device)
    return to(self, dev, non_blocking=non_blocking)


__all__ = ["clone", "fill_", "zero_"]
def _pin_memory_cpu(self: Tensor, device=None) -> Tensor:
    from refimpl.cuda import _tensor_ops

    return _tensor_ops.pin_memory(self)


def _pin_memory_cuda(self: Tensor, device=None) -> Tensor:
    # pinning is a property of host memory: a device tensor is refused, as in torch
    raise RuntimeError(
        f"cannot pin '{self.type()}' only dense CPU tensors can be pinned")


# A copy into pinned memory: differentiable with an identity gradient (CUDAMEM-404).
pin_memory = defop("pin_memory", meta=_same_meta, cpu=_pin_memory_cpu, cuda=_pin_memory_cuda,
                   backward=lambda ctx, g: (g,), jvp=lambda ctx, t: t.clone(),
                   node="PinMemoryBackward0")


def is_pinned(self: Tensor, device=None) -> bool:
    """Whether this CPU tensor lives in pinned memory."""
    if self.device.type != "cpu":
        return False
    from refimpl.cuda import _host_allocator

    if _host_allocator._host_allocator is None and not _host_allocator._registered:
        return False
    from refimpl.cuda import _tensor_ops

    return _tensor_ops.is_pinned(self)


def record_stream(self: Tensor, stream) -> None:
    """Mark this CUDA tensor's memory as in use on ``stream`` until the work queued there
    when the tensor is freed has completed (the caching allocator defers its reuse)."""
    if self.device.type != "cuda":
        # torch's dispatcher has no kernel for other devices: NotImplementedError, which is
        # a RuntimeError, with the dispatcher's wording.
        backend = self.device.type.upper() if self.device.type != "meta" else "Meta"
        raise NotImplementedError(
            f"Could not run 'aten::record_stream' with arguments from the '{backend}' backend. "
            "'aten::record_stream' is only available for the CUDA backend."
        )
    from refimpl.cuda import _tensor_memory

    _tensor_memory.record_stream(self._storage, stream)


def _cast_method(name: str, dtype: D.dtype):
    def method(self: Tensor, memory_format=None) -> Tensor:
        return to(self, dtype)

    method.__name__ = name
    method.__doc__ = f"``self.to({dtype!r})``."
    return method


float = _cast_method("float", D.float32)
double = _cast_method("double", D.float64)
half = _cast_method("half", D.float16)
bfloat16 = _cast_method("bfloat16", D.bfloat16)
int = _cast_method("int", D.int32)
long = _cast_method("long", D.int64)
short = _cast_method("short", D.int16)
char = _cast_method("char", D.int8)
byte = _cast_method("byte", D.uint8)
bool = _cast_method("bool", D.bool_)
cfloat = _cast_method("cfloat", D.complex64)
cdouble = _cast_method("cdouble", D.complex128)


def type(self: Tensor, dtype=None, non_blocking: bool = False):
    """The legacy type name (``torch.FloatTensor``), or a copy converted to ``dtype``."""
    if dtype is None:
        prefix = "torch.cuda." if self.device.type == "cuda" else "torch."
        return prefix + D.legacy_type_name(self.dtype)
    from refimpl._typed import _TensorType

    if isinstance(dtype, _TensorType):  # a legacy class: refimpl.cuda.FloatTensor, ...
        dtype = ("torch.cuda." if dtype.is_cuda else "torch.") + dtype.__name__
    if isinstance(dtype, str):
        name = dtype.removeprefix("torch.").removeprefix("cuda.")
        match = [d for d in D.DTYPES.values() if D.legacy_type_name(d) == name]
        if not match:
            raise ValueError(f"invalid type: '{dtype}'")
        out = to(self, match[0])
        return out.cuda() if "cuda." in dtype else out
    return to(self, D.dtype_from_any(dtype))


TENSOR_METHODS = ("zero_", "contiguous", "to", "cpu", "cuda", "pin_memory", "is_pinned",
                  "record_stream", "float", "double", "half", "bfloat16", "int", "long",
                  "short", "char", "byte", "bool", "cfloat", "cdouble", "type")
