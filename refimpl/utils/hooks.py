"""``refimpl.utils.hooks``: the hook handle type (as ``torch.utils.hooks``)."""

from __future__ import annotations

from refimpl.autograd.graph import RemovableHandle

__all__ = ["RemovableHandle"]
