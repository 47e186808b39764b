"""``torch.cuda.profiler``: switch an external CUDA profiler's collection on and off.

``start``/``stop`` are the driver's ``cuProfilerStart``/``cuProfilerStop``: with Nsight
Systems or Nsight Compute attached (``--capture-range=cudaProfilerApi``) they bound
what is collected; without one they succeed and do nothing. Both initialise CUDA
lazily, as torch's ``cudart()`` calls do.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ["profile", "start", "stop"]


def _profiler_call(name: str) -> None:
    from refimpl.cuda import _driver
    from refimpl.cuda._device import check_error
    from refimpl.cuda._lazy import _lazy_init

    _lazy_init()
    try:
        _driver._call(name)
    except _driver.CudaDriverError as exc:
        check_error(exc.code)


def start() -> None:
    """Start the attached CUDA profiler's data collection (raises CudaError on failure)."""
    _profiler_call("cuProfilerStart")


def stop() -> None:
    """Stop the attached CUDA profiler's data collection (raises CudaError on failure)."""
    _profiler_call("cuProfilerStop")


@contextlib.contextmanager
def profile() -> Iterator[None]:
    """Collect with the attached CUDA profiler for the duration of the block."""
    try:
        start()
        yield
    finally:
        stop()
