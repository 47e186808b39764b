"""Imported once by the worker pool's fork server, before any worker is forked.

It imports the target named in ``TENSORCTL_PRELOAD_TARGET`` so that every worker
starts with the target already imported (one import per run instead of one per
worker). Any failure is ignored here: each worker imports the target again (a
no-op when the preload worked) and reports a failure itself, as one line. Only
targets known to be safe to fork after import (no threads, no GPU context at
import time) are preloaded; see ``Adapter.preload`` in ``conformance/targets.py``.
"""

from __future__ import annotations

import importlib
import os

PRELOAD_ENV = "TENSORCTL_PRELOAD_TARGET"

_name = os.environ.get(PRELOAD_ENV)
if _name:
    try:
        importlib.import_module(_name)
    except (Exception, SystemExit):  # noqa: BLE001, S110 - the worker reports it
        pass
