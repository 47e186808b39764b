"""Tensor hooks: register_hook, retain_grad, post-accumulate-grad hooks (spec:
AUTOGRAD-HOOKS-*).

Where a tensor hook lives decides when it runs:

* on a leaf, hooks stay on the tensor and its AccumulateGrad node reads them;
* on a non-leaf, the tensor's hook dict is attached to its *current* grad_fn (at the
  tensor's output_nr). After an in-place op the tensor gets a new grad_fn and a fresh
  dict: hooks registered before keep observing the gradient of the old version.
* ``retain_grad`` is a special hook that runs after the other tensor hooks and moves
  to the new grad_fn on in-place ops, so ``.grad`` always holds the gradient of the
  tensor's current value.
"""

from __future__ import annotations

import weakref

from refimpl.autograd.graph import RemovableHandle, _HookDict


def register_tensor_hook(tensor, hook) -> RemovableHandle:
    """``tensor.register_hook(hook)``."""
    if not tensor.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if tensor._bw_hooks is None:
        tensor._bw_hooks = _HookDict()
        fn = tensor.grad_fn
        if fn is not None:
            fn._register_hook_dict(tensor)
    handle = RemovableHandle(tensor._bw_hooks)
    tensor._bw_hooks[handle.id] = hook
    return handle


def register_post_accumulate_hook(tensor, hook) -> RemovableHandle:
    """``tensor.register_post_accumulate_grad_hook(hook)``."""
    if not tensor.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if tensor.grad_fn is not None:
        raise RuntimeError(
            "post accumulate grad hooks cannot be registered on non-leaf tensors"
        )
    if tensor._post_acc_hooks is None:
        tensor._post_acc_hooks = _HookDict()
    handle = RemovableHandle(tensor._post_acc_hooks)
    tensor._post_acc_hooks[handle.id] = hook
    return handle


class _RetainGradHook:
    """Accumulates the incoming gradient into ``tensor.grad`` (weakly holds the tensor)."""

    __slots__ = ("ref",)

    def __init__(self, tensor) -> None:
        self.ref = weakref.ref(tensor)

    def __call__(self, grad) -> None:
        tensor = self.ref()
        if tensor is None or grad is None:
            return
        if tensor._grad is None:
            tensor._grad = grad.clone()
        else:
            tensor._grad = tensor._grad + grad


def add_retains_grad_hook(tensor) -> None:
    """``tensor.retain_grad()`` on a non-leaf."""
    fn = tensor.grad_fn
    if fn._retains_grad_hooks is None:
        fn._retains_grad_hooks = {}
    fn._retains_grad_hooks[tensor._output_nr] = _RetainGradHook(tensor)
    tensor._retains_grad = True


def move_hooks_to_new_grad_fn(tensor, old_fn, new_fn, old_output_nr: int | None = None) -> None:
    """The tensor got a new grad_fn: start a fresh hook dict; move retain_grad along."""
    tensor._bw_hooks = None
    if tensor._retains_grad and old_fn is not None and old_fn._retains_grad_hooks:
        hooks = old_fn._retains_grad_hooks
        key = old_output_nr if old_output_nr is not None else next(
            (k for k, h in hooks.items() if h.ref() is tensor), None)
        hook = hooks.pop(key, None)
        if hook is not None:
            if new_fn._retains_grad_hooks is None:
                new_fn._retains_grad_hooks = {}
            new_fn._retains_grad_hooks[tensor._output_nr] = hook
