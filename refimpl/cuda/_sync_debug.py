"""Sync debug mode: warn or raise when the host waits for a CUDA stream (spec CUDADEV-403).

One process-wide level, as in torch: 0 (``"default"``) checks nothing, 1 (``"warn"``)
emits ``UserWarning: called a synchronizing CUDA operation``, 2 (``"error"``) raises
RuntimeError with the same text before the host waits.

:func:`check` runs where torch runs its check, and only there:

* a blocking copy between host and device (``.item()``, ``.tolist()``, ``.cpu()``,
  ``.cuda()``, a blocking ``copy_``): :func:`check_copy`; a non-blocking copy is not
  checked, whether its host side is pinned or not (torch queues both without a check);
* a stream synchronization: ``Stream.synchronize()``, and the ops whose output size is
  read back to the host (``nonzero``, boolean-mask indexing, ``masked_select``,
  ``unique``, ``repeat_interleave`` without ``output_size``).

``torch.cuda.synchronize()`` and ``Event.synchronize()`` wait too, but torch does not
check them, so neither does refimpl.
"""

from __future__ import annotations

import numbers
import warnings

MESSAGE = "called a synchronizing CUDA operation"
_PROTOTYPE = (
    "Synchronization debug mode is a prototype feature and does not yet detect all "
    "synchronizing operations"
)
_MODES = {"default": 0, "warn": 1, "error": 2}

_mode = 0
_prototype_warned = False


def set_mode(debug_mode: int | str) -> None:
    """Set the level from ``"default"``/``"warn"``/``"error"`` or 0/1/2 (torch's checks)."""
    global _mode
    if isinstance(debug_mode, str):
        if debug_mode not in _MODES:
            raise RuntimeError(
                "invalid value of debug_mode, expected one of `default`, `warn`, `error`")
        debug_mode = _MODES[debug_mode]
    _warn_prototype()
    if isinstance(debug_mode, bool) or not isinstance(debug_mode, numbers.Integral):
        raise RuntimeError("invalid argument to set_sync_debug_mode")  # noqa: TRY004 - torch's
    if not 0 <= int(debug_mode) <= 2:
        raise RuntimeError("invalid value of debug_mode, expected one of 0,1,2")
    _mode = int(debug_mode)


def get_mode() -> int:
    """The current level (0, 1 or 2)."""
    return _mode


def check() -> None:
    """Called just before the host waits for the device: warn or raise per the level."""
    if _mode == 0:
        return
    if _mode == 2:
        raise RuntimeError(MESSAGE)
    warnings.warn(MESSAGE, UserWarning, stacklevel=3)


def check_copy(non_blocking: bool) -> None:
    """A copy between host and device: checked when it blocks."""
    if not non_blocking:
        check()


def _warn_prototype() -> None:
    """torch warns once per process (every time under ``set_warn_always(True)``)."""
    global _prototype_warned
    import refimpl

    if _prototype_warned and not refimpl.is_warn_always_enabled():
        return
    _prototype_warned = True
    warnings.warn(_PROTOTYPE, UserWarning, stacklevel=3)
