"""``refimpl.nn.parallel``: single-process data parallelism over the visible GPUs."""

from __future__ import annotations

from refimpl.nn.parallel.data_parallel import DataParallel, data_parallel

__all__ = ["DataParallel", "data_parallel"]
