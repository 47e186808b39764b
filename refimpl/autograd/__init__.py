"""refimpl.autograd: reverse-mode automatic differentiation (spec: AUTOGRAD-*).

Modules: ``engine`` (backward/grad), ``graph`` (nodes, edges, graph-wide hooks),
``function`` (custom Functions), ``grad_mode``, ``anomaly_mode``, ``views`` (views and
in-place ops), ``saved`` (saved tensors), ``gradcheck``, ``functional``,
``checkpoint`` (also ``refimpl.utils.checkpoint``). The dispatcher's autograd layer is
``_record``; the Tensor side is ``_tensor_autograd``.
"""

from __future__ import annotations

from refimpl.autograd import graph
from refimpl.autograd.anomaly_mode import detect_anomaly, set_detect_anomaly
from refimpl.autograd.engine import _ExecutionEngine, backward, grad
from refimpl.autograd.function import Function, InplaceFunction, once_differentiable
from refimpl.autograd.grad_mode import (
    _force_original_view_tracking,
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_multithreading_enabled,
    is_view_replay_enabled,
    no_grad,
    set_grad_enabled,
    set_multithreading_enabled,
)
from refimpl.autograd.gradcheck import gradcheck, gradgradcheck
from refimpl.autograd.saved import SavedTensor


class _VariableMeta(type):
    def __instancecheck__(cls, other) -> bool:
        from refimpl._tensor import Tensor

        return isinstance(other, Tensor)


class Variable(metaclass=_VariableMeta):
    """Legacy name for Tensor; ``Variable._execution_engine`` is the engine handle."""

    _execution_engine = _ExecutionEngine()

    def __new__(cls, data=None, requires_grad: bool = False, volatile: bool = False):
        if data is None:
            from refimpl.ops.factories import empty

            data = empty((0,))
        if requires_grad:
            data = data.detach().requires_grad_(True)
        return data


class _unsafe_preserve_version_counter:
    """Within the block, in-place ops do not change the tensors' versions."""

    def __init__(self, tensors) -> None:
        from refimpl._tensor import Tensor

        self.tensors = (tensors,) if isinstance(tensors, Tensor) else tuple(tensors)
        self.prev = [t._version for t in self.tensors]

    def __enter__(self) -> None:
        """The versions to restore were read when the object was made."""

    def __exit__(self, *exc) -> None:
        graph._unsafe_set_version_counter(self.tensors, self.prev)


def _calculate_shape(output, grad, is_grads_batched: bool):
    """(output shape, grad shape) as compared by backward/grad."""
    from refimpl._tensor import Size

    if isinstance(output, graph.GradientEdge):
        if is_grads_batched:
            raise RuntimeError("Batched grads are not supported with GradientEdge")
        return Size(output.node._in_meta[output.output_nr][0]), grad.shape
    return output.shape, (grad.shape if not is_grads_batched else grad.shape[1:])


def __getattr__(name: str):
    # heavier submodules load on first use
    import importlib

    if name in ("functional", "checkpoint", "forward_ad", "anomaly_mode", "grad_mode",
                "function", "engine", "_functions", "views", "saved", "hooks", "graph_hooks"):
        return importlib.import_module(f"refimpl.autograd.{name}")
    if name in ("profiler", "profiler_util"):  # the profiler (refimpl.profiler)
        return importlib.import_module(f"refimpl.autograd.{name}")
    if name == "_profiler_enabled":
        return importlib.import_module("refimpl.autograd.profiler")._profiler_enabled
    raise AttributeError(f"module 'refimpl.autograd' has no attribute '{name}'")


__all__ = [
    "Function",
    "InplaceFunction",
    "SavedTensor",
    "Variable",
    "_force_original_view_tracking",
    "backward",
    "detect_anomaly",
    "enable_grad",
    "grad",
    "gradcheck",
    "gradgradcheck",
    "graph",
    "inference_mode",
    "is_grad_enabled",
    "is_multithreading_enabled",
    "is_view_replay_enabled",
    "no_grad",
    "once_differentiable",
    "set_detect_anomaly",
    "set_grad_enabled",
    "set_multithreading_enabled",
]
