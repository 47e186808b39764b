"""``refimpl.backends.cudnn``: cuDNN's flags (refimpl has no cuDNN; the flags are state)."""

from __future__ import annotations

import contextlib
import sys

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    """refimpl has no cuDNN."""
    return False


def version() -> None:
    """No cuDNN: None, as torch reports without it."""
    return


@contextlib.contextmanager
def flags(enabled=False, benchmark=False, benchmark_limit=10, deterministic=False,
          allow_tf32=True):
    """Set the flags inside the block (None leaves one unchanged); restore them after."""
    module = sys.modules[__name__]
    names = ("enabled", "benchmark", "deterministic", "allow_tf32")
    saved = {n: getattr(module, n) for n in names}
    for name, value in zip(names, (enabled, benchmark, deterministic, allow_tf32)):
        if value is not None:
            setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)
