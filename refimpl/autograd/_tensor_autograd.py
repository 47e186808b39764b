"""The autograd half of Tensor: requires_grad, grad, grad_fn, hooks, backward.

``Tensor`` inherits this mixin, so everything autograd keeps on a tensor is defined
in one place, next to the engine that reads it.
"""

from __future__ import annotations


class TensorAutogradMixin:
    """Autograd state and methods of a tensor."""

    __slots__ = ("_requires_grad", "_grad", "grad_fn", "_output_nr", "_backward_hooks",
                 "_retains_grad", "_post_acc_hooks", "_fw_grads", "_is_inference")

    def _init_autograd(self) -> None:
        self._requires_grad = False
        self._grad = None
        self.grad_fn = None
        self._output_nr = 0
        self._backward_hooks = None
        self._retains_grad = False
        self._post_acc_hooks = None
        self._fw_grads = None
        self._is_inference = False

    @property
    def requires_grad(self) -> bool:
        """Whether gradients are computed for this tensor."""
        return self._requires_grad or self.grad_fn is not None

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True):
        """Set ``requires_grad`` of a leaf in place; returns self."""
        if self.grad_fn is not None:
            if not requires_grad:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want "
                    "to use a computed variable in a subgraph that doesn't require "
                    "differentiation use var_no_grad = var.detach()."
                )
            return self
        if requires_grad and not (self.dtype.is_floating_point or self.dtype.is_complex):
            raise RuntimeError(
                "only Tensors of floating point and complex dtype can require gradients"
            )
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def is_leaf(self) -> bool:
        """True for tensors not produced by a differentiable op."""
        return self.grad_fn is None

    @property
    def grad(self):
        """The accumulated gradient of a leaf (or of a tensor that retains grad)."""
        return self._grad

    @grad.setter
    def grad(self, value) -> None:
        self._grad = value

    @property
    def retains_grad(self) -> bool:
        """Whether a non-leaf keeps its gradient after backward."""
        return self._retains_grad

    @property
    def is_inference(self):
        """Whether this tensor was made in inference mode."""
        return lambda: self._is_inference

    def detach(self):
        """A new tensor sharing storage and version counter, cut from the graph."""
        t = type(self)._make(self._storage, self._shape, self._stride, self._offset, self.dtype,
                             self._version_counter)
        return t

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate d(self)/d(leaves) into the leaves' ``.grad``."""
        from refimpl import autograd

        autograd.backward(self, gradient, retain_graph, create_graph, inputs=inputs)
