"""TunableOp settings (``torch.cuda.tunable``): off by default, and off is a no-op.

torch's TunableOp times alternative GEMM implementations and keeps the fastest.
refimpl does not implement that selection: the settings can be read and set, and
while TunableOp is disabled (the default) nothing else happens; turning it on raises
``NotImplementedError`` rather than pretending to tune.
"""

from __future__ import annotations

import os

__all__ = [
    "enable",
    "get_filename",
    "get_max_tuning_duration",
    "get_max_tuning_iterations",
    "is_enabled",
    "record_untuned_enable",
    "record_untuned_is_enabled",
    "set_filename",
    "set_max_tuning_duration",
    "set_max_tuning_iterations",
    "tuning_enable",
    "tuning_is_enabled",
]

_MISSING = "refimpl does not implement TunableOp (GEMM algorithm selection)"

_settings = {
    "enabled": False,
    "tuning": True,
    "record_untuned": False,
    "max_tuning_duration_ms": 30,
    "max_tuning_iterations": 100,
    "filename": os.environ.get("PYTORCH_TUNABLEOP_FILENAME", "tunableop_results.csv"),
}


def enable(val: bool = True) -> None:
    """Turn TunableOp on or off; on is not implemented in refimpl."""
    if val:
        raise NotImplementedError(_MISSING)
    _settings["enabled"] = False


def is_enabled() -> bool:
    """Whether TunableOp is on (always False in refimpl)."""
    return _settings["enabled"]


def tuning_enable(val: bool = True) -> None:
    """Allow or forbid tuning of new shapes (takes effect only while TunableOp is on)."""
    _settings["tuning"] = bool(val)


def tuning_is_enabled() -> bool:
    """Whether tuning of new shapes is allowed."""
    return _settings["tuning"]


def record_untuned_enable(val: bool = True) -> None:
    """Record untuned GEMMs to a file; recording is part of TunableOp, not implemented."""
    if val:
        raise NotImplementedError(_MISSING)
    _settings["record_untuned"] = False


def record_untuned_is_enabled() -> bool:
    """Whether untuned GEMMs are recorded (always False in refimpl)."""
    return _settings["record_untuned"]


def set_max_tuning_duration(duration: int) -> None:
    """Milliseconds of tuning allowed per GEMM."""
    _settings["max_tuning_duration_ms"] = int(duration)


def get_max_tuning_duration() -> int:
    """Milliseconds of tuning allowed per GEMM."""
    return _settings["max_tuning_duration_ms"]


def set_max_tuning_iterations(iterations: int) -> None:
    """Iterations of tuning allowed per GEMM."""
    _settings["max_tuning_iterations"] = int(iterations)


def get_max_tuning_iterations() -> int:
    """Iterations of tuning allowed per GEMM."""
    return _settings["max_tuning_iterations"]


def set_filename(filename: str, insert_device_ordinal: bool = False) -> None:
    """The results file name (``insert_device_ordinal`` adds the device index)."""
    if insert_device_ordinal:
        root, ext = os.path.splitext(filename)
        filename = f"{root}%d{ext}"
    _settings["filename"] = filename


def get_filename() -> str:
    """The results file name."""
    return _settings["filename"]


def __getattr__(name: str):
    # the rest of torch's surface (results files, offline tuning) belongs to TunableOp
    if name in ("get_results", "get_validators", "write_file", "read_file",
                "write_file_on_exit", "tune_gemm_in_file", "mgpu_tune_gemm_in_file",
                "set_rotating_buffer_size", "get_rotating_buffer_size",
                "set_numerical_check_tolerances"):
        raise NotImplementedError(f"{_MISSING}: tunable.{name}")
    raise AttributeError(f"module 'refimpl.cuda.tunable' has no attribute '{name}'")
