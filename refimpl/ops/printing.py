"""Tensor printing options in refimpl's namespace (``refimpl.set_printoptions``).

The printing itself is ``refimpl/_repr.py``; this module only exports its options
function next to the ops, as torch exports ``torch.set_printoptions``.
"""

from __future__ import annotations

from refimpl._repr import set_printoptions

__all__ = ["set_printoptions"]
