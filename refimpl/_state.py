"""Thread-local runtime state read by the dispatcher on every call.

Grad mode, inference mode and forward-grad mode are per thread, as in torch; the
context managers that change them live in ``refimpl.autograd.grad_mode``.
"""

from __future__ import annotations

import threading


class _ThreadState(threading.local):
    def __init__(self) -> None:
        self.grad_enabled = True
        self.inference_mode = False
        self.fw_grad_enabled = True
        # objects stashed with _C._stash_obj_in_tls: this thread's, and carried by
        # reference into the autograd engine's device threads
        self.stash: dict = {}


STATE = _ThreadState()


class _ForwardLevels:
    """Forward-AD levels (spec FWDAD-001..003). Process-wide, as in torch: a level entered
    on one thread is seen by all. ``active`` is what the dispatcher reads on every op
    (one attribute load when no level exists); refimpl.autograd.forward_ad owns it."""

    def __init__(self) -> None:
        self.active = False
        self.level = -1
        self.duals: list = []  # weak references to the tensors holding a tangent


FW = _ForwardLevels()
