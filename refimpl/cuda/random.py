"""CUDA random-number generators: one Philox generator per device (spec CUDADEV-700..703).

They use the same counter-based Philox4x32-10 stream as the CPU generator
(``refimpl._random``), so a (seed, offset) pair names the same numbers on both sides.
Draws on a CUDA device run as kernels on that device (``_random_kernels``), each
launch reserving its counter blocks with ``Generator.philox_cuda_state``; the state
(``get_rng_state``: seed and offset, 16 bytes) therefore replays a run exactly.
Seeding before CUDA is initialised is queued, as torch does: only the latest
``manual_seed`` and the latest ``manual_seed_all`` are kept and replayed at init.
"""

from __future__ import annotations

from refimpl._random import Generator
from refimpl.cuda import _device
from refimpl.cuda._lazy import _lazy_call, _lazy_init

_generators: dict[int, Generator] = {}


def default_generator(index: int | None = None) -> Generator:
    """The default generator of a device (the current one by default)."""
    _lazy_init()
    if index is None:
        index = _device.current_device()
    gen = _generators.get(index)
    if gen is None:
        gen = _generators[index] = Generator(f"cuda:{index}")
    return gen


def _index(device) -> int:
    if device is None or device == "cuda":
        return _device.current_device()
    return _device._get_device_index(device, optional=True)


def manual_seed(seed: int) -> None:
    """Seed the current device's generator (queued until CUDA is initialised)."""
    seed = int(seed)

    def cb() -> None:
        default_generator(_device.current_device()).manual_seed(seed)

    _lazy_call(cb, seed=True)


def manual_seed_all(seed: int) -> None:
    """Seed every device's generator (queued until CUDA is initialised)."""
    seed = int(seed)

    def cb() -> None:
        for i in range(_device.device_count()):
            default_generator(i).manual_seed(seed)

    _lazy_call(cb, seed_all=True)


def seed() -> None:
    """Seed the current device's generator non-deterministically."""
    _lazy_call(lambda: default_generator().seed())


def seed_all() -> None:
    """Seed every device from one non-deterministic seed."""

    def cb() -> None:
        s = default_generator(0).seed()
        for i in range(1, _device.device_count()):
            default_generator(i).manual_seed(s)

    _lazy_call(cb)


def initial_seed() -> int:
    """The current device's generator's seed (initialises CUDA)."""
    return default_generator().initial_seed()


def get_rng_state(device="cuda"):
    """A device generator's state as a uint8 CPU tensor."""
    return default_generator(_index(device)).get_state()


def get_rng_state_all() -> list:
    """The states of all devices' generators."""
    return [get_rng_state(i) for i in range(_device.device_count())]


def set_rng_state(new_state, device="cuda") -> None:
    """Restore a device generator's state."""
    state = new_state.clone()
    _lazy_call(lambda: default_generator(_index(device)).set_state(state))


def set_rng_state_all(new_states) -> None:
    """Restore every device generator's state."""
    for i, state in enumerate(new_states):
        set_rng_state(state, i)
