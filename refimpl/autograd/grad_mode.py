"""Grad modes: no_grad, enable_grad, set_grad_enabled, inference_mode (spec AUTOGRAD-3xx).

Each is a context manager and a decorator; the state is per thread (refimpl._state).
"""

from __future__ import annotations

import functools

from refimpl._state import STATE


class _GradModeBase:
    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(*self._ctor_args()):
                return fn(*args, **kwargs)

        return wrapper

    def _ctor_args(self) -> tuple:
        return ()


class no_grad(_GradModeBase):  # noqa: N801
    """Disable gradient recording inside the block."""

    def __enter__(self) -> None:
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = False

    def __exit__(self, *exc) -> None:
        STATE.grad_enabled = self._prev


class enable_grad(_GradModeBase):  # noqa: N801
    """Enable gradient recording inside the block."""

    def __enter__(self) -> None:
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = True

    def __exit__(self, *exc) -> None:
        STATE.grad_enabled = self._prev


class set_grad_enabled(_GradModeBase):  # noqa: N801
    """Set grad mode now; restores the previous mode when used as a context manager."""

    def __init__(self, mode: bool) -> None:
        self._prev = STATE.grad_enabled
        self.mode = bool(mode)
        STATE.grad_enabled = self.mode

    def _ctor_args(self) -> tuple:
        return (self.mode,)

    def __enter__(self) -> None:
        STATE.grad_enabled = self.mode

    def __exit__(self, *exc) -> None:
        STATE.grad_enabled = self._prev


class inference_mode(_GradModeBase):  # noqa: N801
    """Inference mode: no grad recording and tensors marked as inference tensors."""

    def __init__(self, mode: bool = True) -> None:
        self.mode = bool(mode)

    def _ctor_args(self) -> tuple:
        return (self.mode,)

    def __enter__(self) -> None:
        self._prev = (STATE.grad_enabled, STATE.inference_mode)
        if self.mode:
            STATE.grad_enabled = False
        STATE.inference_mode = self.mode

    def __exit__(self, *exc) -> None:
        STATE.grad_enabled, STATE.inference_mode = self._prev


def is_grad_enabled() -> bool:
    """Whether grad mode is on in this thread."""
    return STATE.grad_enabled


def is_inference_mode_enabled() -> bool:
    """Whether inference mode is on in this thread."""
    return STATE.inference_mode
