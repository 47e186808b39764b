"""Grad modes: no_grad, enable_grad, set_grad_enabled, inference_mode (spec AUTOGRAD-MODE-*).

Each is a context manager and a decorator; the state is per thread (refimpl._state).
As decorators they wrap each call of the function in the mode; a decorated generator
runs each of its steps in the mode while its caller keeps its own mode between steps.
Decorating a class is deprecated (FutureWarning) and wraps only its construction.
``set_grad_enabled(mode)`` also acts immediately when simply called.
"""

from __future__ import annotations

import functools
import inspect
import warnings

from refimpl._state import STATE
from refimpl.autograd import _flags


def _wrap_generator(make_ctx, gen_fn):
    """Each resumption of the generator runs inside a fresh context from ``make_ctx``."""

    @functools.wraps(gen_fn)
    def generator(*args, **kwargs):
        gen = gen_fn(*args, **kwargs)
        try:
            with make_ctx():
                response = gen.send(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with make_ctx():
                        gen.close()
                    raise
                except BaseException as exc:  # noqa: BLE001 (thrown into the generator)
                    with make_ctx():
                        response = gen.throw(exc)
                else:
                    with make_ctx():
                        response = gen.send(request)
        except StopIteration as stop:
            return stop.value

    return generator


def _decorate(make_ctx, fn):
    if inspect.isgeneratorfunction(fn):
        return _wrap_generator(make_ctx, fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with make_ctx():
            return fn(*args, **kwargs)

    return wrapper


class _DecoratorContextManager:
    """A context manager that also decorates functions, generators (and, deprecated,
    classes)."""

    def __call__(self, fn):
        if inspect.isclass(fn):
            warnings.warn(
                "Decorating classes is deprecated and will be disabled in future versions. You "
                "should only decorate functions or methods. To preserve the current behavior of "
                "class decoration, you can directly decorate the `__init__` method and nothing "
                "else.", FutureWarning, stacklevel=2)
            cls = fn

            def fn(*args, **kwargs):
                return cls(*args, **kwargs)

        return _decorate(self.clone, fn)

    def clone(self):
        """A fresh manager with the same settings (one per decorated call)."""
        return self.__class__()


class _NoParamDecoratorContextManager(_DecoratorContextManager):
    """Usable as ``@mode`` as well as ``@mode()``."""

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class no_grad(_NoParamDecoratorContextManager):
    """Disable gradient recording inside the block."""

    def __init__(self) -> None:
        self.prev = False

    def __enter__(self) -> None:
        self.prev = STATE.grad_enabled
        STATE.grad_enabled = False

    def __exit__(self, *exc) -> None:
        STATE.grad_enabled = self.prev


class enable_grad(_NoParamDecoratorContextManager):
    """Enable gradient recording inside the block."""

    def __enter__(self) -> None:
        self.prev = STATE.grad_enabled
        STATE.grad_enabled = True

    def __exit__(self, *exc) -> None:
        STATE.grad_enabled = self.prev


class set_grad_enabled(_DecoratorContextManager):
    """Set grad mode now; restores the previous mode when used as a context manager."""

    def __init__(self, mode: bool) -> None:
        self.prev = STATE.grad_enabled
        self.mode = mode
        STATE.grad_enabled = bool(mode)

    def __call__(self, fn):
        STATE.grad_enabled = self.prev
        return super().__call__(fn)

    def __enter__(self) -> None:
        STATE.grad_enabled = bool(self.mode)

    def __exit__(self, *exc) -> None:
        STATE.grad_enabled = self.prev

    def clone(self):
        """A manager with the same mode."""
        return self.__class__(self.mode)

    def __repr__(self) -> str:
        return f"torch.autograd.grad_mode.set_grad_enabled(mode={self.mode})"


class inference_mode(_DecoratorContextManager):
    """Inference mode: no grad recording and tensors marked as inference tensors."""

    def __new__(cls, mode=True):
        if isinstance(mode, bool):
            return super().__new__(cls)
        return cls()(mode)

    def __init__(self, mode: bool = True) -> None:
        self.mode = mode

    def __enter__(self) -> None:
        self._prev = (STATE.grad_enabled, STATE.inference_mode)
        if self.mode:
            STATE.grad_enabled = False
        STATE.inference_mode = bool(self.mode)

    def __exit__(self, *exc) -> None:
        STATE.grad_enabled, STATE.inference_mode = self._prev

    def clone(self):
        """A manager with the same mode."""
        return self.__class__(self.mode)


class set_multithreading_enabled(_DecoratorContextManager):
    """Enable or disable multithreaded backward (a flag only: refimpl runs backward on
    the calling thread)."""

    def __init__(self, mode: bool) -> None:
        self.prev = _flags.multithreading_enabled
        self.mode = mode
        _flags.multithreading_enabled = bool(mode)

    def __enter__(self) -> None:
        """The mode took effect when the object was made; entering changes nothing."""

    def __exit__(self, *exc) -> None:
        _flags.multithreading_enabled = self.prev

    def clone(self):
        """A manager with the same mode."""
        return self.__class__(self.mode)


class _force_original_view_tracking(_DecoratorContextManager):
    """Whether regenerated view grad_fns replay the original view op (a flag only)."""

    def __init__(self, mode: bool) -> None:
        self.prev = _flags.view_replay_enabled
        self.mode = mode
        _flags.view_replay_enabled = bool(mode)

    def __enter__(self) -> None:
        _flags.view_replay_enabled = bool(self.mode)

    def __exit__(self, *exc) -> None:
        _flags.view_replay_enabled = self.prev

    def clone(self):
        """A manager with the same mode."""
        return self.__class__(self.mode)


def is_grad_enabled() -> bool:
    """Whether grad mode is on in this thread."""
    return STATE.grad_enabled


def is_inference_mode_enabled() -> bool:
    """Whether inference mode is on in this thread."""
    return STATE.inference_mode


def is_inference(input) -> bool:
    """Whether ``input`` is an inference tensor (made in inference mode, INFER-003)."""
    return input._is_inference


def is_multithreading_enabled() -> bool:
    """The flag set by ``set_multithreading_enabled``."""
    return _flags.multithreading_enabled


def is_view_replay_enabled() -> bool:
    """The flag set by ``_force_original_view_tracking``."""
    return _flags.view_replay_enabled
