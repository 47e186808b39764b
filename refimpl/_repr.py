"""Tensor printing in torch's format."""

from __future__ import annotations


def tensor_repr(t) -> str:
    """``tensor([...], dtype=...)`` as torch prints it."""
    body = str(t.detach().cpu()._np.tolist()) if not t.is_meta else "..."
    extra = ""
    from refimpl import _dtype as D

    if t.dtype not in (D.get_default_dtype(), D.int64, D.bool_):
        extra = f", dtype={t.dtype!r}"
    return f"tensor({body}{extra})"
