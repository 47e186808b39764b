"""``torch.autograd.profiler``: the legacy profiler API.

The implementation lives in ``refimpl.profiler`` (``_session`` and ``_events``); this
module gives it torch's import path: ``profile`` (``use_device``/``use_cuda``),
``record_function``, ``emit_nvtx`` and the event classes.
"""

from __future__ import annotations

from refimpl.profiler._events import EventList, FunctionEvent, FunctionEventAvg, format_time
from refimpl.profiler._session import (
    _profiler_enabled,
    emit_nvtx,
    profile,
    record_function,
)

__all__ = [
    "EventList",
    "FunctionEvent",
    "FunctionEventAvg",
    "_profiler_enabled",
    "emit_nvtx",
    "format_time",
    "profile",
    "record_function",
]
