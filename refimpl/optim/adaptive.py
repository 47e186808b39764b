"""Adadelta, Adamax, NAdam, RAdam and Rprop (spec OPTIM-140): torch's single-tensor
updates and state, with its argument checks. ``foreach`` is accepted (same arithmetic)."""

from __future__ import annotations

from refimpl._tensor import Tensor
from refimpl.optim import _capturable
from refimpl.optim.adam import new_step, scalar_dtype
from refimpl.optim.optimizer import Optimizer, grad_of, params_with_grad


def _check_lr(lr) -> None:
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")


def _check_adam_like(lr, betas, eps, weight_decay) -> None:
    _check_lr(lr)
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


def _closure_loss(closure):
    if closure is None:
        return None
    from refimpl.autograd.grad_mode import enable_grad

    with enable_grad():
        return closure()


def _zeros_like(p: Tensor) -> Tensor:
    from refimpl.ops.factories import zeros_like

    return zeros_like(p)


class Adadelta(Optimizer):
    """``delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g``; ``p -= lr * delta``."""

    def __init__(self, params, lr: float | Tensor = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0, foreach: bool | None = None, *,
                 capturable: bool = False, maximize: bool = False,
                 differentiable: bool = False) -> None:
        _check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, {"lr": lr, "rho": rho, "eps": eps,
                                  "weight_decay": weight_decay, "maximize": maximize,
                                  "capturable": capturable, "foreach": foreach,
                                  "differentiable": differentiable})

    def step(self, closure=None):
        """One Adadelta step over every group; returns the closure's loss if given."""
        loss = _closure_loss(closure)
        _capturable.graph_capture_health_check(self)
        for group in self.param_groups:
            lr, rho, eps = float(group["lr"]), group["rho"], group["eps"]
            for p in params_with_grad(group):
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = new_step(p, bool(group["capturable"]))
                    state["square_avg"] = _zeros_like(p)
                    state["acc_delta"] = _zeros_like(p)
                if group["capturable"]:
                    _capturable.check_devices(p, state["step"])
                state["step"] += 1
                grad = grad_of(p, group["maximize"])
                if group["weight_decay"] != 0:
                    grad = grad.add(p, alpha=group["weight_decay"])
                square_avg, acc_delta = state["square_avg"], state["acc_delta"]
                square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
                std = square_avg.add(eps).sqrt_()
                delta = acc_delta.add(eps).sqrt_()
                delta.div_(std).mul_(grad)
                acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
                p.add_(delta, alpha=-lr)
        return loss


class Adamax(Optimizer):
    """Adam with the infinity norm: ``u = max(beta2 * u, |g| + eps)``."""

    def __init__(self, params, lr: float | Tensor = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False) -> None:
        _check_adam_like(lr, betas, eps, weight_decay)
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps,
                                  "weight_decay": weight_decay, "foreach": foreach,
                                  "maximize": maximize, "differentiable": differentiable,
                                  "capturable": capturable})

    def step(self, closure=None):
        """One Adamax step over every group; returns the closure's loss if given."""
        loss = _closure_loss(closure)
        _capturable.graph_capture_health_check(self)
        for group in self.param_groups:
            lr, (beta1, beta2), eps = float(group["lr"]), group["betas"], group["eps"]
            for p in params_with_grad(group):
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = new_step(p, bool(group["capturable"]))
                    state["exp_avg"] = _zeros_like(p)
                    state["exp_inf"] = _zeros_like(p)
                grad = grad_of(p, group["maximize"])
                step_t = state["step"]
                step_t += 1
                if group["weight_decay"] != 0:
                    grad = grad.add(p, alpha=group["weight_decay"])
                exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
                exp_avg.lerp_(grad, 1 - beta1)
                exp_inf.copy_(exp_inf.mul_(beta2).maximum(grad.abs().add_(eps)))
                if group["capturable"]:
                    _capturable.adamax_capturable_update(p, exp_avg, exp_inf, step_t, beta1,
                                                         group["lr"])
                    continue
                clr = lr / (1 - beta1 ** step_t.item())
                p.addcdiv_(exp_avg, exp_inf, value=-clr)
        return loss


class NAdam(Optimizer):
    """Adam with Nesterov momentum and a momentum-decay schedule (``mu_product``)."""

    def __init__(self, params, lr: float | Tensor = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        _check_adam_like(lr, betas, eps, weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps,
                                  "weight_decay": weight_decay,
                                  "momentum_decay": momentum_decay,
                                  "decoupled_weight_decay": decoupled_weight_decay,
                                  "maximize": maximize, "foreach": foreach,
                                  "capturable": capturable, "differentiable": differentiable})

    def step(self, closure=None):
        """One NAdam step over every group; returns the closure's loss if given."""
        from refimpl.ops.factories import tensor

        loss = _closure_loss(closure)
        _capturable.graph_capture_health_check(self)
        for group in self.param_groups:
            lr, (beta1, beta2), eps = float(group["lr"]), group["betas"], group["eps"]
            wd, decay = group["weight_decay"], group["momentum_decay"]
            for p in params_with_grad(group):
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = new_step(p, bool(group["capturable"]))
                    state["mu_product"] = tensor(
                        1.0, dtype=scalar_dtype(),
                        device=p.device if group["capturable"] else None)
                    state["exp_avg"] = _zeros_like(p)
                    state["exp_avg_sq"] = _zeros_like(p)
                grad = grad_of(p, group["maximize"])
                step_t, mu_product = state["step"], state["mu_product"]
                step_t += 1
                if group["capturable"]:
                    if wd != 0 and not group["decoupled_weight_decay"]:
                        grad = grad.add(p, alpha=wd)
                    _capturable.nadam_capturable_update(p, grad, state, group)
                    continue
                step = step_t.item()
                bias_correction2 = 1 - beta2 ** step
                if wd != 0:
                    if group["decoupled_weight_decay"]:
                        p.mul_(1 - lr * wd)
                    else:
                        grad = grad.add(p, alpha=wd)
                mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * decay)))
                mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * decay)))
                mu_product *= mu
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                denom = exp_avg_sq.div(bias_correction2).sqrt()
                product = mu_product.item()
                denom.add_(eps)
                p.addcdiv_(grad, denom, value=-lr * (1.0 - mu) / (1.0 - product))
                p.addcdiv_(exp_avg, denom, value=(-lr * mu_next) / (1.0 - product * mu_next))
        return loss


def _radam_decay(p: Tensor, grad: Tensor, group: dict) -> Tensor:
    """RAdam's weight decay: decoupled (on the parameter) or L2 (into the gradient)."""
    wd = group["weight_decay"]
    if wd == 0:
        return grad
    if group["decoupled_weight_decay"]:
        p.mul_(1 - group["lr"] * wd)
        return grad
    return grad.add(p, alpha=wd)


class RAdam(Optimizer):
    """Rectified Adam: plain momentum SGD until the variance estimate is tractable."""

    def __init__(self, params, lr: float | Tensor = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False) -> None:
        _check_adam_like(lr, betas, eps, weight_decay)
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps,
                                  "weight_decay": weight_decay, "maximize": maximize,
                                  "foreach": foreach, "capturable": capturable,
                                  "decoupled_weight_decay": decoupled_weight_decay,
                                  "differentiable": differentiable})

    def step(self, closure=None):
        """One RAdam step over every group; returns the closure's loss if given."""
        loss = _closure_loss(closure)
        _capturable.graph_capture_health_check(self)
        for group in self.param_groups:
            lr, (beta1, beta2), eps = float(group["lr"]), group["betas"], group["eps"]
            wd = group["weight_decay"]
            for p in params_with_grad(group):
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = new_step(p, bool(group["capturable"]))
                    state["exp_avg"] = _zeros_like(p)
                    state["exp_avg_sq"] = _zeros_like(p)
                grad = grad_of(p, group["maximize"])
                step_t = state["step"]
                step_t += 1
                if group["capturable"]:
                    grad = _radam_decay(p, grad, group)
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    exp_avg.lerp_(grad, 1 - beta1)
                    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                    _capturable.radam_capturable_update(p, exp_avg, exp_avg_sq, step_t, group)
                    continue
                step = step_t.item()
                if wd != 0:
                    if group["decoupled_weight_decay"]:
                        p.mul_(1 - lr * wd)
                    else:
                        grad = grad.add(p, alpha=wd)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                bias_correction1 = 1 - beta1 ** step
                bias_correction2 = 1 - beta2 ** step
                corrected = exp_avg / bias_correction1
                rho_inf = 2 / (1 - beta2) - 1
                rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
                if rho_t > 5.0:
                    rect = ((rho_t - 4) * (rho_t - 2) * rho_inf
                            / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                    adaptive = (bias_correction2 ** 0.5) / exp_avg_sq.sqrt().add_(eps)
                    p.add_(corrected * lr * adaptive * rect, alpha=-1.0)
                else:
                    p.add_(corrected * lr, alpha=-1.0)
        return loss


class Rprop(Optimizer):
    """Resilient backpropagation: per-element step sizes grown or shrunk by the sign of
    consecutive gradients."""

    def __init__(self, params, lr: float | Tensor = 1e-2, etas=(0.5, 1.2),
                 step_sizes=(1e-6, 50), *, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False) -> None:
        _check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        super().__init__(params, {"lr": lr, "etas": etas, "step_sizes": step_sizes,
                                  "foreach": foreach, "maximize": maximize,
                                  "differentiable": differentiable, "capturable": capturable})

    def step(self, closure=None):
        """One Rprop step over every group; returns the closure's loss if given."""
        from refimpl.ops.factories import full_like

        loss = _closure_loss(closure)
        _capturable.graph_capture_health_check(self)
        for group in self.param_groups:
            etaminus, etaplus = group["etas"]
            size_min, size_max = group["step_sizes"]
            for p in params_with_grad(group):
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = new_step(p, bool(group["capturable"]))
                    state["prev"] = _zeros_like(p)
                    state["step_size"] = full_like(p.grad, float(group["lr"]))
                if group["capturable"]:
                    _capturable.check_devices(p, state["step"])
                state["step"] += 1
                grad = grad_of(p, group["maximize"])
                prev, step_size = state["prev"], state["step_size"]
                sign = grad.mul(prev).sign()
                factor = (sign.masked_fill(sign.gt(0), etaplus).masked_fill(sign.lt(0), etaminus)
                          .masked_fill(sign.eq(0), 1.0))
                step_size.mul_(factor).clamp_(size_min, size_max)
                grad = grad.where(factor != etaminus, grad.new_zeros(()))
                p.addcmul_(grad.sign(), step_size, value=-1)
                prev.copy_(grad)
        return loss
