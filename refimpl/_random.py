"""Random numbers: a counter-based Philox4x32-10 generator (spec: TENSOR-700 and following).

A ``Generator`` is (seed, offset). Every draw of n 32-bit words consumes the counter
range [offset, offset + ceil(n/4)) of Philox4x32-10 keyed by the seed, then advances
the offset. Being counter-based, the same stream can be produced by a CUDA kernel
from the same (seed, offset) without sharing state, which is why refimpl uses it.
The numbers are refimpl's own: torch's CPU generator (mt19937) draws other values,
so conformance cases never compare random values across targets. CUDA kernels
(``refimpl.cuda._random_kernels``) compute the same stream on the device: with equal
states, a CPU and a CUDA generator give the same values.
"""

from __future__ import annotations

import os

import numpy as np

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint32(0x9E3779B9), np.uint32(0xBB67AE85)
_MASK = np.uint64(0xFFFFFFFF)
_DEFAULT_SEED = 67280421310721


def philox4x32(counter_lo: np.ndarray, counter_hi: np.ndarray, key: int) -> np.ndarray:
    """Philox4x32-10 on 64-bit counters (lo, hi) and a 64-bit key: 4 words per counter.

    Returns an array of shape (len(counter), 4) of uint32.
    """
    c0 = (counter_lo & _MASK).astype(np.uint32)
    c1 = (counter_lo >> np.uint64(32)).astype(np.uint32)
    c2 = (counter_hi & _MASK).astype(np.uint32)
    c3 = (counter_hi >> np.uint64(32)).astype(np.uint32)
    k0 = np.uint32(key & 0xFFFFFFFF)
    k1 = np.uint32((key >> 32) & 0xFFFFFFFF)
    with np.errstate(over="ignore"):
        for _ in range(10):
            p0 = c0.astype(np.uint64) * _M0
            p1 = c2.astype(np.uint64) * _M1
            hi0 = (p0 >> np.uint64(32)).astype(np.uint32)
            lo0 = (p0 & _MASK).astype(np.uint32)
            hi1 = (p1 >> np.uint64(32)).astype(np.uint32)
            lo1 = (p1 & _MASK).astype(np.uint32)
            c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
            k0 = np.uint32(k0 + _W0)
            k1 = np.uint32(k1 + _W1)
    return np.stack([c0, c1, c2, c3], axis=-1)


class Generator:
    """A random number generator: ``manual_seed``, ``seed``, ``get_state``/``set_state``."""

    def __new__(cls, device="cpu", *args, **kwargs):
        # a CUDA device gets the CUDA generator (graph-safe states, refimpl.cuda.random)
        if cls is Generator and "cuda" in str(device):
            from refimpl._device import as_device

            if as_device(device).type == "cuda":
                from refimpl.cuda.random import CUDAGenerator

                return super().__new__(CUDAGenerator)
        return super().__new__(cls)

    def __init__(self, device="cpu") -> None:
        from refimpl._device import as_device

        self.device = as_device(device)
        self._seed = _DEFAULT_SEED
        self._offset = 0

    def manual_seed(self, seed: int) -> Generator:
        """Seed the generator and rewind its stream; returns self."""
        seed = int(seed)
        if seed < -0x8000_0000_0000_0000 or seed > 0xFFFF_FFFF_FFFF_FFFF:
            raise RuntimeError(
                "Overflow when unpacking long long" if seed > 0 else
                "Overflow when unpacking long"
            )
        self._seed = seed & 0xFFFF_FFFF_FFFF_FFFF
        self._offset = 0
        return self

    def seed(self) -> int:
        """Seed from a non-deterministic source; returns the new seed."""
        s = int.from_bytes(os.urandom(8), "little") & 0x7FFF_FFFF_FFFF_FFFF
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        """The seed the generator was last seeded with."""
        return self._seed

    def get_state(self):
        """The state as a uint8 CPU tensor (16 bytes: seed and offset, little-endian)."""
        from refimpl._tensor import Tensor

        raw = np.frombuffer(self._seed.to_bytes(8, "little") + self._offset.to_bytes(8, "little"),
                            dtype=np.uint8).copy()
        return Tensor._from_array(raw)

    def set_state(self, new_state) -> Generator:
        """Restore a state produced by ``get_state``."""
        from refimpl import _dtype as D

        if getattr(new_state, "dtype", None) is not D.uint8:
            raise TypeError(
                f"expected a torch.ByteTensor, but got {type(new_state).__name__}"
            )
        raw = bytes(new_state.contiguous()._np.tobytes())
        if len(raw) != 16:
            raise RuntimeError(
                f"Expected either a PhiloxCudaState of size 16 or a state of size 16 but "
                f"found the input RNG state size to be {len(raw)}"
            )
        self._seed = int.from_bytes(raw[:8], "little")
        self._offset = int.from_bytes(raw[8:], "little")
        return self

    def get_offset(self) -> int:
        """How many 4-word Philox blocks have been consumed."""
        return self._offset

    def set_offset(self, offset: int) -> Generator:
        """Move the stream to ``offset`` (in 4-word blocks)."""
        self._offset = int(offset)
        return self

    def philox_cuda_state(self, increment: int) -> tuple[int, int]:
        """Reserve the counter blocks of one CUDA kernel launch: returns (seed, offset)
        and advances the offset by ``increment`` rounded up to a multiple of 4, as
        torch's CUDA generator reserves its offsets (``philox_cuda_state``)."""
        seed, offset = self._seed, self._offset
        self._offset += -(-int(increment) // 4) * 4
        return seed, offset

    def graphsafe_get_state(self) -> Generator:
        """A generator sharing this one's state (CUDA generators only)."""
        raise NotImplementedError("graphsafe_get_state is not supported in this Generator")

    def graphsafe_set_state(self, state: Generator) -> Generator:
        """Make this generator use ``state``'s state (CUDA generators only)."""
        raise NotImplementedError("graphsafe_set_state is not supported in this Generator")

    def clone_state(self) -> Generator:
        """A new generator with a copy of this one's state."""
        gen = Generator(self.device)
        gen._seed, gen._offset = self._seed, self._offset
        return gen

    # -- drawing -----------------------------------------------------------------------

    def _words(self, n: int) -> np.ndarray:
        """The next ``n`` uint32 words of the stream."""
        blocks = (n + 3) // 4
        lo = np.arange(self._offset, self._offset + blocks, dtype=np.uint64)
        hi = np.zeros(blocks, dtype=np.uint64)
        self._offset += blocks
        return philox4x32(lo, hi, self._seed).reshape(-1)[:n]

    def uniform(self, n: int, float64: bool = False) -> np.ndarray:
        """n uniform floats in [0, 1): 24-bit (float32) or 53-bit (float64) resolution."""
        if float64:
            w = self._words(2 * n).astype(np.uint64).reshape(n, 2)
            bits = ((w[:, 0] << np.uint64(21)) ^ w[:, 1]) & np.uint64((1 << 53) - 1)
            return bits.astype(np.float64) * (1.0 / (1 << 53))
        w = self._words(n)
        return (w >> np.uint32(8)).astype(np.float32) * np.float32(1.0 / (1 << 24))

    def normal(self, n: int, float64: bool = False) -> np.ndarray:
        """n standard normal values (Box-Muller on pairs of uniforms)."""
        m = (n + 1) // 2
        u = self.uniform(2 * m, float64=True).reshape(m, 2)
        r = np.sqrt(-2.0 * np.log1p(-u[:, 0]))
        theta = 2.0 * np.pi * u[:, 1]
        z = np.stack([r * np.cos(theta), r * np.sin(theta)], axis=-1).reshape(-1)[:n]
        return z if float64 else z.astype(np.float32)

    def integers(self, n: int, low: int, high: int) -> np.ndarray:
        """n integers uniform in [low, high) (64-bit draws reduced modulo the range)."""
        span = high - low
        w = self._words(2 * n).astype(np.uint64).reshape(n, 2)
        bits = (w[:, 0] << np.uint64(32)) | w[:, 1]
        return (bits % np.uint64(span)).astype(np.int64) + np.int64(low)


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Seed the default CPU generator and every CUDA generator (queued until CUDA init)."""
    default_generator.manual_seed(seed)
    import sys

    cuda = sys.modules.get("refimpl.cuda")
    if cuda is not None and not cuda._is_in_bad_fork():
        cuda.manual_seed_all(seed)
    return default_generator


def seed() -> int:
    """Seed the default generator non-deterministically; returns the seed."""
    return default_generator.seed()


def initial_seed() -> int:
    """The default generator's initial seed."""
    return default_generator.initial_seed()


def get_rng_state():
    """The default generator's state as a uint8 tensor."""
    return default_generator.get_state()


def set_rng_state(new_state) -> None:
    """Restore the default generator's state."""
    default_generator.set_state(new_state)
