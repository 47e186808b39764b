# ruff: noqa: N999 (torch names this module _C)
"""The few ``torch._C`` switches that tests and user code call directly.

torch exposes these from its C++ extension; refimpl keeps the state in Python
(``refimpl._state``) and this module only names the setters as torch does.
"""

from __future__ import annotations


def _set_fwd_grad_enabled(enabled: bool) -> None:
    """Turn tangent propagation on or off for this thread (FWDAD-004)."""
    from refimpl.autograd.forward_ad import _set_fwd_grad_enabled_global

    _set_fwd_grad_enabled_global(enabled)


def _is_fwd_grad_enabled() -> bool:
    """Whether tangent propagation is on for this thread."""
    from refimpl._state import STATE

    return STATE.fw_grad_enabled
