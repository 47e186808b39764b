"""Python dispatch modes (torch's ``torch.utils._python_dispatch``).

A mode is an object with ``__torch_dispatch__(op, types, args, kwargs)``. While it is on
``refimpl._dispatch.MODE_STACK`` every op call reaches it first (layer 1 of the
dispatcher); the dispatcher pops it for the duration of the call, so calling the op
again inside ``__torch_dispatch__`` goes on to the next mode or to the regular layers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from refimpl import _dispatch


class TorchDispatchMode:
    """Base class of dispatch modes: a context manager that pushes itself on the stack."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        """Handle one op call; the default re-dispatches it unchanged."""
        return func(*args, **(kwargs or {}))

    def __enter__(self):
        _dispatch.MODE_STACK.append(self)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        stack = _dispatch.MODE_STACK
        # the innermost occurrence: a mode may be entered more than once
        for i in range(len(stack) - 1, -1, -1):
            if stack[i] is self:
                del stack[i]
                break


def _get_current_dispatch_mode():
    """The innermost active mode, or None."""
    stack = _dispatch.MODE_STACK
    return stack[-1] if stack else None


def _get_current_dispatch_mode_stack() -> list:
    """The active modes, outermost first (a copy)."""
    return list(_dispatch.MODE_STACK)


def is_in_torch_dispatch_mode() -> bool:
    """Whether any dispatch mode is active."""
    return bool(_dispatch.MODE_STACK)


@contextlib.contextmanager
def _disable_current_modes() -> Iterator[list]:
    """Run the block with no dispatch mode active; yields the modes set aside."""
    stack = _dispatch.MODE_STACK
    saved = stack[:]
    del stack[:]
    try:
        yield saved
    finally:
        stack[:] = saved + stack


__all__ = ["TorchDispatchMode", "is_in_torch_dispatch_mode"]
