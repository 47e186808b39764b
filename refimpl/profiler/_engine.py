"""Backward ranges: each node the engine runs, as torch's profiler records it (PROF-110).

For every node, an ``autograd::engine::evaluate_function: <node name>`` range with the
node's own ``<node name>`` range inside it; both carry the node's sequence number (the
number its forward op got, -1 for ``AccumulateGrad``), scope 1 (backward) and, as
``fwd_thread``, the thread of the forward op.

The engine has no observer slot of its own: while a profile records, its node call
(``GraphTask._call``) is wrapped here, and restored when the profile stops, so that the
engine runs unchanged when nothing is profiled.
"""

from __future__ import annotations

from typing import Any

from refimpl.autograd import engine as _engine_module

_original = None


def attach(collector: Any) -> None:
    """Wrap the engine's node call so that it records into ``collector``."""
    global _original
    if _original is not None:
        return
    _original = original = _engine_module.GraphTask._call

    def profiled_call(task: Any, node: Any, inputs: list) -> list:
        from refimpl.profiler._collect import _sequence_nr, _shape_of

        name = node.name()
        if name == "GraphRoot":  # the seed of backward is not a node torch records
            return original(task, node, inputs)
        seq = _sequence_nr(node)
        fwd = collector.forward_thread(node._seq)
        shapes = [_shape_of(g) for g in inputs] if collector.record_shapes else None
        outer = collector.open(f"autograd::engine::evaluate_function: {name}", seq=seq,
                               fwd_thread=fwd, scope=1)
        try:
            inner = collector.open(name, shapes, seq=seq, fwd_thread=fwd, scope=1)
            try:
                return original(task, node, inputs)
            finally:
                collector.close(inner)
        finally:
            collector.close(outer)

    _engine_module.GraphTask._call = profiled_call


def detach() -> None:
    """Restore the engine's own node call."""
    global _original
    if _original is not None:
        _engine_module.GraphTask._call = _original
        _original = None
