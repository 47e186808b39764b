"""Conversion methods of ``nn.Module`` (spec NN-022), as a mixin: ``apply``, ``to``,
``cuda``, ``cpu``, ``float``/``double``/``half``/``bfloat16``, ``type``.

Parameters are converted in place (the Parameter objects, which optimizers and hooks
hold, are kept; their gradients follow); buffers are replaced.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from refimpl._tensor import Tensor

if TYPE_CHECKING:
    from refimpl.nn.modules.module import Module


class ConversionMixin:
    """The conversion half of Module (it relies on Module's registries)."""

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """Call ``fn`` on every submodule (children first), then on self."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    def _apply(self, fn: Callable[[Tensor], Tensor], recurse: bool = True) -> Module:
        from refimpl.autograd.grad_mode import no_grad

        if recurse:
            for module in self.children():
                module._apply(fn)
        for key, param in self._parameters.items():
            if param is None:
                continue
            with no_grad():
                applied = fn(param)
            _set_payload(param, applied)
            if param.grad is not None:
                with no_grad():
                    grad_applied = fn(param.grad)
                _set_payload(param.grad, grad_applied)
            self._parameters[key] = param
        for key, buf in self._buffers.items():
            if buf is not None:
                self._buffers[key] = fn(buf)
        return self

    def to(self, *args, **kwargs) -> Module:
        """Move and/or cast parameters and buffers: ``to(device)``, ``to(dtype)``,
        ``to(device, dtype)``, ``to(tensor)``; only floating tensors change dtype."""
        from refimpl._device import device as Device

        dev = kwargs.pop("device", None)
        dtype = kwargs.pop("dtype", None)
        non_blocking = kwargs.pop("non_blocking", False)
        kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"to() received an invalid combination of arguments - got "
                            f"unexpected keyword arguments {list(kwargs)}")
        for a in args:
            if isinstance(a, Tensor):
                dev, dtype = a.device, a.dtype
            elif isinstance(a, (str, Device, int)):
                dev = a
            elif isinstance(a, bool):
                non_blocking = a
            elif a is not None:
                dtype = a
        if dtype is not None and not (dtype.is_floating_point or dtype.is_complex):
            raise TypeError("nn.Module.to only accepts floating point or complex dtypes, but "
                            f"got desired dtype={dtype}")

        def convert(t: Tensor) -> Tensor:
            options = {"non_blocking": non_blocking}
            if dev is not None:
                options["device"] = dev
            if dtype is not None and (t.is_floating_point() or t.is_complex()):
                options["dtype"] = dtype
            return t.to(**options)

        return self._apply(convert)

    def cuda(self, device=None) -> Module:
        """Move every parameter and buffer to a CUDA device."""
        return self._apply(lambda t: t.cuda(device))

    def cpu(self) -> Module:
        """Move every parameter and buffer to the CPU."""
        return self._apply(lambda t: t.cpu())

    def type(self, dst_type) -> Module:
        """Cast every parameter and buffer to ``dst_type``."""
        return self._apply(lambda t: t.type(dst_type))

    def float(self) -> Module:
        """Cast floating parameters and buffers to float32."""
        return self._cast_floating("float32")

    def double(self) -> Module:
        """Cast floating parameters and buffers to float64."""
        return self._cast_floating("float64")

    def half(self) -> Module:
        """Cast floating parameters and buffers to float16."""
        return self._cast_floating("float16")

    def bfloat16(self) -> Module:
        """Cast floating parameters and buffers to bfloat16."""
        return self._cast_floating("bfloat16")

    def _cast_floating(self, name: str) -> Module:
        from refimpl import _dtype as D

        dt = getattr(D, name)
        return self._apply(lambda t: t.to(dt) if t.is_floating_point() else t)


def _set_payload(param: Tensor, value: Tensor) -> None:
    """Make ``param`` hold ``value``'s data, keeping the object (its identity is what
    optimizers and hooks hold), across devices too (``.data =`` refuses those)."""
    if value.device.type == param.device.type:
        param.data = value
        return
    param._storage = value._storage
    param.dtype = value.dtype
    param._set_metadata(value._shape, value._stride, value._offset)
    param._grad_acc = None

