"""SGD with momentum, dampening, Nesterov, weight decay and maximize (spec OPTIM-100..).

The update is torch's single-tensor one; ``foreach`` and ``fused`` select torch's other
implementations of the same arithmetic, so refimpl accepts them and computes the same.
"""

from __future__ import annotations

from refimpl._tensor import Tensor
from refimpl.optim import _capturable, _cpu_update, _cuda_update
from refimpl.optim.optimizer import (
    Optimizer,
    check_fused,
    device_dtype_check_for_fused,
    grad_of,
    params_with_grad,
)


class SGD(Optimizer):
    """Stochastic gradient descent: ``p -= lr * (momentum buffer or gradient)``."""

    def __init__(self, params, lr: float | Tensor = 1e-3, momentum: float = 0,
                 dampening: float = 0, weight_decay: float = 0, nesterov: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = {"lr": lr, "momentum": momentum, "dampening": dampening,
                    "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize,
                    "foreach": foreach, "differentiable": differentiable, "fused": fused}
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)
        if fused:
            self._need_device_dtype_check_for_fused = True
        check_fused(self, fused, foreach, differentiable)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)
            group.setdefault("differentiable", False)
            group.setdefault("fused", False)

    def step(self, closure=None):
        """One SGD step over every group; returns the closure's loss if given."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            if group["fused"]:
                self._fused_step(group)
                continue
            lr = float(group["lr"])
            momentum, dampening = group["momentum"], group["dampening"]
            weight_decay, nesterov = group["weight_decay"], group["nesterov"]
            queued = _cuda_update.Updates()
            # the kernels may stand for the ops when nothing watches them (checked once:
            # no user code runs in this loop) and the step need not be differentiable
            direct = not group.get("differentiable") and _cpu_update.unwatched()
            for p in params_with_grad(group):
                buf = self.state[p].get("momentum_buffer") if momentum != 0 else None
                if direct and (momentum == 0 or buf is not None):
                    g = p._grad
                    if p._storage.device.type == "cpu":
                        if _cpu_update.plain(p, g, buf, inside_op=True):
                            _cpu_update.sgd(p, g, buf, lr, momentum, dampening, weight_decay,
                                            nesterov, group["maximize"])
                            continue
                    elif _cuda_update.plain(p, g, buf, inside_op=True):
                        queued.sgd(p, g, buf, momentum)
                        continue
                grad = grad_of(p, group["maximize"])
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                if momentum != 0:
                    state = self.state[p]
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        buf = grad.clone().detach()
                        state["momentum_buffer"] = buf
                    else:
                        buf.mul_(momentum).add_(grad, alpha=1 - dampening)
                    grad = grad.add(buf, alpha=momentum) if nesterov else buf
                p.add_(grad, alpha=-lr)
            queued.launch_sgd(lr, momentum, dampening, weight_decay, nesterov,
                              group["maximize"])
        return loss

    def _fused_step(self, group: dict) -> None:
        """The fused update of one group, reading GradScaler's grad_scale/found_inf."""
        grad_scale, found_inf = _capturable.amp_tensors(self)
        for p in params_with_grad(group):
            if getattr(self, "_need_device_dtype_check_for_fused", True):
                device_dtype_check_for_fused(p)
                self._need_device_dtype_check_for_fused = False
            _capturable.sgd_fused_step(p, self.state[p], group, grad_scale, found_inf)
