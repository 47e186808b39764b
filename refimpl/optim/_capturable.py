"""Capturable and fused optimizer steps (spec OPTIM-150..): the updates that a CUDA graph
can capture.

``capturable=True``: the step counter (and any other per-parameter scalar state) lives
on the parameter's device as a 0-d tensor, and the step reads it there: bias
corrections, step sizes and schedules are device tensors, never Python numbers taken
with ``.item()``, so a step launches kernels only and can be captured and replayed
(each replay advances the counters on the device).

``fused=True`` (Adam, AdamW, SGD, Adagrad): torch's fused kernels' semantics. They take the
step-supporting-AMP protocol of ``GradScaler``: when the optimizer carries
``grad_scale``/``found_inf`` tensors, each gradient is divided by ``grad_scale`` in place,
and when ``found_inf`` is nonzero nothing changes (parameters, gradients, state and the
step counter stay as they were), decided on the device without a host sync.

Each optimizer's ``step`` calls one function here per parameter when its group is
capturable or fused; the plain single-tensor updates stay in the optimizer's own module.
"""

from __future__ import annotations

import warnings

from refimpl._tensor import Tensor

CAPTURABLE_DEVICES = ["cuda", "xpu", "hpu", "privateuseone", "xla"]


def graph_capture_health_check(optimizer) -> None:
    """torch's check at the start of ``step``: capturing a step needs every group
    capturable; a capturable optimizer stepping outside a capture warns once."""
    import refimpl

    if not refimpl.cuda.is_available():
        return
    capturing = refimpl.cuda.is_current_stream_capturing()
    all_capturable = all(group["capturable"] for group in optimizer.param_groups)
    if capturing and not all_capturable:
        raise RuntimeError("Attempting CUDA graph capture of step() for an instance of "
                           + type(optimizer).__name__ + " but param_groups' capturable is "
                           "False.")
    if (all_capturable and not capturing
            and not getattr(optimizer, "_warned_capturable_if_run_uncaptured", False)):
        warnings.warn(
            "This instance was constructed with capturable=True or some of all the "
            "param_groups came with capturable=True, but step() is running without CUDA "
            "graph capture. If you never intend to graph-capture this instance, "
            "capturable=True can impair performance, and you should set capturable=False.",
            stacklevel=3)
        optimizer._warned_capturable_if_run_uncaptured = True


def check_devices(p: Tensor, *scalars: Tensor, what: str = "params and state_steps") -> None:
    """Capturable state must share the parameter's device type, one that graphs exist on."""
    kind = p.device.type
    if kind not in CAPTURABLE_DEVICES or any(s.device.type != kind for s in scalars):
        raise AssertionError(f"If capturable=True, {what} must be on supported devices: "
                             f"{CAPTURABLE_DEVICES}.")


def amp_tensors(optimizer) -> tuple:
    """``(grad_scale, found_inf)`` that GradScaler (or the user) set on the optimizer."""
    return getattr(optimizer, "grad_scale", None), getattr(optimizer, "found_inf", None)


def reject_amp_tensors(optimizer) -> None:
    """Only fused steps read grad_scale/found_inf: torch's assertion for the others."""
    grad_scale, found_inf = amp_tensors(optimizer)
    if grad_scale is not None or found_inf is not None:
        raise AssertionError("Expected grad_scale and found_inf to be None")


def _on(value: Tensor | None, p: Tensor) -> Tensor | None:
    return None if value is None else value.to(p.device, non_blocking=True)


def _write(dst: Tensor, new: Tensor, keep: Tensor | None) -> None:
    """``dst = new``, or where ``keep`` is false (an inf was found) ``dst`` unchanged."""
    dst.copy_(new if keep is None else new.where(keep, dst))


def _unscaled_grad(p: Tensor, grad_scale: Tensor | None, keep: Tensor | None) -> Tensor:
    """The fused kernels' first stage: ``p.grad /= grad_scale`` in place (skipped on inf)."""
    grad = p.grad
    if grad_scale is not None:
        _write(grad, grad / grad_scale, keep)
    return grad


def adam_tensor_step(p: Tensor, state: dict, group: dict, grad_scale: Tensor | None = None,
                     found_inf: Tensor | None = None) -> None:
    """Adam/AdamW on one parameter with the step counter on the device (capturable and
    fused); ``grad_scale``/``found_inf`` as the fused kernel reads them."""
    beta1, beta2 = group["betas"]
    lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
    step_t = state["step"]
    if group["capturable"]:
        check_devices(p, step_t)
    grad_scale, found_inf = _on(grad_scale, p), _on(found_inf, p)
    keep = None if found_inf is None else found_inf.eq(0)
    grad = _unscaled_grad(p, grad_scale, keep)
    if group["maximize"]:
        grad = -grad
    step_t += 1 if keep is None else keep.to(step_t.dtype)
    param = p
    if wd != 0:
        if group["decoupled_weight_decay"]:
            param = p * (1 - lr * wd)
        else:
            grad = grad.add(p, alpha=wd)
    exp_avg = state["exp_avg"].lerp(grad, 1 - beta1)
    exp_avg_sq = state["exp_avg_sq"].mul(beta2).addcmul_(grad, grad, value=1 - beta2)
    second = exp_avg_sq
    if group["amsgrad"]:
        second = state["max_exp_avg_sq"].maximum(exp_avg_sq)
        _write(state["max_exp_avg_sq"], second, keep)
    # the fused kernel forms the bias corrections in double precision; capturable's are
    # float32 tensor arithmetic on the counter, as torch's capturable path
    step = step_t.double() if group["fused"] else step_t
    step_size = lr / (1 - beta1 ** step)
    bias_correction2_sqrt = (1 - beta2 ** step).sqrt()
    denom = (second.sqrt() / bias_correction2_sqrt).add_(eps)
    _write(p, param - step_size * exp_avg / denom, keep)
    _write(state["exp_avg"], exp_avg, keep)
    _write(state["exp_avg_sq"], exp_avg_sq, keep)


def sgd_fused_step(p: Tensor, state: dict, group: dict, grad_scale: Tensor | None,
                   found_inf: Tensor | None) -> None:
    """SGD's fused kernel on one parameter: unscale, skip on inf, momentum (the first
    step's buffer is the gradient), Nesterov, weight decay, maximize."""
    from refimpl.ops.factories import zeros_like

    grad_scale, found_inf = _on(grad_scale, p), _on(found_inf, p)
    keep = None if found_inf is None else found_inf.eq(0)
    grad = _unscaled_grad(p, grad_scale, keep)
    if group["maximize"]:
        grad = -grad
    if group["weight_decay"] != 0:
        grad = grad.add(p, alpha=group["weight_decay"])
    momentum = group["momentum"]
    if momentum != 0:
        buf = state.get("momentum_buffer")
        if buf is None:
            buf = state["momentum_buffer"] = zeros_like(p)
            new_buf = grad
        else:
            new_buf = buf.mul(momentum).add_(grad, alpha=1 - group["dampening"])
        _write(buf, new_buf, keep)
        grad = grad.add(new_buf, alpha=momentum) if group["nesterov"] else new_buf
    _write(p, p - group["lr"] * grad, keep)


def adagrad_fused_step(p: Tensor, state: dict, group: dict, grad_scale: Tensor | None,
                       found_inf: Tensor | None) -> None:
    """Adagrad's fused kernel on one parameter: unscale, skip on inf, the decayed rate
    from the device counter, the squared-gradient sum."""
    grad_scale, found_inf = _on(grad_scale, p), _on(found_inf, p)
    keep = None if found_inf is None else found_inf.eq(0)
    grad = _unscaled_grad(p, grad_scale, keep)
    if group["maximize"]:
        grad = -grad
    if group["weight_decay"] != 0:
        grad = grad.add(p, alpha=group["weight_decay"])
    step_t = state["step"]
    step_t += 1 if keep is None else keep.to(step_t.dtype)
    clr = group["lr"] / (1 + (step_t.double() - 1) * group["lr_decay"])
    state_sum = state["sum"].addcmul(grad, grad, value=1)
    _write(p, p - clr * grad / state_sum.sqrt().add_(group["eps"]), keep)
    _write(state["sum"], state_sum, keep)


def adamax_capturable_update(p: Tensor, exp_avg: Tensor, exp_inf: Tensor, step_t: Tensor,
                             beta1: float, lr) -> None:
    """Adamax's parameter update with the bias correction from the device counter."""
    check_devices(p, step_t)
    neg_bias_correction = (beta1 ** step_t - 1).div_(lr)
    p.addcdiv_(exp_avg, exp_inf * neg_bias_correction)


def nadam_capturable_update(p: Tensor, grad: Tensor, state: dict, group: dict) -> None:
    """NAdam's moments, momentum schedule and update with ``step`` and ``mu_product`` on
    the device (``grad`` already has L2 weight decay; decoupled decay is applied here)."""
    beta1, beta2 = group["betas"]
    lr, eps, wd, decay = group["lr"], group["eps"], group["weight_decay"], \
        group["momentum_decay"]
    step_t, mu_product = state["step"], state["mu_product"]
    check_devices(p, step_t, mu_product, what="params, mu_products and state_steps")
    if wd != 0 and group["decoupled_weight_decay"]:
        p.mul_(1 - lr * wd)
    mu = beta1 * (1.0 - 0.5 * 0.96 ** (step_t * decay))
    mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step_t + 1) * decay))
    mu_product *= mu
    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    denom = exp_avg_sq.div(1 - beta2 ** step_t).sqrt().add_(eps)
    p.addcdiv_(grad * (-lr * (1.0 - mu) / (1.0 - mu_product)), denom)
    p.addcdiv_(exp_avg * (-lr * mu_next / (1.0 - mu_product * mu_next)), denom)


def radam_capturable_update(p: Tensor, exp_avg: Tensor, exp_avg_sq: Tensor, step_t: Tensor,
                            group: dict) -> None:
    """RAdam's rectified update chosen on the device (``rho_t > 5``) from the counter."""
    from refimpl import where

    check_devices(p, step_t)
    beta1, beta2 = group["betas"]
    lr, eps = group["lr"], group["eps"]
    bias_correction1 = 1 - beta1 ** step_t
    bias_correction2 = 1 - beta2 ** step_t
    rho_inf = 2 / (1 - beta2) - 1
    rho_t = rho_inf - 2 * step_t * (beta2 ** step_t) / bias_correction2
    rect = ((rho_t - 4) * (rho_t - 2) * rho_inf
            / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
    adaptive = bias_correction2 ** 0.5 / exp_avg_sq.sqrt().add_(eps)
    update = where(rho_t > 5.0, rect * adaptive, 1.0)
    p.add_(exp_avg / bias_correction1 * lr * update, alpha=-1.0)
