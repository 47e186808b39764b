"""The ``torch.cpu``-like namespace of refimpl (its ``amp`` submodule)."""

from refimpl.cpu import amp

__all__ = ["amp"]
