"""RMSprop (spec OPTIM-120..): torch's single-tensor update (centered, momentum, weight
decay, maximize)."""

from __future__ import annotations

from refimpl._tensor import Tensor
from refimpl.optim import _capturable
from refimpl.optim.adam import new_step
from refimpl.optim.optimizer import Optimizer, grad_of, params_with_grad


class RMSprop(Optimizer):
    """``p -= lr * g / (sqrt(E[g^2] (- E[g]^2 when centered)) + eps)``."""

    def __init__(self, params, lr: float | Tensor = 1e-2, alpha: float = 0.99,
                 eps: float = 1e-8, weight_decay: float = 0, momentum: float = 0,
                 centered: bool = False, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        defaults = {"lr": lr, "momentum": momentum, "alpha": alpha, "eps": eps,
                    "centered": centered, "weight_decay": weight_decay,
                    "capturable": capturable, "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            for key, default in (("momentum", 0), ("centered", False), ("foreach", None),
                                 ("maximize", False), ("differentiable", False),
                                 ("capturable", False)):
                group.setdefault(key, default)

    def step(self, closure=None):
        """One RMSprop step over every group; returns the closure's loss if given."""
        from refimpl.ops.factories import zeros_like

        loss = self._closure_loss(closure)
        _capturable.graph_capture_health_check(self)
        for group in self.param_groups:
            lr, alpha, eps = float(group["lr"]), group["alpha"], group["eps"]
            momentum, weight_decay = group["momentum"], group["weight_decay"]
            for p in params_with_grad(group):
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = new_step(p, bool(group["capturable"]))
                    state["square_avg"] = zeros_like(p)
                    if momentum > 0:
                        state["momentum_buffer"] = zeros_like(p)
                    if group["centered"]:
                        state["grad_avg"] = zeros_like(p)
                grad = grad_of(p, group["maximize"])
                if group["capturable"]:
                    _capturable.check_devices(p, state["step"])
                state["step"] += 1
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                square_avg = state["square_avg"]
                square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
                if group["centered"]:
                    grad_avg = state["grad_avg"]
                    grad_avg.lerp_(grad, 1 - alpha)
                    avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
                else:
                    avg = square_avg.sqrt()
                avg = avg.add(eps) if group["differentiable"] else avg.add_(eps)
                if momentum > 0:
                    buf = state["momentum_buffer"]
                    buf.mul_(momentum).addcdiv_(grad, avg)
                    p.add_(buf, alpha=-lr)
                else:
                    p.addcdiv_(grad, avg, value=-lr)
        return loss
