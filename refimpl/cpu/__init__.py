"""``refimpl.cpu``: the torch.cpu-like namespace (so far its ``amp`` submodule)."""

from __future__ import annotations

from refimpl.cpu import amp

__all__ = ["amp"]
