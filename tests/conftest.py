"""What the unit tests share: compiling CUDA source with NVRTC where no GPU exists."""

from __future__ import annotations

import pytest


@pytest.fixture
def nvrtc_compile():
    """``nvrtc_compile(source, name, arch="sm_90", cubin=True) -> bytes``: the source
    compiled by NVRTC with refimpl's options (a cubin, or PTX with ``cubin=False``);
    the test is skipped where the bindings or the NVRTC library are missing."""
    from refimpl.cuda import _driver, _nvrtc

    try:
        _driver.nvrtc_version()
    except (ImportError, RuntimeError) as exc:  # no bindings or no NVRTC library here
        pytest.skip(f"NVRTC unavailable: {exc}")

    def compile_(source: str, name: str, arch: str = "sm_90", cubin: bool = True) -> bytes:
        return _driver.nvrtc_compile(source, name,
                                     [*_nvrtc._OPTIONS, f"--gpu-architecture={arch}"],
                                     cubin=cubin)
    return compile_
