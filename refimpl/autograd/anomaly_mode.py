"""Anomaly detection (spec: AUTOGRAD-ANOMALY-*).

While enabled:

* every node created records the Python stack of its forward call in
  ``node.metadata["traceback_"]``, and, when created while another node's backward is
  running (double backward, custom backward), that node in ``metadata["parent_"]``;
* when a node's backward raises, a warning shows the forward traceback of the node and
  of each parent ("Error detected in <name>. Traceback of forward call ...");
* with ``check_nan``, a node returning NaN raises "Function '<name>' returned nan
  values in its <i>th output.".
"""

from __future__ import annotations

import sys
import threading
import traceback
import warnings

from refimpl.autograd import _flags

__all__ = [
    "detect_anomaly",
    "is_anomaly_check_nan_enabled",
    "is_anomaly_enabled",
    "set_detect_anomaly",
]

_TRACE_KEY = "traceback_"
_PARENT_KEY = "parent_"


class _Current(threading.local):
    def __init__(self) -> None:
        self.node = None


_CURRENT = _Current()


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    """Switch anomaly detection (process-wide, as in torch)."""
    _flags.anomaly_enabled = bool(enabled)
    _flags.anomaly_check_nan = bool(check_nan)


def is_anomaly_enabled() -> bool:
    """Whether anomaly detection is on."""
    return _flags.anomaly_enabled


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly detection checks backward results for NaN."""
    return _flags.anomaly_check_nan


class detect_anomaly:
    """Context manager (and decorator) that enables anomaly detection in the block."""

    def __init__(self, check_nan: bool = True) -> None:
        self.prev = _flags.anomaly_enabled
        self.check_nan = check_nan
        self.prev_check_nan = _flags.anomaly_check_nan
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime "
                      "and should only be enabled for debugging.", stacklevel=2)

    def __enter__(self) -> None:
        set_anomaly_enabled(True, self.check_nan)

    def __exit__(self, *exc) -> None:
        set_anomaly_enabled(self.prev, self.prev_check_nan)

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(self.check_nan):
                return fn(*args, **kwargs)

        return wrapper


class set_detect_anomaly:
    """Set anomaly detection on or off now; restored on exit when used as a context."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self.prev = _flags.anomaly_enabled
        self.prev_check_nan = _flags.anomaly_check_nan
        set_anomaly_enabled(mode, check_nan)

    def __enter__(self) -> None:
        """The mode took effect when the object was made; entering changes nothing."""

    def __exit__(self, *exc) -> None:
        set_anomaly_enabled(self.prev, self.prev_check_nan)


def record_forward_trace(node) -> None:
    """Remember where ``node`` was created (and which backward node was running)."""
    meta = node.metadata
    meta[_TRACE_KEY] = traceback.format_stack()[:-3]
    parent = _CURRENT.node
    if parent is not None:
        meta[_PARENT_KEY] = parent


def _warn(msg: str) -> None:
    # like torch's warning handler: when warnings are turned into errors, the message
    # goes to stderr instead of replacing the error being reported
    try:
        warnings.warn(msg, stacklevel=5)
    except Warning:
        sys.stderr.write(f"UserWarning: {msg}\n")


def _print_stack(stack, name: str, is_parent: bool) -> None:
    if stack is None:
        _warn(f"Error detected in {name}. No forward pass information available. Enable "
              "detect anomaly during forward pass for more information.")
        return
    text = "".join(stack)
    if is_parent:
        _warn(f"\n\nPrevious calculation was induced by {name}. Traceback of forward call "
              f"that induced the previous calculation:\n{text}")
    else:
        _warn(f"Error detected in {name}. Traceback of forward call that caused the "
              f"error:\n{text}")


def print_stack(node) -> None:
    """Warn with the forward traceback of ``node`` and of its parents."""
    meta = node._metadata or {}
    _print_stack(meta.get(_TRACE_KEY), node.name(), False)
    parent = meta.get(_PARENT_KEY)
    while parent is not None:
        pmeta = parent._metadata or {}
        _print_stack(pmeta.get(_TRACE_KEY), parent.name(), True)
        parent = pmeta.get(_PARENT_KEY)


def apply_with_anomaly(node, inputs: list) -> list:
    """Apply ``node`` as the current node (nodes created meanwhile record it as parent)."""
    prev = _CURRENT.node
    _CURRENT.node = node
    try:
        return node._apply(inputs)
    finally:
        _CURRENT.node = prev


def check_nan(node, outputs) -> None:
    """With check_nan on: raise when a gradient ``node`` returned holds NaN."""
    if not _flags.anomaly_check_nan:
        return
    for i, g in enumerate(outputs):
        if g is not None and g.dtype.category >= 2 and bool(g.isnan().any()):
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th "
                               "output.")
