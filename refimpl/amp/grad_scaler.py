"""GradScaler: dynamic loss scaling for mixed-precision training (spec AMP-SCALER-*).

A scaler keeps a float32 scale and an int32 growth tracker as 0-dim tensors on the device
of the first tensor it scales (created lazily by :meth:`GradScaler.scale`). One iteration:

1. ``scaler.scale(loss).backward()``: gradients come out multiplied by the scale.
2. ``scaler.unscale_(optimizer)`` (optional; ``step`` does it otherwise): every gradient
   of the optimizer is multiplied by 1/scale, grouped by device and dtype, through
   ``_amp_foreach_non_finite_check_and_unscale_``, which also records on each device
   whether any gradient held an inf or a NaN.
3. ``scaler.step(optimizer)``: runs ``optimizer.step()`` only if no device found an
   inf/NaN (this reads the flags on the host: the one synchronization of an iteration).
4. ``scaler.update()``: ``_amp_update_scale_`` backs the scale off after a skipped step
   or grows it after ``growth_interval`` clean steps, on the device.

Each optimizer moves through READY -> UNSCALED -> STEPPED within an iteration;
``update`` returns every optimizer to READY. Out-of-order calls raise torch's errors.
"""

from __future__ import annotations

import inspect
import warnings
from collections import abc, defaultdict
from enum import Enum
from typing import Any

import refimpl
from refimpl._tensor import Tensor

__all__ = ["GradScaler", "OptState"]

_FIX = ("This may indicate your script did not use scaler.scale(loss or outputs) earlier in "
        "the iteration.")
_NEW_SCALE = ("new_scale should be a float or a 1-element torch.cuda.FloatTensor or "
              "torch.FloatTensor with requires_grad=False.")


class OptState(Enum):
    """Where one optimizer stands in the current iteration."""

    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_optimizer_state() -> dict[str, Any]:
    # a module-level factory (not a lambda) so that a scaler's state pickles
    return {"stage": OptState.READY, "found_inf_per_device": {}}


class _PerDevice:
    """One tensor and its copies on other devices, each made once, on first request."""

    def __init__(self, master: Tensor) -> None:
        self.master = master
        self.copies: dict = {}

    def get(self, device) -> Tensor:
        copy = self.copies.get(device)
        if copy is None:
            copy = self.master.to(device=device, non_blocking=True, copy=True)
            self.copies[device] = copy
        return copy


class GradScaler:
    """Scale losses, unscale and check gradients, skip bad steps, adapt the scale.

    Args:
        device: the device type the scaler's tensors live on (``"cuda"`` or ``"cpu"``).
        init_scale: the first scale.
        growth_factor: multiplies the scale after ``growth_interval`` clean steps (> 1).
        backoff_factor: multiplies the scale after a step with inf/NaN gradients (< 1).
        growth_interval: clean steps in a row before the scale grows.
        enabled: when False, ``scale``/``unscale_``/``update`` do nothing and ``step``
            just calls ``optimizer.step()``.
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0**16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        self._device = device
        self._enabled = enabled
        if device == "cuda" and enabled and not refimpl.cuda.is_available():
            warnings.warn(
                "torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                stacklevel=2)
            self._enabled = False
        if not self._enabled:
            return
        if growth_factor <= 1.0:
            raise AssertionError("The growth factor must be > 1.0.")
        if backoff_factor >= 1.0:
            raise AssertionError("The backoff factor must be < 1.0.")
        self._init_scale = init_scale
        self._scale: Tensor | None = None
        self._growth_factor = growth_factor
        self._backoff_factor = backoff_factor
        self._growth_interval = growth_interval
        self._init_growth_tracker = 0
        self._growth_tracker: Tensor | None = None
        self._per_optimizer_states: dict[int, dict[str, Any]] = defaultdict(
            _fresh_optimizer_state)

    # -- the scale tensors --------------------------------------------------------------

    def _check_scale_growth_tracker(self, funcname: str) -> tuple[Tensor, Tensor]:
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  " + _FIX)
        if self._growth_tracker is None:
            raise AssertionError(f"Attempted {funcname} but _growth_tracker is None.  " + _FIX)
        return self._scale, self._growth_tracker

    def _lazy_init_scale_growth_tracker(self, dev) -> None:
        if self._growth_tracker is not None:
            raise AssertionError("_growth_tracker initialized before _scale")
        self._scale = refimpl.full((), self._init_scale, dtype=refimpl.float32, device=dev)
        self._growth_tracker = refimpl.full((), self._init_growth_tracker,
                                            dtype=refimpl.int32, device=dev)

    def _scale_for(self, dev) -> Tensor:
        if self._scale is None:
            self._lazy_init_scale_growth_tracker(dev)
        assert self._scale is not None
        return self._scale

    # -- scale ---------------------------------------------------------------------------

    def scale(self, outputs):
        """Multiply a tensor, or every tensor of a (nested) iterable, by the scale.

        Lists and tuples come back as lists and tuples; other iterables come back as
        lazy iterators. A disabled scaler returns ``outputs`` itself.
        """
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            scale = self._scale_for(outputs.device)
            return outputs * scale.to(device=outputs.device, non_blocking=True)
        replicas: list[_PerDevice] = []

        def apply(value):
            if isinstance(value, Tensor):
                if not replicas:
                    replicas.append(_PerDevice(self._scale_for(value.device)))
                return value * replicas[0].get(value.device)
            if isinstance(value, abc.Iterable):
                scaled = map(apply, value)
                return type(value)(scaled) if isinstance(value, (list, tuple)) else scaled
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")

        return apply(outputs)

    # -- unscale_ ------------------------------------------------------------------------

    def _unscale_grads_(self, optimizer, inv_scale: Tensor, found_inf: Tensor,
                        allow_fp16: bool) -> dict:
        """Unscale the optimizer's gradients, one fused call per (device, dtype) group;
        returns each device's found-inf flag."""
        per_device_inv_scale = _PerDevice(inv_scale)
        per_device_found_inf = _PerDevice(found_inf)
        groups: dict = defaultdict(lambda: defaultdict(list))
        with refimpl.no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    if not isinstance(param, Tensor):
                        raise AssertionError(  # noqa: TRY004 - torch's exception type
                            f"expected param to be torch.Tensor, got {type(param).__name__}")
                    grad = param.grad
                    if grad is None:
                        continue
                    if not allow_fp16 and grad.dtype is refimpl.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    groups[grad.device][grad.dtype].append(grad)
            for dev, per_dtype in groups.items():
                for grads in per_dtype.values():
                    refimpl._amp_foreach_non_finite_check_and_unscale_(
                        grads, per_device_found_inf.get(dev), per_device_inv_scale.get(dev))
        return per_device_found_inf.copies

    def unscale_(self, optimizer) -> None:
        """Divide the optimizer's gradients by the scale now (e.g. before clipping them).

        At most once per optimizer between two ``update()`` calls, and before ``step``.
        """
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError(
                "unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        assert self._scale is not None
        # the reciprocal in float64, rounded once to float32, as torch computes it
        inv_scale = self._scale.double().reciprocal().float()
        found_inf = refimpl.full((), 0.0, dtype=refimpl.float32, device=self._scale.device)
        state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, found_inf,
                                                             False)
        state["stage"] = OptState.UNSCALED

    # -- step ----------------------------------------------------------------------------

    def _maybe_opt_step(self, optimizer, state: dict, *args, **kwargs):
        if not sum(v.item() for v in state["found_inf_per_device"].values()):
            return optimizer.step(*args, **kwargs)
        return None

    def step(self, optimizer, *args, **kwargs):
        """Unscale (unless ``unscale_`` already did) and call ``optimizer.step(*args,
        **kwargs)`` unless a gradient held an inf or a NaN; returns what step returned.

        An optimizer with ``_step_supports_amp_scaling`` handles the scale itself: it
        receives ``grad_scale`` and ``found_inf`` attributes for the duration of its step.
        """
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if getattr(optimizer, "_step_supports_amp_scaling", False):
            return self._step_amp_aware(optimizer, state, args, kwargs)
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if len(state["found_inf_per_device"]) == 0:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        retval = self._maybe_opt_step(optimizer, state, *args, **kwargs)
        state["stage"] = OptState.STEPPED
        return retval

    def _step_amp_aware(self, optimizer, state: dict, args: tuple, kwargs: dict):
        """An optimizer that unscales and skips by itself (fused optimizers)."""
        passes_self = "grad_scaler" in inspect.signature(optimizer.step).parameters
        if passes_self:
            warnings.warn(
                "GradScaler is going to stop passing itself as a keyword argument to the passed "
                "optimizer. In the near future GradScaler registers `grad_scale: Tensor` and "
                "`found_inf: Tensor` to the passed optimizer and let the optimizer use them "
                "directly.", FutureWarning, stacklevel=3)
            kwargs.update({"grad_scaler": self})
        else:
            if state["stage"] is OptState.READY:
                self._check_inf_per_device(optimizer)
            scale = self._get_scale_async()
            assert scale is not None
            found_inf = sum(t.to(scale.device, non_blocking=True)
                            for t in state["found_inf_per_device"].values())
            # a grad_scale the user set multiplies the scaler's, unless unscale_ ran
            optimizer.grad_scale = (
                getattr(optimizer, "grad_scale", None) if state["stage"] is OptState.UNSCALED
                else scale * getattr(optimizer, "grad_scale", 1))
            optimizer.found_inf = found_inf
        retval = optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        if not passes_self:
            del optimizer.grad_scale
            del optimizer.found_inf
        return retval

    # -- update --------------------------------------------------------------------------

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Back the scale off after a skipped step, grow it after ``growth_interval``
        clean steps, or set it to ``new_scale`` (a float, or a 1-element tensor on the
        scaler's device type without requires_grad, whose value is copied)."""
        if not self._enabled:
            return
        scale, growth_tracker = self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, float):
                scale.fill_(new_scale)
            else:
                if new_scale.device.type != self._device:
                    raise AssertionError(_NEW_SCALE)
                if new_scale.numel() != 1:
                    raise AssertionError(_NEW_SCALE)
                if new_scale.requires_grad is True:
                    raise AssertionError(_NEW_SCALE)
                scale.copy_(new_scale)
        else:
            found_infs = [found_inf.to(device=scale.device, non_blocking=True)
                          for state in self._per_optimizer_states.values()
                          for found_inf in state["found_inf_per_device"].values()]
            if len(found_infs) == 0:
                raise AssertionError("No inf checks were recorded prior to update.")
            combined = found_infs[0]
            for other in found_infs[1:]:
                combined += other
            refimpl._amp_update_scale_(scale, growth_tracker, combined, self._growth_factor,
                                       self._backoff_factor, self._growth_interval)
        self._per_optimizer_states = defaultdict(_fresh_optimizer_state)

    # -- getters and setters -------------------------------------------------------------

    def _get_scale_async(self) -> Tensor | None:
        return self._scale

    def get_scale(self) -> float:
        """The current scale as a Python float (1.0 when disabled); reads the device."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else self._scale.item()

    def get_growth_factor(self) -> float:
        """The factor the scale grows by."""
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        """Set the factor the scale grows by."""
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        """The factor the scale backs off by."""
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        """Set the factor the scale backs off by."""
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        """How many clean steps in a row make the scale grow."""
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        """Set how many clean steps in a row make the scale grow."""
        self._growth_interval = new_interval

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        if self._growth_tracker is None:
            return self._init_growth_tracker
        return self._growth_tracker.item()

    def is_enabled(self) -> bool:
        """Whether the scaler is enabled."""
        return self._enabled

    # -- state ---------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """``scale``, ``growth_factor``, ``backoff_factor``, ``growth_interval`` and
        ``_growth_tracker`` as Python numbers; ``{}`` when disabled."""
        if not self._enabled:
            return {}
        return {
            "scale": self.get_scale(),
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._get_growth_tracker(),
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (nothing happens when disabled)."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError(
                "The source state dict is empty, possibly because it was saved "
                "from a disabled instance of GradScaler.")
        self._init_scale = state_dict["scale"]
        if self._scale is not None:
            self._scale.fill_(state_dict["scale"])
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(state_dict["_growth_tracker"])

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if self._enabled:
            if len(self._per_optimizer_states) != 0:
                raise AssertionError(
                    "A GradScaler instance may only be pickled at the beginning "
                    "of an iteration, or at the end after scaler.update().")
            # the tensors are not pickled: the copy recreates them lazily from numbers
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._get_growth_tracker()
            state["_scale"] = None
            state["_growth_tracker"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def _check_inf_per_device(self, optimizer) -> dict:
        scale, _ = self._check_scale_growth_tracker("_check_inf_per_device")
        dummy_inv_scale = refimpl.full((), 1.0, dtype=refimpl.float32, device=scale.device)
        found_inf = refimpl.full((), 0.0, dtype=refimpl.float32, device=scale.device)
        state = self._per_optimizer_states[id(optimizer)]
        state["found_inf_per_device"] = self._unscale_grads_(optimizer, dummy_inv_scale,
                                                             found_inf, True)
        return state["found_inf_per_device"]

    def _found_inf_per_device(self, optimizer) -> dict:
        return self._per_optimizer_states[id(optimizer)]["found_inf_per_device"]


class DeprecatedGradScaler(GradScaler):
    """``torch.cpu.amp.GradScaler`` / ``torch.cuda.amp.GradScaler``: a GradScaler of the
    subclass's ``device_type`` whose construction emits torch's FutureWarning."""

    device_type = "cuda"

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True) -> None:
        import warnings

        dev = self.device_type
        warnings.warn(
            f"`torch.{dev}.amp.GradScaler(args...)` is deprecated. "
            f"Please use `torch.amp.GradScaler('{dev}', args...)` instead.",
            FutureWarning, stacklevel=2)
        super().__init__(dev, init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval,
                         enabled=enabled)
