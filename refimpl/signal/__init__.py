"""``refimpl.signal``: torch.signal (its ``windows`` submodule)."""

from refimpl.signal import windows

__all__ = ["windows"]
