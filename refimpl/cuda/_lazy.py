"""Lazy CUDA initialisation, queued calls and bad-fork detection (CUDADEV-001..010).

Importing refimpl never touches the driver. The first "eager" API (``current_device``,
``current_stream``, ``get_device_properties``, ...) calls :func:`_lazy_init`, which:

1. returns at once when already initialised, or when this thread is running the queued
   calls of an initialisation in progress (queued calls may call eager APIs);
2. takes the initialisation lock and checks again (double-checked locking);
3. refuses in a forked child of a process that had touched the driver:
   ``RuntimeError("Cannot re-initialize CUDA in forked subprocess. To use CUDA with
   multiprocessing, you must use the 'spawn' start method")``;
4. refuses when ``cuda.bindings`` cannot be imported (refimpl's "not compiled with
   CUDA"): ``AssertionError("Torch not compiled with CUDA enabled")``;
5. sets ``CUDA_MODULE_LOADING=LAZY`` when unset, then initialises the driver; the
   errors are torch's: ``"Found no NVIDIA driver on your system. ..."``, ``"No CUDA
   GPUs are available"``, ``"Unexpected error from cudaGetDeviceCount(). ..."``;
6. runs the init hooks (the allocator's segment source, for instance), then the queued
   calls, the latest queued ``manual_seed``/``manual_seed_all`` last. A failing queued
   call raises :class:`DeferredCudaCallError` ("CUDA call failed lazily at
   initialization with error: ...", followed by the stack of the original call); the
   queue is kept and initialisation is not marked done, so the next call retries.

Fork poisoning: the first call that touches the driver (``is_available``'s driver
probe, the driver fallback of ``device_count``, ``_lazy_init``) registers an
``os.register_at_fork`` child handler; in the child ``_is_in_bad_fork()`` is True and
``is_initialized()`` is False. As in torch, probing without a driver poisons too.
"""

from __future__ import annotations

import os
import threading
import traceback
from collections.abc import Callable

from refimpl.cuda import _driver

_initialized = False
_tls = threading.local()
_initialization_lock = threading.Lock()
_queued_calls: list[tuple[Callable[[], object], list[str]]] = []
_init_hooks: list[Callable[[], object]] = []

_in_bad_fork = False
_fork_handler_installed = False
_fork_lock = threading.Lock()

NO_GPUS_MESSAGE = "No CUDA GPUs are available"
BAD_FORK_MESSAGE = (
    "Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, "
    "you must use the 'spawn' start method"
)


class DeferredCudaCallError(Exception):
    """A call queued with :func:`_lazy_call` failed when CUDA was initialised."""


class _LazySeedTracker:
    """Keeps only the latest ``manual_seed`` and ``manual_seed_all`` and their order."""

    def __init__(self) -> None:
        self.manual_seed_all_cb: tuple[Callable[[], object], list[str]] | None = None
        self.manual_seed_cb: tuple[Callable[[], object], list[str]] | None = None
        self.call_order: list[tuple[Callable[[], object], list[str]]] = []

    def queue_seed_all(self, cb: Callable[[], object], tb: list[str]) -> None:
        self.manual_seed_all_cb = (cb, tb)
        self.call_order = [self.manual_seed_cb, self.manual_seed_all_cb]  # type: ignore[list-item]

    def queue_seed(self, cb: Callable[[], object], tb: list[str]) -> None:
        self.manual_seed_cb = (cb, tb)
        self.call_order = [self.manual_seed_all_cb, self.manual_seed_cb]  # type: ignore[list-item]

    def get_calls(self) -> list[tuple[Callable[[], object], list[str]] | None]:
        return list(self.call_order)


_lazy_seed_tracker = _LazySeedTracker()


def _after_fork_in_child() -> None:
    global _in_bad_fork
    _in_bad_fork = True
    _driver.reset_after_fork()


def _poison_fork() -> None:
    """Install the fork handler that marks a child as a bad fork (once per process)."""
    global _fork_handler_installed
    if _fork_handler_installed:
        return
    with _fork_lock:
        if not _fork_handler_installed:
            os.register_at_fork(after_in_child=_after_fork_in_child)
            _fork_handler_installed = True


def _is_in_bad_fork() -> bool:
    """True in a forked child of a process that had touched the CUDA driver."""
    return _in_bad_fork


def is_initialized() -> bool:
    """Whether refimpl's CUDA state has been initialised (False in a bad fork)."""
    return _initialized and not _in_bad_fork


def _is_initializing() -> bool:
    return hasattr(_tls, "is_initializing")


def _lazy_call(callable: Callable[[], object], **kwargs: bool) -> None:
    """Run ``callable`` now if CUDA is initialised, else queue it for initialisation.

    ``seed=True``/``seed_all=True`` queue through the seed tracker, which keeps only the
    latest of each kind.
    """
    with _initialization_lock:
        if is_initialized():
            callable()
            return
        stack = traceback.format_stack()
        if kwargs.get("seed_all", False):
            _lazy_seed_tracker.queue_seed_all(callable, stack)
        elif kwargs.get("seed", False):
            _lazy_seed_tracker.queue_seed(callable, stack)
        else:
            _queued_calls.append((callable, stack))


def register_init_hook(fn: Callable[[], object]) -> None:
    """Run ``fn`` during initialisation, after the driver and before queued calls.

    If CUDA is already initialised, ``fn`` runs at once.
    """
    with _initialization_lock:
        _init_hooks.append(fn)
        run_now = is_initialized()
    if run_now:
        fn()


def _device_count_impl(fail_if_no_driver: bool) -> int:
    """The driver's device count, with torch's errors (c10 ``device_count_impl``).

    No GPU (``CUDA_ERROR_NO_DEVICE``) is a count of 0; no driver is 0 too unless
    ``fail_if_no_driver``; any other failure raises a RuntimeError with torch's text.
    """
    _poison_fork()
    try:
        _driver.init()
        return _driver.device_count()
    except _driver.DriverNotFoundError:
        if fail_if_no_driver:
            raise RuntimeError(_driver.NO_DRIVER_MESSAGE) from None
        return 0
    except _driver.CudaDriverError as exc:
        if exc.code == _driver.CUDA_ERROR_NO_DEVICE:
            return 0
        if exc.code == _driver.CUDA_ERROR_NOT_INITIALIZED:
            msg = "CUDA driver initialization failed, you might not have a CUDA gpu."
        elif exc.code == 999:
            msg = ("CUDA unknown error - this may be due to an incorrectly set up "
                   "environment, e.g. changing env variable CUDA_VISIBLE_DEVICES after "
                   "program start. Setting the available devices to be zero.")
        else:
            msg = ("Unexpected error from cudaGetDeviceCount(). Did you run some cuda "
                   "functions before calling NumCudaDevices() that might have already set "
                   f"an error? Error {exc.code}: {_driver.runtime_error_string(exc.code)}")
        raise RuntimeError(msg) from None


def _cuda_init() -> None:
    """The driver part of initialisation; raises torch's RuntimeErrors."""
    if _device_count_impl(fail_if_no_driver=True) <= 0:
        raise RuntimeError(NO_GPUS_MESSAGE)


def _lazy_init() -> None:
    """Initialise CUDA once per process (see the module docstring for the steps)."""
    global _initialized
    if is_initialized() or _is_initializing():
        return
    with _initialization_lock:
        if is_initialized():
            return
        if _in_bad_fork:
            raise RuntimeError(BAD_FORK_MESSAGE)
        if not _driver.bindings_available():
            raise AssertionError("Torch not compiled with CUDA enabled")
        os.environ.setdefault("CUDA_MODULE_LOADING", "LAZY")
        _cuda_init()
        _tls.is_initializing = True
        _queued_calls.extend(c for c in _lazy_seed_tracker.get_calls() if c)
        _lazy_seed_tracker.__init__()
        try:
            for hook in _init_hooks:
                hook()
            for queued_call, orig_traceback in _queued_calls:
                try:
                    queued_call()
                except Exception as e:
                    msg = (
                        f"CUDA call failed lazily at initialization with error: {e!s}\n\n"
                        f"CUDA call was originally invoked at:\n\n{''.join(orig_traceback)}"
                    )
                    raise DeferredCudaCallError(msg) from e
        finally:
            delattr(_tls, "is_initializing")
        _queued_calls.clear()
        _initialized = True
