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


STATE = _ThreadState()
