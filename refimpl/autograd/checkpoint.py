"""Activation checkpointing (spec: AUTOGRAD-950..956); also ``refimpl.utils.checkpoint``.

``checkpoint(fn, *args, use_reentrant=...)`` runs ``fn`` without keeping its
intermediate tensors and recomputes them when backward needs them.

* Reentrant (``use_reentrant=True``): a custom Function runs ``fn`` under no_grad in
  forward; its backward reruns ``fn`` with grad enabled and calls ``backward`` on the
  recomputed outputs (a nested, reentrant backward). It does not work with
  ``autograd.grad`` or ``backward(inputs=...)``.
* Non-reentrant (``use_reentrant=False``): ``fn`` runs under saved-tensor hooks whose
  pack stores a placeholder for each tensor the graph would save. The first unpack in a
  backward (one graph task) reruns ``fn`` under recording hooks that fill the
  placeholders; with *early stop* (default) the rerun stops as soon as every
  placeholder is filled. Each placeholder may be unpacked once per backward.
"""

from __future__ import annotations

import contextlib
import uuid
import warnings
import weakref
from collections import defaultdict

from refimpl._state import STATE
from refimpl.autograd.function import Function
from refimpl.autograd.graph_hooks import saved_tensors_hooks
from refimpl.autograd.saved import SavedVariable

__all__ = [
    "CheckpointError",
    "checkpoint",
    "checkpoint_sequential",
    "set_checkpoint_early_stop",
]


class CheckpointError(RuntimeError):
    """Raised when non-reentrant checkpoint's recomputation does not match forward."""


def _is_tensor(x) -> bool:
    from refimpl._tensor import Tensor

    return isinstance(x, Tensor)


def noop_context_fn():
    """The default ``context_fn``: no context around forward or recomputation."""
    return contextlib.nullcontext(), contextlib.nullcontext()


_early_stop_override: bool | None = None


@contextlib.contextmanager
def set_checkpoint_early_stop(enable: bool):
    """Whether checkpoints made in the block stop recomputing once all saved tensors are
    recomputed (the default)."""
    global _early_stop_override
    prev = _early_stop_override
    _early_stop_override = enable
    try:
        yield
    finally:
        _early_stop_override = prev


# -- reentrant ----------------------------------------------------------------------------


def _is_checkpoint_valid() -> bool:
    from refimpl.autograd.engine import current_graph_task

    task = current_graph_task()
    return task is None or task.needed is None


def _autocast_state(args) -> list:
    """The autocast settings (enabled, dtype, cache) of the inputs' device type and of the
    CPU at forward time: recomputation runs under them, as torch's checkpoint does."""
    from refimpl import _autocast as ac

    dev = next((a.device.type for a in args if _is_tensor(a) and a.device.type != "cpu"),
               "cuda")
    return [(d, ac.is_enabled(d), ac.get_dtype(d), ac.AUTOCAST.cache_enabled)
            for d in dict.fromkeys((dev, "cpu")) if d in ("cuda", "cpu")]


def _recompute_autocast(state: list) -> contextlib.ExitStack:
    from refimpl.amp import autocast

    stack = contextlib.ExitStack()
    for dev, enabled, dtype, cache in state:
        stack.enter_context(autocast(dev, dtype=dtype, enabled=enabled, cache_enabled=cache))
    return stack


class CheckpointFunction(Function):
    """The custom Function of reentrant checkpoint."""

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        ctx.run_function = run_function
        ctx.inputs = [None if _is_tensor(a) else a for a in args]
        ctx.tensor_indices = [i for i, a in enumerate(args) if _is_tensor(a)]
        ctx.save_for_backward(*[a for a in args if _is_tensor(a)])
        ctx.autocast_state = _autocast_state(args)
        return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        from refimpl.autograd.engine import backward

        if not _is_checkpoint_valid():
            raise RuntimeError(
                "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() "
                "or passing an `inputs` parameter to .backward(). To resolve this error, you "
                "can either set use_reentrant=False, or call .backward() without passing the "
                "`inputs` argument."
            )
        inputs = list(ctx.inputs)
        for i, t in zip(ctx.tensor_indices, ctx.saved_tensors):
            inputs[i] = t
        detached = tuple(_detach_like(x) for x in inputs)
        prev = STATE.grad_enabled
        STATE.grad_enabled = True
        try:
            with _recompute_autocast(ctx.autocast_state):
                outputs = ctx.run_function(*detached)
        finally:
            STATE.grad_enabled = prev
        if _is_tensor(outputs):
            outputs = (outputs,)
        outs, gs = [], []
        for o, g in zip(outputs, grads):
            if _is_tensor(o) and o.requires_grad:
                outs.append(o)
                gs.append(g)
        if not outs:
            raise RuntimeError(
                "none of output has requires_grad=True, this checkpoint() is not necessary"
            )
        backward(outs, gs)
        return (None, None) + tuple(x.grad if _is_tensor(x) else None for x in detached)


def _detach_like(x):
    if not _is_tensor(x):
        return x
    d = x.detach()
    d.requires_grad_(x.requires_grad)
    return d


# -- non-reentrant ------------------------------------------------------------------------


class _Holder:
    def __init__(self) -> None:
        self.handles: dict = {}


class _Handle:
    """An object to keep alive: its lifetime scopes a registration."""


class _StopRecomputation(Exception):
    """Raised to end a recomputation early, once the needed tensors are saved."""


class _Frame:
    """State of one non-reentrant checkpointed call."""

    def __init__(self, recompute_fn, early_stop: bool) -> None:
        self.recompute_fn = recompute_fn
        self.early_stop = early_stop
        self.saved_args: list = []
        self.weak_holders: list = []
        self.recomputed = defaultdict(weakref.WeakKeyDictionary)
        self.recomp_counter = defaultdict(int)
        self.is_recomputed = defaultdict(bool)
        self.forward_completed = False
        self.ignore_saved_mismatch = False

    def save_inputs(self, *args) -> None:
        self.saved_args = [SavedVariable(a) if _is_tensor(a) else a for a in args]

    def get_inputs(self) -> list:
        return [a.unpack() if isinstance(a, SavedVariable) else a for a in self.saved_args]

    def check_counts(self, gid) -> None:
        if self.ignore_saved_mismatch:
            return
        if len(self.weak_holders) != self.recomp_counter[gid]:
            raise CheckpointError(
                "torch.utils.checkpoint: A different number of tensors was saved during the "
                "original forward and recomputation.\n"
                f"Number of tensors saved during forward: {len(self.weak_holders)}\n"
                f"Number of tensors saved during recomputation: {self.recomp_counter[gid]}"
            )


def _recomputation_hooks(frame_ref, gid) -> saved_tensors_hooks:
    def pack(x):
        x = x.detach() if x.requires_grad else x
        frame = frame_ref()
        idx = frame.recomp_counter[gid]
        frame.recomp_counter[gid] += 1
        if idx >= len(frame.weak_holders):
            if not frame.forward_completed:
                frame.ignore_saved_mismatch = True
                return x
            raise CheckpointError(
                "torch.utils.checkpoint: trying to save more tensors during recomputation than "
                "during the original forward pass."
            )
        holder = frame.weak_holders[idx]()
        if holder is not None:
            holder.handles[gid] = _Handle()
            frame.recomputed[gid][holder.handles[gid]] = x
        if frame.early_stop and frame.recomp_counter[gid] == len(frame.weak_holders):
            raise _StopRecomputation
        return x

    def unpack(x):
        return x

    return saved_tensors_hooks(pack, unpack)


def _checkpoint_hooks(frame) -> saved_tensors_hooks:
    def pack(x):
        holder = _Holder()
        frame.weak_holders.append(weakref.ref(holder))
        return holder

    def unpack(holder):
        from refimpl.autograd.engine import current_graph_task_id

        gid = current_graph_task_id()
        if gid == -1:
            gid = int(uuid.uuid4())
        if not frame.is_recomputed[gid]:
            args = frame.get_inputs()
            prev = STATE.grad_enabled
            try:
                with _recomputation_hooks(weakref.ref(frame), gid):
                    STATE.grad_enabled = True
                    frame.recompute_fn(*args)
            except _StopRecomputation:
                pass
            finally:
                STATE.grad_enabled = prev
            frame.is_recomputed[gid] = True
            frame.check_counts(gid)
        if holder.handles.get(gid, 0) is None:
            raise CheckpointError(
                "torch.utils.checkpoint: Unpack is being triggered for a tensor that was "
                "already unpacked once. If you are calling ctx.saved_tensors in backward, make "
                "sure to do so only once. Otherwise please open an issue with details on your "
                "use case."
            )
        handle = holder.handles[gid]
        result = frame.recomputed[gid][handle]
        holder.handles[gid] = None
        return result

    return saved_tensors_hooks(pack, unpack)


def _checkpoint_without_reentrant(function, context_fn, early_stop, args, kwargs):
    forward_context, recompute_context = context_fn()
    autocast_state = _autocast_state(args)

    def recompute_fn(*inputs):
        with recompute_context, _recompute_autocast(autocast_state):
            function(*inputs, **kwargs)

    frame = _Frame(recompute_fn,
                   _early_stop_override if _early_stop_override is not None else early_stop)
    if not STATE.grad_enabled:
        with forward_context:
            return function(*args, **kwargs)
    frame.save_inputs(*args)
    with _checkpoint_hooks(frame), forward_context:
        out = function(*args, **kwargs)
    frame.forward_completed = True
    return out


def checkpoint(function, *args, use_reentrant: bool | None = None,
               context_fn=noop_context_fn, determinism_check: str = "default",
               debug: bool = False, early_stop: bool = True, **kwargs):
    """Run ``function(*args, **kwargs)`` now and recompute its intermediates in backward
    instead of keeping them (see the module docstring)."""
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. "
            "Starting in PyTorch 2.9, calling checkpoint without use_reentrant will raise an "
            "exception. use_reentrant=False is recommended, but if you need to preserve the "
            "current default behavior, you can pass use_reentrant=True. Refer to docs for more "
            "details on the differences between the two variants.", stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs and use_reentrant:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if use_reentrant:
        if context_fn is not noop_context_fn or debug is not False:
            raise ValueError(
                "Passing `context_fn` or `debug` is only supported when use_reentrant=False."
            )
        return CheckpointFunction.apply(function, preserve, *args)
    return _checkpoint_without_reentrant(function, context_fn, early_stop, args, kwargs)


def checkpoint_sequential(functions, segments: int, input, use_reentrant: bool | None = None,
                          **kwargs):
    """Checkpoint a sequence of functions (or modules) in ``segments`` chunks."""
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should "
            "be passed explicitly. In version 2.9 we will raise an exception if use_reentrant "
            "is not passed. use_reentrant=False is recommended, but if you need to preserve the "
            "current default behavior, you can pass use_reentrant=True. Refer to docs for more "
            "details on the differences between the two variants.", stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    functions = list(functions.children()) if hasattr(functions, "children") else list(functions)

    def run(start, end):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x

        return forward

    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
    return run(end + 1, len(functions) - 1)(input)
