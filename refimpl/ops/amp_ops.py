"""The two fused ops behind GradScaler (spec AMP-SCALER-020, AMP-SCALER-021).

``_amp_foreach_non_finite_check_and_unscale_(self, found_inf, inv_scale)``
    For every gradient of the list ``self``: if an element is infinite or NaN, store 1.0
    into the 1-element float32 ``found_inf`` (never reset it: zeroing is the caller's
    job); then multiply the gradient in place by the 1-element float32 ``inv_scale``
    (float16/bfloat16 compute in float32, float64 in float64; an inverse scale of exactly
    1.0 leaves the values as they are). Returns None.
``_amp_update_scale_(self, growth_tracker, found_inf, scale_growth_factor,
scale_backoff_factor, growth_interval)``
    Update the 1-element float32 scale ``self`` and the 1-element int32
    ``growth_tracker`` in place: a non-zero ``found_inf`` (NaN counts) multiplies the
    scale by the backoff factor and zeroes the tracker; otherwise the tracker counts one
    more successful step, and when it reaches ``growth_interval`` the scale is multiplied
    by the growth factor (kept only if the float32 product is finite) and the tracker
    restarts at 0. Products are computed in float64 and rounded to float32. Returns self.

Both have a CPU kernel (numpy) and a CUDA kernel (``refimpl/cuda/_amp_kernels.py``) that
reads the flags and scale on the device, so a training step never waits for the GPU.
Torch's argument checks and messages, in torch's order, per device. As in torch, only the
scale's version counter moves (the gradients, found_inf and the growth tracker keep theirs).
"""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl._tensor import Tensor
from refimpl.ops._registry import TensorSpec, defop

__all__ = ["_amp_foreach_non_finite_check_and_unscale_", "_amp_update_scale_"]

_FOREACH = "_amp_foreach_non_finite_check_and_unscale"
_FLOATING = (D.float16, D.bfloat16, D.float32, D.float64)
_CUDA_FLOATING = (D.float16, D.float32, D.float64)


def _check_unscale_scalars(found_inf: Tensor, inv_scale: Tensor) -> None:
    if inv_scale.numel() != 1:
        raise RuntimeError("inv_scale must be a 1-element tensor.")
    if found_inf.numel() != 1:
        raise RuntimeError("found_inf must be a 1-element tensor.")
    if inv_scale.dtype is not D.float32:
        raise RuntimeError("inv_scale must be a float tensor.")
    if found_inf.dtype is not D.float32:
        raise RuntimeError("found_inf must be a float tensor.")


def _check_grad_list(self) -> list:
    if isinstance(self, Tensor) or not isinstance(self, (list, tuple)):
        raise TypeError(
            "_amp_foreach_non_finite_check_and_unscale_(): argument 'self' (position 1) must "
            f"be tuple of Tensors, not {type(self).__name__}")
    return list(self)


def _not_implemented(kernel: str, dtype: D.dtype) -> NotImplementedError:
    return NotImplementedError(f'"{kernel}" not implemented for \'{D.type_name(dtype)}\'')


def _unscale_meta(self, found_inf: Tensor, inv_scale: Tensor) -> tuple:
    _check_grad_list(self)
    _check_unscale_scalars(found_inf, inv_scale)
    return ()  # no outputs: the op writes its inputs


def _unscale_cpu(self, found_inf: Tensor, inv_scale: Tensor) -> None:
    grads = _check_grad_list(self)
    _check_unscale_scalars(found_inf, inv_scale)
    inv = np.float32(inv_scale._np.reshape(-1)[0])
    for grad in grads:
        if grad.dtype not in _FLOATING:
            raise _not_implemented(f"{_FOREACH}_cpu", grad.dtype)
        arr = grad._np
        compute = np.float64 if grad.dtype is D.float64 else np.float32
        values = arr.astype(compute)
        if not np.isfinite(values).all():
            found_inf._np[...] = 1.0
        if inv != 1.0:
            with np.errstate(all="ignore"):
                arr[...] = (values * compute(inv)).astype(arr.dtype)


def _dense(t: Tensor) -> bool:
    return t.is_contiguous()


def _same_device(method: str, named: list) -> None:
    """torch's generated device check of a CUDA kernel's wrapper: the first tensor's device
    is the common one; the first argument on another names itself."""
    common = None
    for name, tensors in named:
        for t in tensors if isinstance(tensors, (list, tuple)) else (tensors,):
            if common is None:
                common = t.device
            elif t.device != common:
                raise RuntimeError(
                    f"Expected all tensors to be on the same device, but got {name} is on "
                    f"{t.device}, different from other tensors on {common} (when checking "
                    f"argument in method wrapper_CUDA__{method})")


def _unscale_cuda(self, found_inf: Tensor, inv_scale: Tensor) -> None:
    grads = _check_grad_list(self)
    # the wrapper's check runs before the kernel (an empty list included), so past it
    # every tensor is on the one CUDA device the dispatcher chose
    _same_device("_amp_foreach_non_finite_check_and_unscale_",
                 [("self", grads), ("found_inf", found_inf), ("inv_scale", inv_scale)])
    if not grads:
        return
    _check_unscale_scalars(found_inf, inv_scale)
    first = grads[0]
    fast = all(g.dtype is first.dtype and _dense(g) for g in grads)
    from refimpl.cuda import _amp_kernels

    for grad in grads:
        if grad.dtype not in _CUDA_FLOATING:
            batched = fast or (grad.dtype is first.dtype and _dense(grad))
            name = f"{_FOREACH}_cuda" if batched else "_amp_non_finite_check_and_unscale_cuda"
            raise _not_implemented(name, grad.dtype)
        _amp_kernels.unscale_(grad, found_inf, inv_scale)
    return


_amp_foreach_non_finite_check_and_unscale_ = defop(
    "_amp_foreach_non_finite_check_and_unscale_", meta=_unscale_meta, cpu=_unscale_cpu,
    cuda=_unscale_cuda, differentiable=False,
    extra={"method": False, "cross_device": True})


def _check_update_args(scale: Tensor, growth_tracker: Tensor, found_inf: Tensor) -> None:
    if growth_tracker.numel() != 1:
        raise RuntimeError("growth_tracker must be a 1-element tensor.")
    if scale.numel() != 1:
        raise RuntimeError("current_scale must be a 1-element tensor.")
    if found_inf.numel() != 1:
        raise RuntimeError("found_inf must be a 1-element tensor.")
    if growth_tracker.dtype is not D.int32:
        raise RuntimeError("growth_tracker must be an int tensor.")
    if scale.dtype is not D.float32:
        raise RuntimeError("current_scale must be a float tensor.")
    if found_inf.dtype is not D.float32:
        raise RuntimeError("found_inf must be a float tensor.")


def _update_meta(self: Tensor, growth_tracker: Tensor, found_inf: Tensor,
                 scale_growth_factor: float, scale_backoff_factor: float,
                 growth_interval: int) -> TensorSpec:
    _check_update_args(self, growth_tracker, found_inf)
    return TensorSpec(self._shape, self.dtype, self.device)


def _update_cpu(self: Tensor, growth_tracker: Tensor, found_inf: Tensor,
                scale_growth_factor: float, scale_backoff_factor: float,
                growth_interval: int) -> Tensor:
    _check_update_args(self, growth_tracker, found_inf)
    scale = float(self._np.reshape(-1)[0])
    tracker = int(growth_tracker._np.reshape(-1)[0])
    with np.errstate(all="ignore"):
        if float(found_inf._np.reshape(-1)[0]) != 0.0:  # NaN counts as found
            scale, tracker = np.float32(scale * scale_backoff_factor), 0
        elif tracker + 1 == growth_interval:
            grown = np.float32(scale * scale_growth_factor)
            scale, tracker = (grown if np.isfinite(grown) else scale), 0
        else:
            tracker += 1
    self._np[...] = scale
    growth_tracker._np[...] = np.int64(tracker).astype(np.int32)
    self._version_counter.bump()
    return self


def _update_cuda(self: Tensor, growth_tracker: Tensor, found_inf: Tensor,
                 scale_growth_factor: float, scale_backoff_factor: float,
                 growth_interval: int) -> Tensor:
    _same_device("_amp_update_scale_", [("self", self), ("growth_tracker", growth_tracker),
                                        ("found_inf", found_inf)])
    _check_update_args(self, growth_tracker, found_inf)
    from refimpl.cuda import _amp_kernels

    _amp_kernels.update_scale_(self, growth_tracker, found_inf, scale_growth_factor,
                               scale_backoff_factor, growth_interval)
    self._version_counter.bump()
    return self


_amp_update_scale_ = defop(
    "_amp_update_scale_", meta=_update_meta, cpu=_update_cpu, cuda=_update_cuda,
    differentiable=False,
    extra={"method": False, "cross_device": True, "writes_input0": True})
