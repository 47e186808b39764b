"""CUDA random-number generators: one Philox generator per device (spec CUDADEV-700..703).

They use the same counter-based Philox4x32-10 stream as the CPU generator
(``refimpl._random``), so a (seed, offset) pair names the same numbers on both sides.
Draws on a CUDA device run as kernels on that device (``_random_kernels``), each
launch reserving its counter blocks with ``CUDAGenerator.philox_launch_args``; the state
(``get_rng_state``: seed and offset, 16 bytes) therefore replays a run exactly.
Seeding before CUDA is initialised is queued, as torch does: only the latest
``manual_seed`` and the latest ``manual_seed_all`` are kept and replayed at init.

Graph-safe states (torch's CUDAGeneratorState). A CUDA generator draws from a
``CUDAGeneratorState`` that several generators may share (``graphsafe_get_state``,
``graphsafe_set_state``; ``clone_state`` copies one). A CUDA graph registers the
states it draws from (``CUDAGraph.register_generator_state``; the device's default
generator always): each registered state owns two one-element int64 device tensors,
its seed and its offset as the graph reads them. While a state captures, a kernel is
given the addresses of these tensors and its offset *within* the graph, and the
state counts the offsets the whole graph consumes; before each replay the tensors
are filled with the state's current seed and offset, and the offset advances by the
graph's total, so every replay draws fresh numbers, the ones eager calls would
have drawn from the same state.
"""

from __future__ import annotations

from typing import Any

from refimpl import _dtype as D
from refimpl._device import cuda_device
from refimpl._random import Generator
from refimpl._tensor import Tensor
from refimpl.cuda import _device, _driver, _tensor_ops, streams
from refimpl.cuda._lazy import _lazy_call, _lazy_init, is_initialized

_generators: dict[int, Generator] = {}
_MASK64 = (1 << 64) - 1


def _capturing(index: int | None) -> bool:
    """Whether the current stream of device ``index`` (the current device when None)
    is capturing a graph (torch's ``currentStreamCaptureStatus() != None``)."""
    if not is_initialized():
        return False
    if index is None:
        index = _device.current_device()
    handle = streams.current_stream(index).cuda_stream
    return _driver.stream_capture_info(index, handle)[0] != _driver.CAPTURE_STATUS_NONE


def _assert_not_capturing(index: int | None, attempt: str) -> None:
    if _capturing(index):
        raise RuntimeError(
            f"{attempt} during CUDA graph capture. If you need this call to be captured, "
            "please file an issue. Current cudaStreamCaptureStatus: "
            "cudaStreamCaptureStatusActive")


def _as_int64(value: int) -> int:
    """A 64-bit pattern as the signed value an int64 tensor stores."""
    value &= _MASK64
    return value - (1 << 64) if value >= 1 << 63 else value


class CUDAGeneratorState:
    """The (seed, offset) a CUDA generator draws from, made graph-safe (module doc).

    ``offset`` advances between launches outside capture; during a capture
    ``offset_intragraph`` counts the blocks the graph consumes. ``graphs`` holds the
    ids of the graphs this state is registered with; while it is not empty the state
    owns ``seed_extragraph`` and ``offset_extragraph``, the device tensors that
    captured kernels read.
    """

    def __init__(self, index: int | None, seed: int, offset: int) -> None:
        self.index = index
        self.seed, self.offset = seed, offset
        self.offset_intragraph = 0
        self.capturing = False
        self.graphs: set[int] = set()
        self.seed_extragraph: Tensor | None = None
        self.offset_extragraph: Tensor | None = None

    def clone(self) -> CUDAGeneratorState:
        """A state with the same seed and offsets, registered with no graph."""
        copy = CUDAGeneratorState(self.index, self.seed, self.offset)
        copy.offset_intragraph = self.offset_intragraph
        return copy

    def _device_index(self) -> int:
        return _device.current_device() if self.index is None else self.index

    def increase(self, increment: int, capturing: bool | None = None) -> int:
        """Reserve ``increment`` blocks (rounded up to a multiple of 4); returns the
        offset they start at (within the graph while the current stream captures)."""
        increment = -(-int(increment) // 4) * 4
        if capturing is None:
            capturing = _capturing(self.index)
        if capturing:
            if not self.capturing:
                raise RuntimeError(
                    "Attempt to increase offset for a CUDA generator not in capture mode.")
            start = self.offset_intragraph
            self.offset_intragraph += increment
            return start
        if self.capturing:
            raise RuntimeError("Offset increment outside graph capture encountered unexpectedly.")
        start = self.offset
        self.offset += increment
        return start

    def register_graph(self, graph: Any) -> None:
        """Note that ``graph`` draws from this state; the first graph allocates the
        device seed and offset."""
        _assert_not_capturing(self.index, "Cannot register the state during capturing stage.")
        if not self.graphs:
            dev = cuda_device(self._device_index())
            self.seed_extragraph = Tensor._empty((1,), D.int64, dev)
            self.offset_extragraph = Tensor._empty((1,), D.int64, dev)
        self.graphs.add(id(graph))

    def unregister_graph(self, graph: Any) -> None:
        """Forget ``graph``; the last one frees the device seed and offset."""
        if id(graph) not in self.graphs:
            raise RuntimeError("The graph should be registered to the state")
        self.graphs.discard(id(graph))
        if not self.graphs:
            self.seed_extragraph = self.offset_extragraph = None

    def _write_device_state(self, offset: int) -> None:
        _tensor_ops.fill_(self.seed_extragraph, _as_int64(self.seed))
        _tensor_ops.fill_(self.offset_extragraph, _as_int64(offset))

    def capture_prologue(self) -> None:
        """Start counting a capture's offsets (called before the capture begins)."""
        self.capturing = True
        self.offset_intragraph = 0
        self._write_device_state(0)

    def capture_epilogue(self) -> int:
        """Stop capturing; returns the offsets the whole graph consumes."""
        self.capturing = False
        return self.offset_intragraph

    def replay_prologue(self, increment: int) -> None:
        """Before a replay: write the current seed and offset where the graph reads
        them, then advance the offset past the graph's draws."""
        _assert_not_capturing(self.index, "Cannot prepare for replay during capturing stage.")
        if increment:
            self._write_device_state(self.offset)
            self.increase(increment, capturing=False)

    def launch_args(self, increment: int) -> tuple[int, int, int, int]:
        """The Philox arguments of one kernel launch reserving ``increment`` blocks:
        (seed, offset, seed address, offset address). Outside capture the addresses
        are 0 and (seed, offset) are the values; inside, the kernel reads the seed and
        adds ``offset`` to the offset at the two addresses."""
        capturing = _capturing(self.index)
        start = self.increase(increment, capturing)
        if not capturing:
            return self.seed, start, 0, 0
        seed_t, off_t = self.seed_extragraph, self.offset_extragraph
        return (self.seed, start, seed_t._storage._data.ptr + seed_t._offset * 8,
                off_t._storage._data.ptr + off_t._offset * 8)


class CUDAGenerator(Generator):
    """A CUDA device's generator (torch.Generator(device="cuda")): its seed and offset
    live in a ``CUDAGeneratorState`` that graph-safe generators share."""

    def __init__(self, device="cuda", state: CUDAGeneratorState | None = None) -> None:
        self._state = CUDAGeneratorState(None, 0, 0)
        super().__init__(device)
        self._state.index = self.device.index
        if state is not None:
            self._state = state

    @property
    def _seed(self) -> int:
        return self._state.seed

    @_seed.setter
    def _seed(self, value: int) -> None:
        self._state.seed = value

    @property
    def _offset(self) -> int:
        return self._state.offset

    @_offset.setter
    def _offset(self, value: int) -> None:
        self._state.offset = value

    def manual_seed(self, seed: int) -> Generator:
        """Seed and rewind; during a capture only the seed already in use is accepted."""
        if _capturing(self.device.index):
            if int(seed) & _MASK64 != self._state.seed:
                raise RuntimeError(
                    "CUDAGeneratorImpl::set_current_seed can be called during stream capture "
                    "only if new seed is the same as the original seed.")
            return self
        return super().manual_seed(seed)

    def get_offset(self) -> int:
        """The Philox offset (not during a capture)."""
        _assert_not_capturing(self.device.index, "Cannot call CUDAGeneratorImpl::get_offset")
        return super().get_offset()

    def set_offset(self, offset: int) -> Generator:
        """Move the Philox offset (not during a capture)."""
        _assert_not_capturing(self.device.index, "Cannot call CUDAGeneratorImpl::set_offset")
        return super().set_offset(offset)

    def philox_cuda_state(self, increment: int) -> tuple[int, int]:
        """Reserve the blocks of one launch: (seed, offset); inside a capture the
        offset is the one within the graph (kernels use ``philox_launch_args``)."""
        return self._state.seed, self._state.increase(increment)

    def philox_launch_args(self, increment: int) -> tuple[int, int, int, int]:
        """Reserve the blocks of one launch, graph-safe (``CUDAGeneratorState.launch_args``)."""
        return self._state.launch_args(increment)

    def graphsafe_get_state(self) -> CUDAGenerator:
        """A generator sharing this generator's state (register it with a graph)."""
        return CUDAGenerator(self.device, self._state)

    def graphsafe_set_state(self, state: Generator) -> CUDAGenerator:
        """Draw from ``state``'s state from now on (shared, not copied)."""
        if not isinstance(state, CUDAGenerator):
            raise RuntimeError("Expected a CUDA Generator")  # noqa: TRY004 (torch's type)
        self._state = state._state
        return self

    def clone_state(self) -> CUDAGenerator:
        """A generator with a copy of this generator's state."""
        return CUDAGenerator(self.device, self._state.clone())


def default_generator(index: int | None = None) -> Generator:
    """The default generator of a device (the current one by default)."""
    _lazy_init()
    if index is None:
        index = _device.current_device()
    gen = _generators.get(index)
    if gen is None:
        gen = _generators[index] = CUDAGenerator(f"cuda:{index}")
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
