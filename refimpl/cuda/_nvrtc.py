"""Compile CUDA C with NVRTC, cache the result on disk, load it per device.

A kernel is identified by its source text. :func:`get_function` compiles the source
for the device's architecture, keeps the image on disk and the loaded module and
function handles in memory, so a kernel is compiled once per machine and loaded once
per process and device.

* Target: a cubin for ``sm_XY`` when this NVRTC supports the device's compute
  capability; otherwise PTX for the newest supported ``compute_XY`` not above it,
  which the driver compiles at load time.
* Disk cache: ``$TENSORCTL_CACHE_DIR`` or ``~/.cache/tensorctl/kernels``; one file per
  image, named by the SHA-256 of (source, options, target, NVRTC version). Files are
  written to a temporary name and renamed, so concurrent processes never read a
  partial image. An unwritable cache directory only disables the disk cache.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from pathlib import Path

from refimpl.cuda import _driver

# -default-device: functions without an execution space are device functions (what
# NVRTC compiles anyway; user code given to the jiterator is written without one)
_OPTIONS = ("--std=c++17", "-default-device")
_lock = threading.Lock()
_modules: dict[tuple[str, int], int] = {}
_functions: dict[tuple[str, int, str], int] = {}
_targets: dict[int, tuple[str, bool]] = {}


def cache_dir() -> Path:
    """Where compiled images are kept (``$TENSORCTL_CACHE_DIR`` wins)."""
    env = os.environ.get("TENSORCTL_CACHE_DIR")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "tensorctl" / "kernels"


def target(device: int) -> tuple[str, bool]:
    """(``--gpu-architecture`` value, is_cubin) for a device."""
    cached = _targets.get(device)
    if cached is not None:
        return cached
    cc = (_driver.device_attribute(device, "COMPUTE_CAPABILITY_MAJOR") * 10
          + _driver.device_attribute(device, "COMPUTE_CAPABILITY_MINOR"))
    supported = _driver.nvrtc_supported_archs()
    if cc in supported:
        result = (f"sm_{cc}", True)
    else:
        lower = [a for a in supported if a <= cc]
        if not lower:
            raise RuntimeError(
                f"NVRTC {_driver.nvrtc_version()} cannot target compute capability "
                f"{cc // 10}.{cc % 10} (supported: {supported})")
        result = (f"compute_{max(lower)}", False)
    _targets[device] = result
    return result


def _cache_key(source: str, arch: str, options: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for part in (source, arch, " ".join(options), repr(_driver.nvrtc_version())):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _read_cache(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _write_cache(path: Path, image: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(image)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        return  # a read-only or full cache directory only costs a recompile next time


def compile_source(source: str, device: int, name: str = "kernel.cu") -> tuple[str, bytes]:
    """(cache key, image) of ``source`` for ``device``, compiled or read from disk."""
    arch, is_cubin = target(device)
    key = _cache_key(source, arch, _OPTIONS)
    path = cache_dir() / f"{key}.{'cubin' if is_cubin else 'ptx'}"
    image = _read_cache(path)
    if image is None:
        options = [*_OPTIONS, f"--gpu-architecture={arch}"]
        image = _driver.nvrtc_compile(source, name, options, cubin=is_cubin)
        _write_cache(path, image)
    return key, image


def get_function(source: str, kernel: str, device: int) -> int:
    """A launchable function handle for ``kernel`` (extern "C") in ``source``."""
    fkey = (source, device, kernel)
    fn = _functions.get(fkey)
    if fn is not None:
        return fn
    with _lock:
        fn = _functions.get(fkey)
        if fn is not None:
            return fn
        key, image = compile_source(source, device)
        module = _modules.get((key, device))
        if module is None:
            module = _driver.module_load(device, image)
            _modules[(key, device)] = module
        fn = _driver.module_function(module, kernel)
        _functions[fkey] = fn
        return fn
