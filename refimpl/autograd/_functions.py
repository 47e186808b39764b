"""Small graph-building helpers torch keeps in ``torch._C._functions`` (used by tests and
by ``once_differentiable``).

* ``DelayedError(msg, n)(*tensors)``: aliases of the tensors whose backward raises
  ``msg`` (node name ``Error``).
* ``UndefinedGrad()(*tensors)``: aliases whose backward passes *no* gradient on.
"""

from __future__ import annotations

from refimpl._state import STATE
from refimpl.autograd.graph import (  # noqa: F401 - AccumulateGrad re-exported as in torch
    AccumulateGrad,
    ErrorNode,
    GraphNode,
    gradient_edge,
    node_class,
)


def _alias(t):
    from refimpl._storage import VersionCounter
    from refimpl._tensor import Tensor

    return Tensor._make(t._storage, t._shape, t._stride, t._offset, t.dtype, VersionCounter())


def _wrap(inputs, make_node):
    outs = [None if t is None else _alias(t) for t in inputs]
    if STATE.grad_enabled and any(t is not None and t.requires_grad for t in inputs):
        edges = tuple(gradient_edge(t) if t is not None and t.requires_grad else None
                      for t in inputs)
        meta = tuple((t._shape, t.dtype, t.device) if t is not None else ((), None, None)
                     for t in inputs)
        node = make_node(edges, meta)
        for i, o in enumerate(outs):
            if o is not None and o.dtype.category >= 2:
                o._gfn = node
                o._output_nr = i
    return outs[0] if len(outs) == 1 else tuple(outs)


class DelayedError:
    """Identity whose gradient computation raises ``msg``."""

    def __init__(self, msg, num_inputs: int = 1) -> None:
        self.msg = msg.decode() if isinstance(msg, bytes) else str(msg)
        self.num_inputs = num_inputs

    def __call__(self, *inputs):
        return _wrap(inputs, lambda edges, meta: ErrorNode(self.msg, edges, meta))


class _UndefinedGradNode(GraphNode):
    __slots__ = ()

    def _apply(self, grads: list) -> list:
        return [None] * len(self._next)


class UndefinedGrad:
    """Identity whose backward produces undefined (None) gradients."""

    def __call__(self, *inputs):
        cls = node_class("UndefinedGradBackward", _UndefinedGradNode)

        def make(edges, meta):
            node = cls.__new__(cls)
            node._init_node(edges, meta)
            return node

        return _wrap(inputs, make)
