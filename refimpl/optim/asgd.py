"""ASGD, averaged stochastic gradient descent (spec OPTIM-141): torch's single-tensor
update, its state (``step``, ``eta``, ``mu`` as 0-d tensors on the parameter's device,
the running average ``ax``) and its capturable form."""

from __future__ import annotations

from refimpl._tensor import Tensor
from refimpl.optim import _capturable
from refimpl.optim.adam import scalar_dtype
from refimpl.optim.optimizer import Optimizer, grad_of, params_with_grad


class ASGD(Optimizer):
    """``p = p * (1 - lambd * eta) - eta * g``; ``ax`` averages ``p`` once ``step > t0``;
    ``eta = lr / (1 + lambd * lr * step) ** alpha``."""

    def __init__(self, params, lr: float | Tensor = 1e-2, lambd: float = 1e-4,
                 alpha: float = 0.75, t0: float = 1e6, weight_decay: float = 0,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, {"lr": lr, "lambd": lambd, "alpha": alpha, "t0": t0,
                                  "weight_decay": weight_decay, "foreach": foreach,
                                  "maximize": maximize, "differentiable": differentiable,
                                  "capturable": capturable})

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            for key, default in (("foreach", None), ("maximize", False),
                                 ("differentiable", False), ("capturable", False)):
                group.setdefault(key, default)

    def _state_of(self, p: Tensor, group: dict) -> dict:
        from refimpl.ops.factories import ones, tensor, zeros, zeros_like

        state = self.state[p]
        if len(state) == 0:
            state["step"] = zeros((), device=p.device, dtype=scalar_dtype())
            state["eta"] = tensor(float(group["lr"]), device=p.device, dtype=scalar_dtype())
            state["mu"] = ones((), device=p.device, dtype=scalar_dtype())
            state["ax"] = zeros_like(p)
        return state

    def step(self, closure=None):
        """One ASGD step over every group; returns the closure's loss if given."""
        loss = self._closure_loss(closure)
        _capturable.graph_capture_health_check(self)
        for group in self.param_groups:
            lambd, lr, alpha, t0 = group["lambd"], group["lr"], group["alpha"], group["t0"]
            capturable = group["capturable"]
            for p in params_with_grad(group):
                state = self._state_of(p, group)
                step_t, eta, mu, ax = state["step"], state["eta"], state["mu"], state["ax"]
                if capturable:
                    _capturable.check_devices(p, mu, eta, step_t,
                                              what="params, mus, etas, and state_steps")
                grad = grad_of(p, group["maximize"])
                step_t += 1
                if group["weight_decay"] != 0:
                    grad = grad.add(p, alpha=group["weight_decay"])
                if capturable:
                    _asgd_capturable(p, grad, state, lambd, lr, alpha, t0)
                    continue
                eta_value = eta.item()
                p.mul_(1 - lambd * eta_value)
                p.add_(grad, alpha=-eta_value)
                if mu.item() != 1:
                    ax.add_(p.sub(ax).mul_(mu))
                else:
                    ax.copy_(p)
                step = step_t.item()
                eta.fill_(lr / ((1 + lambd * lr * step) ** alpha))
                mu.fill_(1 / max(1, step - t0))
        return loss


def _asgd_capturable(p: Tensor, grad: Tensor, state: dict, lambd: float, lr, alpha: float,
                     t0: float) -> None:
    """ASGD's update with ``eta``, ``mu`` and the schedule read and written on the device."""
    from refimpl.ops.factories import ones_like

    step_t, eta, mu, ax = state["step"], state["eta"], state["mu"], state["ax"]
    p.mul_(1 - lambd * eta)
    p.addcmul_(grad, eta, value=-1)
    ax.add_(p.sub(ax).mul_(mu))
    eta.copy_(lr / ((1 + lambd * lr * step_t) ** alpha))
    mu.copy_(1 / (step_t - t0).maximum(ones_like(step_t)))
