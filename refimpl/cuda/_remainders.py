"""Small entries of ``torch.cuda``: device parsing, generator access, build checks.

* ``_get_device`` / ``_get_generator`` / ``_get_rng_state_offset`` /
  ``_set_rng_state_offset`` / ``default_generators``: the per-device Philox generators
  of ``refimpl.cuda.random`` reached the way torch's helpers reach them;
* ``_extract_arch_version``, ``_check_capability``, ``_check_cubins``: torch checks that
  its prebuilt kernels fit the GPUs. refimpl builds every kernel at run time with NVRTC,
  so "the build's architectures" are NVRTC's targets (``get_arch_list``), and the checks
  warn when a device's compute capability is not among them;
* ``_is_compiled`` (refimpl can drive CUDA whenever the CUDA Python bindings import),
  ``has_magma`` (False: refimpl links no MAGMA), ``_check_bf16_tensor_supported``,
  ``_set_stream_by_id``.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

from refimpl._device import as_device
from refimpl._device import device as _Device
from refimpl.cuda import _device, random
from refimpl.cuda._lazy import _lazy_call, _lazy_init

has_magma = False  # refimpl's linear algebra uses no MAGMA


def _is_compiled() -> bool:
    """Whether refimpl can drive CUDA at all (the CUDA Python driver bindings import)."""
    try:
        from refimpl.cuda import _driver  # noqa: F401  (only the import is tested)
    except ImportError:
        return False
    return True


def _extract_arch_version(arch_string: str) -> int:
    """``sm_86`` -> 86, ``sm_90a`` -> 90: the number of an ``sm_``/``compute_`` target."""
    base = arch_string.split("_")[1]
    base = base.removesuffix("a").removesuffix("f")
    return int(base)


def _get_device(device: int | str | _Device) -> _Device:
    """A device object from an index (a CUDA device), a string or a device."""
    if isinstance(device, str):
        return as_device(device)
    if isinstance(device, int):
        return as_device(f"cuda:{device}")
    return device


def _get_generator(device: _Device):
    """The default generator of a CUDA device (the current one when unindexed)."""
    index = device.index if device.index is not None else _device.current_device()
    return random.default_generator(index)


def _get_rng_state_offset(device: int | str | _Device = "cuda") -> int:
    """The Philox offset of a device's generator (initialises CUDA)."""
    _lazy_init()
    return _get_generator(_get_device(device)).get_offset()


def _set_rng_state_offset(offset: int, device: int | str | _Device = "cuda") -> None:
    """Set the Philox offset of a device's generator (queued until CUDA initialises)."""
    final = _get_device(device)

    def cb() -> None:
        _get_generator(final).set_offset(offset)

    _lazy_call(cb)


def default_generators() -> tuple:
    """One default generator per visible device (empty where no device is visible)."""
    count = _device.device_count()
    return tuple(random.default_generator(i) for i in range(count)) if count else ()


@functools.lru_cache(maxsize=16)
def _check_bf16_tensor_supported(device: Any) -> bool:
    """Whether a bfloat16 tensor can be made on ``device``."""
    import refimpl

    try:
        refimpl.tensor([1.0], dtype=refimpl.bfloat16, device=device)
    except Exception:  # noqa: BLE001 (any failure means "not supported", as torch answers)
        return False
    return True


def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
    """Make the stream named by (stream_id, device_index, device_type) current."""
    from refimpl.cuda import streams

    streams.set_stream(streams.Stream(stream_id=stream_id, device_index=device_index,
                                      device_type=device_type))


def _device_ccs() -> list[tuple[int, int, str]]:
    out = []
    for d in range(_device.device_count()):
        major, minor = _device.get_device_capability(d)
        out.append((d, 10 * major + minor, _device.get_device_name(d)))
    return out


def _check_capability() -> None:
    """Warn for a GPU whose compute capability NVRTC cannot compile kernels for."""
    arch_list = _device.get_arch_list()
    if not arch_list:
        return
    code_ccs = [_extract_arch_version(a) for a in arch_list]
    for d, cc, name in _device_ccs():
        if cc not in code_ccs:
            warnings.warn(
                f"Found GPU{d} {name} which is of compute capability (CC) "
                f"{cc // 10}.{cc % 10}. The NVRTC refimpl compiles its kernels with targets "
                f"CCs {', '.join(f'{c // 10}.{c % 10}' for c in code_ccs)}.",
                stacklevel=2,
            )


def _check_cubins() -> None:
    """Warn, in torch's words, for a GPU no target of the same major version covers."""
    arch_list = _device.get_arch_list()
    if not arch_list:
        return
    majors = {_extract_arch_version(a) // 10 for a in arch_list if "sm_" in a}
    for _d, cc, name in _device_ccs():
        if cc // 10 not in majors:
            warnings.warn(
                f"\n{name} with CUDA capability sm_{cc} is not compatible with the current "
                f"PyTorch installation.\nThe current PyTorch install supports CUDA "
                f"capabilities {' '.join(arch_list)}.\nIf you want to use the {name} GPU "
                "with PyTorch, please check the instructions at "
                "https://pytorch.org/get-started/locally/\n",
                stacklevel=2,
            )
