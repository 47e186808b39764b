"""Module hooks' machinery: the global hook registries and full backward hooks (NN-040..).

Full backward hooks wrap a module's tensor inputs and outputs in an identity autograd
Function (``BackwardHookFunction``). The node of the outputs' wrapper sees the gradients
w.r.t. the outputs first (backward pre-hooks may replace them); the node of the inputs'
wrapper then sees the gradients w.r.t. the inputs and calls the user's hooks with both.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from typing import Any

from refimpl._tensor import Tensor
from refimpl.autograd.function import Function
from refimpl.autograd.graph import RemovableHandle

# global hooks (nn.modules.module.register_module_*_hook), run before a module's own
_global_backward_pre_hooks: dict = OrderedDict()
_global_backward_hooks: dict = OrderedDict()
_global_is_full_backward_hook: bool | None = None
_global_forward_pre_hooks: dict = OrderedDict()
_global_forward_hooks: dict = OrderedDict()
_global_forward_hooks_always_called: dict = OrderedDict()
_global_forward_hooks_with_kwargs: dict = OrderedDict()
_global_buffer_registration_hooks: dict = OrderedDict()
_global_module_registration_hooks: dict = OrderedDict()
_global_parameter_registration_hooks: dict = OrderedDict()


def register_module_forward_pre_hook(hook) -> RemovableHandle:
    """A forward pre-hook ``hook(module, args)`` run for every module."""
    handle = RemovableHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[handle.id] = hook
    return handle


def register_module_forward_hook(hook, *, with_kwargs: bool = False,
                                 always_call: bool = False) -> RemovableHandle:
    """A forward hook ``hook(module, args, output)`` run for every module."""
    handle = RemovableHandle(_global_forward_hooks,
                             extra_dict=_global_forward_hooks_always_called)
    _global_forward_hooks[handle.id] = hook
    if with_kwargs:
        _global_forward_hooks_with_kwargs[handle.id] = True
    if always_call:
        _global_forward_hooks_always_called[handle.id] = True
    return handle


def register_module_full_backward_pre_hook(hook) -> RemovableHandle:
    """A backward pre-hook ``hook(module, grad_output)`` for every module."""
    handle = RemovableHandle(_global_backward_pre_hooks)
    _global_backward_pre_hooks[handle.id] = hook
    return handle


def _register_global_backward_hook(hook, full: bool) -> RemovableHandle:
    """A global backward hook, full or not: one kind only, as torch allows."""
    global _global_is_full_backward_hook
    if _global_is_full_backward_hook is (not full):
        raise RuntimeError("Cannot use both regular backward hooks and full backward hooks as "
                           "a global Module hook. Please use only one of them.")
    _global_is_full_backward_hook = full
    handle = RemovableHandle(_global_backward_hooks)
    _global_backward_hooks[handle.id] = hook
    return handle


def register_module_full_backward_hook(hook) -> RemovableHandle:
    """A full backward hook ``hook(module, grad_input, grad_output)`` for every module."""
    return _register_global_backward_hook(hook, True)


def register_module_backward_hook(hook) -> RemovableHandle:
    """The deprecated non-full global backward hook (on the output's grad_fn)."""
    return _register_global_backward_hook(hook, False)


def register_module_buffer_registration_hook(hook) -> RemovableHandle:
    """``hook(module, name, buffer)`` on every ``register_buffer``; may replace the buffer."""
    handle = RemovableHandle(_global_buffer_registration_hooks)
    _global_buffer_registration_hooks[handle.id] = hook
    return handle


def register_module_module_registration_hook(hook) -> RemovableHandle:
    """``hook(module, name, submodule)`` on every submodule registration."""
    handle = RemovableHandle(_global_module_registration_hooks)
    _global_module_registration_hooks[handle.id] = hook
    return handle


def register_module_parameter_registration_hook(hook) -> RemovableHandle:
    """``hook(module, name, param)`` on every ``register_parameter``."""
    handle = RemovableHandle(_global_parameter_registration_hooks)
    _global_parameter_registration_hooks[handle.id] = hook
    return handle


class BackwardHookFunction(Function):
    """Identity on its tensor arguments: its backward node is where the hooks attach."""

    @staticmethod
    def forward(ctx, *args):
        ctx.mark_non_differentiable(*[a for a in args if not a.requires_grad])
        return args

    @staticmethod
    def backward(ctx, *grads):
        return grads


def _pack_with_none(indices, values, size: int) -> tuple:
    out: list[Any] = [None] * size
    for i, v in zip(indices, values, strict=False):
        out[i] = v
    return tuple(out)


class BackwardHook:
    """Calls a module's full backward (pre-)hooks with the gradients w.r.t. its inputs and
    outputs, set up around one forward call."""

    def __init__(self, module, user_hooks: list, user_pre_hooks: list) -> None:
        self.module = module
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self.grad_outputs: tuple | None = None
        self.n_outputs = -1
        self.output_tensors_index: list | None = None
        self.n_inputs = -1
        self.input_tensors_index: list | None = None

    def _wrap(self, on_node, args: tuple):
        """Route the tensors of ``args`` through BackwardHookFunction, attach ``on_node``
        to its node; returns (new args, indices of the tensors) or (args, None)."""
        from refimpl.autograd.grad_mode import is_grad_enabled

        index = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        tensors = [args[i] for i in index]
        if not (any(t.requires_grad for t in tensors) and is_grad_enabled()):
            return args, None
        new = BackwardHookFunction.apply(*tensors)
        if len(new) == 0:
            raise RuntimeError("Cannot set Module backward hook for a Module with no input "
                               "Tensors.")
        nodes = [t.grad_fn for t in new if t.grad_fn is not None
                 and t.grad_fn.name() == "BackwardHookFunctionBackward"]
        if not nodes:
            raise RuntimeError("Error while setting up backward hooks. Please open an issue "
                               "with a code sample to reproduce this.")
        on_node(nodes[0])
        out = list(args)
        for i, v in zip(index, new, strict=True):
            out[i] = v
        return (tuple(out) if type(args) is tuple else type(args)(*out)), index

    def setup_input_hook(self, args: tuple) -> tuple:
        """Wrap the inputs: their node calls the user's hooks with grad_input."""
        def on_node(node) -> None:
            def hook(grad_input, _grad_output):
                if self.grad_outputs is None:
                    # the gradient reached the inputs without passing through the outputs
                    return None
                res = _pack_with_none(self.input_tensors_index, grad_input, self.n_inputs)
                for user_hook in self.user_hooks:
                    out = user_hook(self.module, res, self.grad_outputs)
                    if out is None:
                        continue
                    if len(out) != len(res):
                        raise RuntimeError("Backward hook returned an invalid number of "
                                           f"grad_input, got {len(out)}, but expected "
                                           f"{len(res)}")
                    res = out
                self.grad_outputs = None
                return tuple(res[i] for i in self.input_tensors_index)

            node.register_hook(hook)

        res, index = self._wrap(on_node, args)
        self.n_inputs = len(args)
        self.input_tensors_index = index
        return res

    def setup_output_hook(self, args):
        """Wrap the outputs: their node records grad_output (after the pre-hooks)."""
        def on_node(node) -> None:
            def hook(_grad_input, grad_output):
                self.grad_outputs = _pack_with_none(self.output_tensors_index, grad_output,
                                                    self.n_outputs)
                for pre_hook in self.user_pre_hooks:
                    new = pre_hook(self.module, self.grad_outputs)
                    if new is None:
                        continue
                    if len(new) != len(self.grad_outputs):
                        raise RuntimeError("Backward pre hook returned an invalid number of "
                                           f"grad_output, got {len(new)}, but expected "
                                           f"{len(self.grad_outputs)}")
                    self.grad_outputs = new
                local = self.grad_outputs
                if self.input_tensors_index is None:
                    # no input requires grad: the user's hooks run here, with no grad_input
                    warnings.warn("Full backward hook is firing when gradients are computed "
                                  "with respect to module outputs since no inputs require "
                                  "gradients. See https://docs.pytorch.org/docs/main/generated/"
                                  "torch.nn.Module.html#torch.nn.Module.register_full_backward_"
                                  "hook for more details.", stacklevel=5)
                    grad_inputs = _pack_with_none([], [], self.n_inputs)
                    for user_hook in self.user_hooks:
                        res = user_hook(self.module, grad_inputs, self.grad_outputs)
                        if res is not None and not (isinstance(res, tuple)
                                                    and all(r is None for r in res)):
                            raise RuntimeError(
                                "Backward hook for Modules where no input requires gradient "
                                "should always return None or None for all gradients.")
                    self.grad_outputs = None
                return tuple(local[i] for i in self.output_tensors_index)

            node.register_hook(hook)

        is_tuple = isinstance(args, tuple)
        if not is_tuple:
            args = (args,)
        res, index = self._wrap(on_node, args)
        self.n_outputs = len(args)
        self.output_tensors_index = index
        return res if is_tuple else res[0]


class WrappedHook:
    """A hook bound to its module by weak reference (the non-full backward hooks)."""

    def __init__(self, hook, module) -> None:
        import weakref

        self.hook = hook
        self.module = weakref.ref(module)

    def __call__(self, *args):
        module = self.module()
        if module is None:
            raise RuntimeError("You are trying to call the hook of a dead Module!")
        return self.hook(module, *args)


_NON_FULL = ("Using non-full backward hooks on a Module that does not {what} is deprecated "
             "and will be removed in future versions. This hook will be missing some of the "
             "{part}. Please use register_full_backward_hook to get the documented behavior.")
_NON_FULL_NODES = ("Using a non-full backward hook when {what} is deprecated and will be "
                   "removed in future versions. This hook will be missing some {part}.{tail}")
_USE_FULL = " Please use register_full_backward_hook to get the documented behavior."


def _tensors(value) -> tuple | None:
    """``value`` as a tuple of tensors, or None when it is neither a tensor nor one."""
    if isinstance(value, Tensor):
        return (value,)
    if isinstance(value, tuple) and all(isinstance(v, Tensor) for v in value):
        return value
    return None


def warn_non_full_backward_hook(inputs, result, grad_fn) -> None:
    """torch's deprecation warnings where a non-full backward hook (registered on the
    output's grad_fn) cannot see every gradient of the module."""
    outputs = _tensors(result)
    if outputs is None:
        warnings.warn(_NON_FULL.format(what="return a single Tensor or a tuple of Tensors",
                                       part="grad_output"), FutureWarning, stacklevel=3)
        return
    ins = _tensors(inputs)
    if ins is None:
        warnings.warn(_NON_FULL.format(what="take as input a single Tensor or a tuple of "
                                       "Tensors", part="grad_input"), FutureWarning,
                      stacklevel=3)
        return
    out_nodes = {r.grad_fn for r in outputs if r.grad_fn is not None}
    if not out_nodes or (len(out_nodes) == 1 and grad_fn not in out_nodes):
        message = _NON_FULL_NODES.format(what="outputs are nested in python data structure",
                                         part="grad_output", tail="")
    elif len(out_nodes) > 1:
        message = _NON_FULL_NODES.format(what="outputs are generated by different autograd "
                                         "Nodes", part="grad_output", tail=_USE_FULL)
    elif {i.grad_fn for i in ins if i.grad_fn is not None} != {
            edge[0] for edge in grad_fn.next_functions}:
        message = _NON_FULL_NODES.format(what="the forward contains multiple autograd Nodes",
                                         part="grad_input", tail=_USE_FULL)
    else:
        return
    warnings.warn(message, FutureWarning, stacklevel=3)
