"""Adagrad (spec OPTIM-130..): torch's update with lr decay, weight decay, maximize; the
state (``step``, ``sum``) is made for every parameter at construction, as torch does."""

from __future__ import annotations

from refimpl._tensor import Tensor
from refimpl.optim import _capturable
from refimpl.optim.adam import new_step
from refimpl.optim.optimizer import (
    Optimizer,
    check_fused,
    device_dtype_check_for_fused,
    grad_of,
    params_with_grad,
)


class Adagrad(Optimizer):
    """``p -= lr / (1 + (t-1) lr_decay) * g / (sqrt(sum g^2) + eps)``."""

    def __init__(self, params, lr: float | Tensor = 1e-2, lr_decay: float = 0,
                 weight_decay: float = 0, initial_accumulator_value: float = 0,
                 eps: float = 1e-10, foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError("Invalid initial_accumulator_value value: "
                             f"{initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        defaults = {"lr": lr, "lr_decay": lr_decay, "eps": eps, "weight_decay": weight_decay,
                    "initial_accumulator_value": initial_accumulator_value,
                    "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable, "fused": fused}
        super().__init__(params, defaults)
        check_fused(self, fused, foreach, differentiable)
        from refimpl.ops.factories import full_like

        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["step"] = new_step(p, bool(group["fused"]))
                state["sum"] = full_like(p, group["initial_accumulator_value"])

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            for key, default in (("foreach", None), ("maximize", False),
                                 ("differentiable", False), ("fused", None)):
                group.setdefault(key, default)

    def share_memory(self) -> None:
        """Process-local tensors: nothing to share."""

    def step(self, closure=None):
        """One Adagrad step over every group; returns the closure's loss if given."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            if group["fused"]:
                self._fused_step(group)
                continue
            lr, lr_decay = float(group["lr"]), group["lr_decay"]
            eps, weight_decay = group["eps"], group["weight_decay"]
            for p in params_with_grad(group):
                state = self.state[p]
                step_t = state["step"]
                step_t += 1
                step = step_t.item()
                grad = grad_of(p, group["maximize"])
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                clr = lr / (1 + (step - 1) * lr_decay)
                state_sum = state["sum"]
                state_sum.addcmul_(grad, grad, value=1)
                std = state_sum.sqrt().add_(eps)
                p.addcdiv_(grad, std, value=-clr)
        return loss

    def _fused_step(self, group: dict) -> None:
        """The fused update of one group, reading GradScaler's grad_scale/found_inf."""
        grad_scale, found_inf = _capturable.amp_tensors(self)
        for p in params_with_grad(group):
            device_dtype_check_for_fused(p)
            _capturable.adagrad_fused_step(p, self.state[p], group, grad_scale, found_inf)
