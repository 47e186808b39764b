"""Hooks over the whole graph: saved-tensor hooks, multi-grad hooks, mutation of saved
tensors (spec: AUTOGRAD-SAVED-*, AUTOGRAD-HOOKS-*).

* ``saved_tensors_hooks(pack, unpack)``: every tensor saved for backward while the
  context is active is stored as ``pack(tensor)`` and restored with ``unpack(packed)``;
  the innermost pair wins. The stack is per thread.
* ``disable_saved_tensors_hooks(msg)``: entering hooks while disabled raises ``msg``.
* ``save_on_cpu``: hooks that keep saved tensors on the CPU.
* ``register_multi_grad_hook(tensors, fn, mode="all"|"any")``.
* ``allow_mutation_on_saved_tensors()``: saved tensors are cloned before being mutated.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections import defaultdict
from collections.abc import Callable
from weakref import WeakKeyDictionary, WeakValueDictionary


class _HooksState(threading.local):
    def __init__(self) -> None:
        self.stack: list = []
        self.disabled_message: str | None = None


HOOKS = _HooksState()


def current_hooks():
    """The innermost (pack, unpack) pair, or None."""
    stack = HOOKS.stack
    return stack[-1] if stack else None


def push_hooks(pack: Callable, unpack: Callable) -> None:
    """Push a (pack, unpack) pair (raises when hooks are disabled)."""
    if HOOKS.disabled_message is not None:
        raise RuntimeError(HOOKS.disabled_message)
    HOOKS.stack.append((pack, unpack))


def pop_hooks() -> None:
    """Pop the innermost pair."""
    HOOKS.stack.pop()


def saved_tensors_hooks_is_enabled() -> bool:
    """False inside ``disable_saved_tensors_hooks``."""
    return HOOKS.disabled_message is None


class saved_tensors_hooks:
    """Context manager: store saved tensors as ``pack_hook(t)``, restore with
    ``unpack_hook(packed)``. Only the innermost pair applies."""

    def __init__(self, pack_hook: Callable, unpack_hook: Callable) -> None:
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self) -> None:
        push_hooks(self.pack_hook, self.unpack_hook)

    def __exit__(self, *exc) -> None:
        pop_hooks()


class save_on_cpu(saved_tensors_hooks):
    """Saved tensors are moved to the CPU when saved and back to their device when used."""

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
        def pack(tensor):
            if not pin_memory:
                return (tensor.device, tensor.cpu())
            import refimpl

            packed = refimpl.empty(tuple(tensor.shape), dtype=tensor.dtype)
            packed.copy_(tensor)
            return (tensor.device, packed)

        def unpack(packed):
            device, tensor = packed
            return tensor.to(device)

        super().__init__(pack, unpack)


@contextlib.contextmanager
def disable_saved_tensors_hooks(error_message: str):
    """Within the block, using saved-tensor hooks raises ``RuntimeError(error_message)``."""
    if HOOKS.stack:
        raise RuntimeError(error_message)
    prev = HOOKS.disabled_message
    try:
        HOOKS.disabled_message = error_message
        yield
    finally:
        HOOKS.disabled_message = prev


class _MultiHandle:
    """Removes every per-tensor hook of a multi-grad hook."""

    def __init__(self, handles: tuple) -> None:
        self.handles = handles

    def remove(self) -> None:
        """Unregister all the hooks."""
        for h in self.handles:
            h.remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def register_multi_grad_hook(tensors, fn: Callable, *, mode: str = "all"):
    """Call ``fn`` once per backward: with all the tensors' grads (``"all"``, None for
    those not computed) or with the first one computed (``"any"``)."""
    from refimpl.autograd import engine
    from refimpl.autograd.graph import gradient_edge

    modes = ("all", "any")
    if mode not in modes:
        raise ValueError(f"Expects mode to be one of {modes} but got {mode}")
    lock = threading.Lock()
    tensors = tuple(tensors)

    if mode == "all":
        count: dict = {}
        buffers: dict = {}
        expected: dict = {}
        nodes = [gradient_edge(t)[0] if t.requires_grad else None for t in tensors]

        def make_hook(idx: int):
            def hook(grad):
                task = engine.current_graph_task_id()
                if task == -1:
                    raise AssertionError("expected this hook to be called inside a backward call")
                with lock:
                    if task not in count:
                        count[task] = 0
                        buffers[task] = [None] * len(tensors)
                        expected[task] = sum(
                            1 for n in nodes
                            if n is not None and engine.will_engine_execute_node(n))
                    seen = count[task]
                    count[task] = seen + 1
                    buffers[task][idx] = grad
                    done = seen == expected[task] - 1
                    if done:
                        grads = buffers.pop(task)
                        del count[task]
                        del expected[task]
                if done:
                    fn(grads)

            return hook

        handles = tuple(t.register_hook(make_hook(i)) for i, t in enumerate(tensors))
    else:
        ran: dict = defaultdict(bool)

        @functools.wraps(fn)
        def wrapped(grad):
            task = engine.current_graph_task_id()
            if task == -1:
                raise AssertionError("expected this hook to be called inside a backward call")
            with lock:
                prev, ran[task] = ran[task], True
            if not prev:
                fn(grad)

        handles = tuple(t.register_hook(wrapped) for t in tensors if t.requires_grad)
    return _MultiHandle(handles)


# -- allow_mutation_on_saved_tensors -------------------------------------------------------

_mutation_ctx_active = False


class _Handle:
    """An object to keep alive: its lifetime scopes a registration."""


def _tid(tensor) -> tuple:
    return (id(tensor), tensor.data_ptr(), tensor._version)


def _sid(tensor) -> tuple:
    return (tensor.data_ptr(), tensor._version)


class _AllowMutationOnSavedContext:
    """What allow_mutation_on_saved_tensors tracks: originals, clones and aliases."""

    def __init__(self) -> None:
        self.cloned = WeakKeyDictionary()
        self.original = WeakKeyDictionary()
        self.tid_to_weakhandle = WeakValueDictionary()
        self.sid_to_tid = defaultdict(set)

    def clear(self) -> None:
        """Forget everything (on exit)."""
        self.cloned.clear()
        self.original.clear()
        self.tid_to_weakhandle.clear()
        self.sid_to_tid.clear()


def _swap_hooks(ctx: _AllowMutationOnSavedContext) -> saved_tensors_hooks:
    def pack(tensor):
        tid, sid = _tid(tensor), _sid(tensor)
        ctx.sid_to_tid[sid].add(tid)
        handle = ctx.tid_to_weakhandle.get(tid)
        if handle is None:
            handle = _Handle()
            ctx.tid_to_weakhandle[tid] = handle
            ctx.original[handle] = tensor
        return handle

    def unpack(handle):
        msg = ("Trying to backward outside of the 'allow_mutation_on_saved_tensors' context"
               "in which the graph was originally recorded.")
        if not _mutation_ctx_active:
            raise AssertionError(msg)
        if handle in ctx.cloned:
            return ctx.cloned[handle]
        if handle not in ctx.original:
            raise AssertionError(msg)
        return ctx.original[handle]

    return saved_tensors_hooks(pack, unpack)


class _CloneBeforeMutateMode:
    """A dispatch mode: before an op writes a tensor, clone the saved originals it aliases."""

    def __init__(self, ctx: _AllowMutationOnSavedContext) -> None:
        self.ctx = ctx

    def _maybe_clone(self, t) -> None:
        ctx = self.ctx
        for tid in list(ctx.sid_to_tid.get(_sid(t), ())):
            handle = ctx.tid_to_weakhandle.get(tid)
            if handle is None or handle in ctx.cloned:
                continue
            ctx.cloned[handle] = ctx.original[handle].clone()
            del ctx.original[handle]

    def __torch_dispatch__(self, op, types, args=(), kwargs=None):
        from refimpl._tensor import Tensor

        kwargs = kwargs or {}
        writes = op.kind == "inplace" or op.extra.get("writes_input0")
        if writes and args and isinstance(args[0], Tensor):
            self._maybe_clone(args[0])
        out = kwargs.get("out")
        if isinstance(out, Tensor):
            self._maybe_clone(out)
        elif isinstance(out, (tuple, list)):
            for o in out:
                if isinstance(o, Tensor):
                    self._maybe_clone(o)
        return op(*args, **kwargs)


@contextlib.contextmanager
def allow_mutation_on_saved_tensors():
    """Tensors saved for backward may be mutated in the block: they are cloned first,
    and backward (inside the same block) uses the clone."""
    global _mutation_ctx_active
    from refimpl._dispatch import MODE_STACK

    ctx = _AllowMutationOnSavedContext()
    mode = _CloneBeforeMutateMode(ctx)
    with _swap_hooks(ctx):
        MODE_STACK.append(mode)
        try:
            if _mutation_ctx_active:
                raise RuntimeError("allow_mutation_on_saved_tensors contexts cannot be nested")
            _mutation_ctx_active = True
            yield ctx
        finally:
            ctx.clear()
            _mutation_ctx_active = False
            MODE_STACK.remove(mode)
