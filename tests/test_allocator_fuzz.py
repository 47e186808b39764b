"""Allocator fuzz: 100,000 random operations, every invariant checked after each one.

Four settings (defaults, ``max_split_size_mb``, ``roundup_power2_divisions``, garbage
collection under a memory fraction) get 25,000 seeded operations each on a 1 GiB
simulated device: allocations of every size class on three streams, frees,
``record_stream`` frees on busy streams, stream completions, ``empty_cache``, stat
resets, and the OOMs that a small device produces. After every operation:

* ``check_invariants()``: segments tile memory, links and free lists agree, no two
  mergeable free blocks touch, and every current statistic equals what the blocks
  add up to (this covers the bytes: no two live blocks overlap);
* the model: the live blocks are exactly those the test holds, each at least as
  large as its request, and no block is handed out while a ``record_stream`` use
  of its memory is still pending.

The whole run takes about 10 s on an idle core (under 20 s on a busy two-core CI box). ``TENSORCTL_FUZZ_OPS`` changes the
number of operations per setting (e.g. 2500 for a quick look).
"""

from __future__ import annotations

import os
import random

import pytest

from refimpl.cuda._allocator import AddressSpaceSource, Block, CachingAllocator, OutOfMemoryError
from refimpl.cuda._allocator_config import parse_allocator_settings

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
OPS_PER_SETTING = int(os.environ.get("TENSORCTL_FUZZ_OPS", "25000"))
STREAMS = (0, 0x5A5A00, 0x5A5B00)

SETTINGS = [
    ("defaults", "", None),
    ("max_split", "max_split_size_mb:64", None),
    ("roundup", "roundup_power2_divisions:[4:2,64:8,>:4]", None),
    ("gc_fraction", "garbage_collection_threshold:0.6,max_split_size_mb:128", 0.9),
]


def _size(rng: random.Random) -> int:
    kind = rng.random()
    if kind < 0.40:
        return rng.randrange(1, 4 * KiB)
    if kind < 0.65:
        return rng.randrange(4 * KiB, MiB + 1)
    if kind < 0.85:
        return rng.randrange(MiB + 1, 10 * MiB)
    if kind < 0.95:
        return rng.randrange(10 * MiB, 100 * MiB)
    return rng.randrange(100 * MiB, 400 * MiB)


class _Model:
    """What the test knows: live blocks and memory still in use on busy streams."""

    def __init__(self) -> None:
        self.live: list[tuple[Block, int]] = []
        self.pending: dict[int, list[tuple[int, int]]] = {s: [] for s in STREAMS}

    def clear_pending(self) -> None:
        for ranges in self.pending.values():
            ranges.clear()

    def check_not_pending(self, block: Block) -> None:
        start, end = block.address, block.address + block.size
        for ranges in self.pending.values():
            for address, size in ranges:
                assert end <= address or start >= address + size, (
                    f"{block} handed out while {size} bytes at {address:#x} are still in use"
                )


def _step(rng: random.Random, allocator: CachingAllocator, source: AddressSpaceSource,
          model: _Model) -> str:
    roll = rng.random()
    if roll < 0.48 or not model.live:
        size, stream = _size(rng), rng.choice(STREAMS)
        syncs = allocator.stats.num_sync_all_streams
        try:
            block = allocator.malloc(size, stream)
        except OutOfMemoryError:
            return "oom"
        finally:
            if allocator.stats.num_sync_all_streams != syncs:
                model.clear_pending()  # the OOM retry waited for every stream
        assert block.allocated and block.size >= size and block.stream == stream
        model.check_not_pending(block)
        model.live.append((block, size))
        return "alloc"
    if roll < 0.88:
        block, _ = model.live.pop(rng.randrange(len(model.live)))
        allocator.free(block)
        return "free"
    if roll < 0.93:
        block, _ = model.live.pop(rng.randrange(len(model.live)))
        user = rng.choice([s for s in STREAMS if s != block.stream])
        source.set_stream_busy(user)
        allocator.record_stream(block, user)
        model.pending[user].append((block.address, block.size))
        allocator.free(block)
        return "record_stream"
    if roll < 0.97:
        stream = rng.choice(STREAMS)
        source.complete_stream(stream)
        model.pending[stream].clear()
        return "complete"
    if roll < 0.985:
        allocator.empty_cache()
        model.clear_pending()  # empty_cache waited for every pending use
        return "empty_cache"
    if roll < 0.995:
        allocator.reset_peak_stats()
        return "reset_peak"
    allocator.reset_accumulated_stats()
    return "reset_accumulated"


@pytest.mark.parametrize(("name", "conf", "fraction"), SETTINGS, ids=[s[0] for s in SETTINGS])
def test_random_operations_keep_every_invariant(name: str, conf: str, fraction: float | None):
    rng = random.Random(f"tensorctl-fuzz-{name}")
    source = AddressSpaceSource(GiB)
    allocator = CachingAllocator(source, 0, parse_allocator_settings(conf))
    if fraction is not None:
        allocator.set_memory_fraction(fraction)
    model = _Model()
    counts: dict[str, int] = {}
    ooms_before_reset = 0
    for i in range(OPS_PER_SETTING):
        op = _step(rng, allocator, source, model)
        counts[op] = counts.get(op, 0) + 1
        if op == "reset_accumulated":
            ooms_before_reset = counts.get("oom", 0)
        try:
            allocator.check_invariants()
            live = {id(b) for b, _ in model.live}
            assert live == {id(b) for b in allocator._by_address.values()}
            assert allocator.stats.num_ooms == counts.get("oom", 0) - ooms_before_reset
        except AssertionError as exc:
            raise AssertionError(f"{name}: after operation {i} ({op}): {exc}") from None
    # The mix must actually exercise the paths it is meant to.
    assert counts.get("oom", 0) > 0 or OPS_PER_SETTING < 5000
    assert counts["record_stream"] > 0 and counts["free"] > 0
    for block, _ in model.live:
        allocator.free(block)
    allocator.empty_cache()
    allocator.check_invariants()
    assert allocator.stats.current("reserved_bytes") == 0 == source.used
