"""The backward graph: nodes, edges, hooks on nodes (spec: AUTOGRAD-GRAPH-*).

A ``Node`` is one function of the backward graph. It receives one gradient per output
of the forward computation it stands for, and returns one gradient per *edge*; edge
``i`` is ``(node, input_nr)``: where gradient ``i`` flows next (``None`` when that
input did not require grad). Leaves that require grad end in an ``AccumulateGrad``
node, which writes into ``tensor.grad``.

Nodes are what users see as ``tensor.grad_fn``:

* ``name()``, ``next_functions``, ``metadata``;
* ``register_prehook(fn(grad_outputs))`` and ``register_hook(fn(grad_inputs,
  grad_outputs))``, each returning a ``RemovableHandle``;
* calling a node applies it (``node(*grads)``).

The engine (``engine.py``) is the only place that runs nodes during backward.
"""

from __future__ import annotations

import abc
import itertools
import re
import threading
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

from refimpl.autograd import _flags
from refimpl.autograd._streams import node_stream

# Monotonic creation counter: the engine runs ready nodes newest first, like torch.
_SEQUENCE = itertools.count()
_MAX_SEQUENCE = 1 << 63

__all__ = [
    "AccumulateGrad",
    "GradientEdge",
    "Node",
    "RemovableHandle",
    "allow_mutation_on_saved_tensors",
    "disable_saved_tensors_hooks",
    "get_gradient_edge",
    "increment_version",
    "register_multi_grad_hook",
    "save_on_cpu",
    "saved_tensors_hooks",
]


class RemovableHandle:
    """Removes one hook from the dict(s) it was registered in (also a context manager)."""

    next_id = 0
    _lock = threading.Lock()

    def __init__(self, hooks_dict: dict, *, extra_dict=None) -> None:
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        with RemovableHandle._lock:
            self.id = RemovableHandle.next_id
            RemovableHandle.next_id += 1
        if extra_dict is None:
            extras = ()
        elif isinstance(extra_dict, dict):
            extras = (extra_dict,)
        else:
            extras = tuple(extra_dict)
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extras)

    def remove(self) -> None:
        """Unregister the hook; removing twice is a no-op."""
        for ref in (self.hooks_dict_ref, *self.extra_dict_ref):
            d = ref()
            if d is not None:
                d.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:  # noqa: PYI034
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


class _HookDict(dict):
    """A dict of hooks that can be weakly referenced by its handles."""

    __slots__ = ("__weakref__",)


def _display_name(name: str) -> str:
    """The short form torch prints in version-counter errors (``MulBackward0`` -> ``Mul``)."""
    m = re.fullmatch(r"(.*)Backward(\d*)", name)
    if m is None:
        return name
    return m.group(1) + ("" if m.group(2) in ("", "0") else m.group(2))


class GraphNode:
    """One function of the backward graph (``tensor.grad_fn``); see the module docstring."""

    # _next: tuple of edges, one per gradient this node returns: (node, input_nr) | None
    # _in_meta: per incoming gradient, (shape, dtype, device) of the forward output
    __slots__ = (
        "__weakref__",
        "_anomaly",
        "_in_meta",
        "_metadata",
        "_next",
        "_post_hooks",
        "_pre_hooks",
        "_retains_grad_hooks",
        "_seq",
        "_stream",
        "_tensor_pre_hooks",
    )

    _name = "Node"
    # True for nodes whose backward is refimpl's own code (recorded ops, views,
    # AccumulateGrad): with no hook on them either, nothing a user runs can tell which
    # thread ran them, and the engine may run them on the task's thread (engine, STREAM-304)
    _builtin = False

    def _init_node(self, next_edges: tuple, in_meta: tuple) -> None:
        self._next = next_edges
        self._in_meta = in_meta
        # the stream backward runs on: the forward's current stream (CUDA nodes only)
        self._stream = node_stream(in_meta) if in_meta else None
        self._seq = next(_SEQUENCE)
        self._pre_hooks = None
        self._post_hooks = None
        self._tensor_pre_hooks = None
        self._retains_grad_hooks = None
        self._metadata = None
        self._anomaly = None
        if _flags.anomaly_enabled:
            from refimpl.autograd.anomaly_mode import record_forward_trace

            record_forward_trace(self)

    # -- what subclasses implement ------------------------------------------------------

    def _apply(self, grads: list) -> list:
        """Gradients for the edges, given one gradient per forward output."""
        raise NotImplementedError

    def _release(self) -> None:
        """Free saved state after a backward that does not retain the graph."""

    # -- public API ---------------------------------------------------------------------

    def name(self) -> str:
        """The node's name, e.g. ``AddBackward0``."""
        return self._name

    @property
    def next_functions(self) -> tuple:
        """``((node, input_nr), ...)``, one per gradient this node returns."""
        return tuple((None, 0) if e is None else e for e in self._next)

    @property
    def metadata(self) -> dict:
        """A dict for users (and anomaly mode) to attach data to the node."""
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    def _sequence_nr(self) -> int:
        return self._seq

    def _set_sequence_nr(self, nr: int) -> None:
        self._seq = nr

    @property
    def _input_metadata(self) -> list:
        return list(self._in_meta)

    def register_prehook(self, fn: Callable) -> RemovableHandle:
        """``fn(grad_outputs)`` runs before the node; it may return new grad_outputs."""
        if self._pre_hooks is None:
            self._pre_hooks = _HookDict()
        handle = RemovableHandle(self._pre_hooks)
        self._pre_hooks[handle.id] = fn
        return handle

    def register_hook(self, fn: Callable) -> RemovableHandle:
        """``fn(grad_inputs, grad_outputs)`` runs after the node; it may return new
        grad_inputs."""
        if self._post_hooks is None:
            self._post_hooks = _HookDict()
        handle = RemovableHandle(self._post_hooks)
        self._post_hooks[handle.id] = fn
        return handle

    def _register_hook_dict(self, tensor) -> None:
        """Attach a tensor's ``_backward_hooks`` dict as a tensor pre-hook of this node."""
        if self._tensor_pre_hooks is None:
            self._tensor_pre_hooks = []
        self._tensor_pre_hooks.append((tensor._output_nr, tensor._backward_hooks))

    def __call__(self, *grads):
        if len(grads) != len(self._in_meta):
            raise TypeError(f"expected {len(self._in_meta)} arguments, got {len(grads)} instead")
        out = self._apply(list(grads))
        return out[0] if len(out) == 1 else tuple(out)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} object at {hex(id(self))}>"

    # -- engine helpers -----------------------------------------------------------------

    def _has_tensor_hooks(self) -> bool:
        return bool(self._tensor_pre_hooks) or bool(self._retains_grad_hooks)

    def _runs_user_code(self) -> bool:
        """Whether running this node may call user code: a custom backward or any hook."""
        return (not self._builtin or bool(self._pre_hooks) or bool(self._post_hooks)
                or self._has_tensor_hooks())

    def _call_tensor_pre_hooks(self, grads: list) -> list:
        """Hooks registered on the tensors this node produced, then retain_grad hooks."""
        if self._tensor_pre_hooks:
            for output_nr, hooks in list(self._tensor_pre_hooks):
                for hook in list(hooks.values()):
                    res = hook(grads[output_nr])
                    if res is not None:
                        grads[output_nr] = _check_hook_result(res, grads[output_nr])
        if self._retains_grad_hooks:
            for output_nr, hook in list(self._retains_grad_hooks.items()):
                hook(grads[output_nr])
        return grads


def _check_hook_result(res, old):
    from refimpl._tensor import Tensor

    if not isinstance(res, Tensor):
        raise TypeError(f"hook should return a Tensor or None, but got {type(res).__name__}")
    return res


class GraphRoot(GraphNode):
    """The node the engine starts from when backward has several roots."""

    __slots__ = ()
    _name = "GraphRoot"


class AccumulateGrad(GraphNode):
    """The node at the end of a leaf's history: accumulates into ``variable.grad``."""

    __slots__ = ("_lock", "variable")
    _name = "torch::autograd::AccumulateGrad"
    _builtin = True

    def __init__(self, variable) -> None:
        self._init_node((), ((variable._shape, variable.dtype, variable.device),))
        self._seq = _MAX_SEQUENCE
        self.variable = variable
        self._lock = threading.Lock()

    def _apply(self, grads: list) -> list:
        engine = _ENGINE or _engine()
        grad = grads[0]
        if grad is not None:
            # held by: the engine's buffer (grads), its copy when post hooks exist, `grad`
            steal = engine.stealable(grad, 2 + (1 if self._post_hooks else 0))
            with self._lock:
                engine.accumulate_into(self.variable, grad, steal)
            hooks = self.variable._post_acc_hooks
            if hooks:
                for hook in list(hooks.values()):
                    if hook(self.variable) is not None:
                        raise RuntimeError("Tensor post accumulate grad hooks should return None.")
        return []

    def _call_tensor_pre_hooks(self, grads: list) -> list:
        hooks = self.variable._backward_hooks
        if hooks:
            for hook in list(hooks.values()):
                res = hook(grads[0])
                if res is not None:
                    grads[0] = _check_hook_result(res, grads[0])
        return grads

    def _has_tensor_hooks(self) -> bool:
        return bool(self.variable._backward_hooks)

    def _runs_user_code(self) -> bool:
        return GraphNode._runs_user_code(self) or bool(self.variable._post_acc_hooks)


_ENGINE = None  # refimpl.autograd.engine, bound on first use (it imports this module)


def _engine():
    global _ENGINE
    from refimpl.autograd import engine as _ENGINE

    return _ENGINE


class Error(GraphNode):
    """A node whose backward always raises (torch's ``Error``; once_differentiable)."""

    __slots__ = ("_msg",)
    _name = "Error"

    def __init__(self, msg: str, next_edges: tuple, in_meta: tuple) -> None:
        self._init_node(next_edges, in_meta)
        self._msg = msg

    def _apply(self, grads: list) -> list:
        raise RuntimeError(self._msg)


ErrorNode = Error


class Node(abc.ABC):
    """The virtual base of every backward function: ``isinstance(grad_fn, Node)`` holds,
    though ``Node`` is in no node class's MRO (as in torch)."""

    @classmethod
    def __subclasshook__(cls, subclass):
        if cls is Node:
            return issubclass(subclass, GraphNode) or NotImplemented
        return NotImplemented

    def name(self) -> str:
        """The node's name."""
        raise NotImplementedError

    @property
    def next_functions(self) -> tuple:
        """The edges of the node."""
        raise NotImplementedError

    @property
    def metadata(self) -> dict:
        """User metadata."""
        raise NotImplementedError

    def register_hook(self, fn: Callable) -> RemovableHandle:
        """Register a post hook."""
        raise NotImplementedError

    def register_prehook(self, fn: Callable) -> RemovableHandle:
        """Register a pre hook."""
        raise NotImplementedError


# Node classes by name, made on first use so that ``type(grad_fn).__name__`` is
# ``AddBackward0`` as in torch.
_NODE_CLASSES: dict[str, type] = {}


def node_class(name: str, base: type) -> type:
    """The subclass of ``base`` named ``name`` (one class per name)."""
    key = (name, base)
    cls = _NODE_CLASSES.get(key)
    if cls is None:
        cls = type(name, (base,), {"__slots__": (), "_name": name})
        _NODE_CLASSES[key] = cls
    return cls


# -- edges --------------------------------------------------------------------------------


def grad_accumulator(tensor) -> AccumulateGrad:
    """The leaf's AccumulateGrad node (cached weakly on the tensor, as torch does)."""
    ref = tensor._grad_acc
    acc = ref() if ref is not None else None
    if acc is None:
        acc = AccumulateGrad(tensor)
        tensor._grad_acc = weakref.ref(acc)
    return acc


def gradient_edge(tensor):
    """Where the gradient of ``tensor`` flows: (grad_fn, output_nr), the accumulator, or None."""
    fn = tensor.grad_fn
    if fn is not None:
        return (fn, tensor._output_nr)
    if tensor._rg:
        return (grad_accumulator(tensor), 0)
    return None


class GradientEdge(NamedTuple):
    """A point of the graph gradients can be asked for: (node, output_nr)."""

    node: Any
    output_nr: int


def get_gradient_edge(tensor) -> GradientEdge:
    """The GradientEdge for ``tensor``; it stays valid after ``tensor`` is modified in place."""
    if not tensor.requires_grad:
        raise RuntimeError(
            "It is not possible to get the gradient edge for a Tensor that does not require "
            "gradients"
        )
    edge = gradient_edge(tensor)
    return GradientEdge(edge[0], edge[1])


def increment_version(tensor) -> None:
    """Bump the version counter of ``tensor`` (or of each tensor of an iterable)."""
    from refimpl._tensor import Tensor

    tensors = (tensor,) if isinstance(tensor, Tensor) else tuple(tensor)
    for t in tensors:
        t._version_counter.bump()


def _unsafe_set_version_counter(tensors, versions) -> None:
    """Set the version counters of ``tensors`` (torch 2.11+: sequences of both)."""
    for t, v in zip(tensors, versions):
        if v < 0:
            raise RuntimeError(f"Cannot set a version_counter to a value below 0: {v}")
        t._version_counter.version = int(v)


# The names below live in their own modules; torch exposes them as torch.autograd.graph.*.
from refimpl.autograd.graph_hooks import (
    allow_mutation_on_saved_tensors,
    disable_saved_tensors_hooks,
    register_multi_grad_hook,
    save_on_cpu,
    saved_tensors_hooks,
)
