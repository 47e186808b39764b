"""Adam and AdamW (spec OPTIM-110..): torch's single-tensor update (bias-corrected
moments, amsgrad, L2 or decoupled weight decay, maximize). ``foreach``/``fused`` are
torch's other implementations of the same arithmetic: accepted, same results."""

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


def scalar_dtype():
    """float32 under the default dtype float32, else float64 (the ``step`` counters')."""
    from refimpl import _dtype as D

    return D.float64 if D.get_default_dtype() is D.float64 else D.float32


def new_step(p: Tensor, on_device: bool) -> Tensor:
    """A 0-d step counter: on the parameter's device when capturable/fused, else CPU."""
    from refimpl.ops.factories import tensor

    if on_device:
        from refimpl import _dtype as D

        return tensor(0.0, dtype=D.float32, device=p.device)
    return tensor(0.0, dtype=scalar_dtype())


class Adam(Optimizer):
    """Adam: ``p -= lr * m_hat / (sqrt(v_hat) + eps)``."""

    def __init__(self, params, lr: float | Tensor = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None,
                 decoupled_weight_decay: bool = False) -> None:
        if isinstance(lr, Tensor):
            if foreach and not capturable:
                raise ValueError("lr as a Tensor is not supported for capturable=False and "
                                 "foreach=True")
            if lr.numel() != 1:
                raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not ((isinstance(betas[0], float) and isinstance(betas[1], float))
                or (isinstance(betas[0], Tensor) and isinstance(betas[1], Tensor))):
            raise ValueError("betas must be either both floats or both Tensors")  # noqa: TRY004
        betas = tuple(float(b) if isinstance(b, Tensor) else b for b in betas)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "amsgrad": amsgrad, "maximize": maximize, "foreach": foreach,
                    "capturable": capturable, "differentiable": differentiable, "fused": fused,
                    "decoupled_weight_decay": decoupled_weight_decay}
        super().__init__(params, defaults)
        check_fused(self, fused, foreach, differentiable)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            for key, default in (("amsgrad", False), ("maximize", False), ("foreach", None),
                                 ("capturable", False), ("differentiable", False),
                                 ("decoupled_weight_decay", False), ("fused", None)):
                group.setdefault(key, default)

    def _state_of(self, p: Tensor, group: dict) -> dict:
        state = self.state[p]
        if len(state) == 0:
            from refimpl.ops.factories import zeros_like

            state["step"] = new_step(p, bool(group["capturable"] or group["fused"]))
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = zeros_like(p)
        return state

    def step(self, closure=None):
        """One Adam step over every group; returns the closure's loss if given."""
        loss = self._closure_loss(closure)
        _capturable.graph_capture_health_check(self)
        for group in self.param_groups:
            if group["capturable"] or group["fused"]:
                self._tensor_step(group)
                continue
            lr = float(group["lr"])
            beta1, beta2 = group["betas"]
            eps, weight_decay = group["eps"], group["weight_decay"]
            queued = _cuda_update.Updates()
            # the kernels may stand for the ops when nothing watches them (checked once:
            # no user code runs in this loop) and the step need not be differentiable
            direct = not group.get("differentiable") and _cpu_update.unwatched()
            for p in params_with_grad(group):
                state = self._state_of(p, group)
                if direct and state["step"]._storage.device.type == "cpu":
                    g = p._grad
                    if p._storage.device.type == "cpu":
                        if _cpu_update.plain(p, g, state["exp_avg"], state["exp_avg_sq"],
                                             state.get("max_exp_avg_sq"), inside_op=True):
                            _cpu_update.adam(p, g, state, lr, beta1, beta2, eps, weight_decay,
                                             group["decoupled_weight_decay"], group["amsgrad"],
                                             group["maximize"])
                            continue
                    elif (not group["amsgrad"] or "max_exp_avg_sq" in state) and \
                            _cuda_update.plain(p, g, state["exp_avg"], state["exp_avg_sq"],
                                               state.get("max_exp_avg_sq") if group["amsgrad"]
                                               else None, inside_op=True):
                        queued.adam(p, g, state, lr, beta1, beta2, weight_decay,
                                    group["decoupled_weight_decay"], group["amsgrad"])
                        continue
                grad = grad_of(p, group["maximize"])
                step_t = state["step"]
                step_t += 1
                if weight_decay != 0:
                    if group["decoupled_weight_decay"]:
                        p.mul_(1 - lr * weight_decay)
                    else:
                        grad = grad.add(p, alpha=weight_decay)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                step = step_t.item()
                step_size = lr / (1 - beta1 ** step)
                bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
                if group["amsgrad"]:
                    max_sq = state["max_exp_avg_sq"]
                    max_sq.copy_(max_sq.maximum(exp_avg_sq))
                    denom = (max_sq.sqrt() / bias_correction2_sqrt).add_(eps)
                else:
                    denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
                p.addcdiv_(exp_avg, denom, value=-step_size)
            queued.launch_adam(lr, beta1, beta2, eps, weight_decay,
                               group["decoupled_weight_decay"], group["amsgrad"],
                               group["maximize"])
        return loss

    def _tensor_step(self, group: dict) -> None:
        """The capturable/fused update of one group (``refimpl.optim._capturable``)."""
        if group["fused"]:
            grad_scale, found_inf = _capturable.amp_tensors(self)
        else:
            _capturable.reject_amp_tensors(self)
            grad_scale = found_inf = None
        for p in params_with_grad(group):
            if group["fused"]:
                device_dtype_check_for_fused(p)
            _capturable.adam_tensor_step(p, self._state_of(p, group), group, grad_scale,
                                         found_inf)


class AdamW(Adam):
    """Adam with decoupled weight decay (default 1e-2): ``p *= 1 - lr * weight_decay``."""

    def __init__(self, params, lr: float | Tensor = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
