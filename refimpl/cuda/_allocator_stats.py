"""Statistics of the caching allocator: the counters behind ``memory_stats()``.

Spec: cuda_memory (memory statistics clauses). Every counter is a *stat* with four
fields: ``current``, ``peak`` (highest ``current`` since the last peak reset),
``allocated`` (sum of all increases) and ``freed`` (sum of all decreases). Most
stats come as an array over three *pool types*: ``all``, ``small_pool`` and
``large_pool``; an event in one pool updates that pool's entry and ``all``.

The families and scalars are exactly those torch 2.11 reports; the nested layout
is the one ``torch._C._cuda_memoryStats`` returns.
"""

from __future__ import annotations

__all__ = [
    "AGGREGATE",
    "FAMILIES",
    "LARGE_POOL",
    "POOL_TYPE_NAMES",
    "SMALL_POOL",
    "DeviceStats",
    "format_size",
    "single_decrease",
    "single_increase",
    "stat_decrease",
    "stat_increase",
]

# Layout of a family's flat list of 12 ints. The pools hold [current, peak, freed,
# base] at SMALL_POOL (4) and LARGE_POOL (8): "allocated" is current - base + freed
# (base is the current value at the last accumulated-stats reset). The "all" pool
# type is the sum of the two, except its peak, kept at index 1. Updating two ints
# instead of eight per event is what keeps allocation cheap in Python.
AGGREGATE, SMALL_POOL, LARGE_POOL = 0, 4, 8
POOL_TYPE_NAMES = ("all", "small_pool", "large_pool")
STAT_FIELDS = ("current", "peak", "allocated", "freed")

# Counts, then byte sums, as torch names them.
FAMILIES = (
    "allocation",
    "segment",
    "active",
    "inactive_split",
    "allocated_bytes",
    "reserved_bytes",
    "active_bytes",
    "inactive_split_bytes",
    "requested_bytes",
)
_SCALARS = (
    "num_alloc_retries",
    "num_ooms",
    "num_sync_all_streams",
    "num_device_alloc",
    "num_device_free",
)


def stat_increase(stat: list[int], pool: int, amount: int) -> None:
    """Raise a family's ``pool`` entry (and so its ``all`` entry) by ``amount``.

    ``pool`` is ``SMALL_POOL`` or ``LARGE_POOL`` (lone stats such as the oversize
    counters use :func:`single_increase`).
    """
    current = stat[pool] = stat[pool] + amount
    if current > stat[pool + 1]:  # noqa: PLR1730 - max() is a call; this runs per allocation
        stat[pool + 1] = current
    current = stat[4] + stat[8]
    if current > stat[1]:  # noqa: PLR1730 - as above
        stat[1] = current


def stat_decrease(stat: list[int], pool: int, amount: int) -> None:
    """Lower a family's ``pool`` entry (and so its ``all`` entry) by ``amount``."""
    stat[pool] -= amount
    stat[pool + 2] += amount


def single_increase(stat: list[int], amount: int) -> None:
    """Raise a lone ``[current, peak, allocated, freed]`` stat by ``amount``."""
    current = stat[0] + amount
    stat[0] = current
    if current > stat[1]:  # noqa: PLR1730 - as above
        stat[1] = current
    stat[2] += amount


def single_decrease(stat: list[int], amount: int) -> None:
    """Lower a lone ``[current, peak, allocated, freed]`` stat by ``amount``."""
    stat[0] -= amount
    stat[3] += amount


class DeviceStats:
    """All counters of one device's allocator.

    Each family attribute is a flat list of 12 ints laid out as described above;
    read a pool type's ``[current, peak, allocated, freed]`` with :meth:`get` and a
    current value with :meth:`current`. ``oversize_allocations`` and
    ``oversize_segments`` are plain ``[current, peak, allocated, freed]`` lists.
    ``max_split_size`` is fixed when the allocator is created (torch reads the
    setting once, so a later ``_set_allocator_settings`` does not change it).
    """

    __slots__ = (
        *FAMILIES,
        *_SCALARS,
        "max_split_size",
        "oversize_allocations",
        "oversize_segments",
    )

    def __init__(self, max_split_size: int) -> None:
        for name in FAMILIES:
            setattr(self, name, [0] * 12)
        for name in _SCALARS:
            setattr(self, name, 0)
        self.oversize_allocations = [0, 0, 0, 0]
        self.oversize_segments = [0, 0, 0, 0]
        self.max_split_size = max_split_size

    def get(self, family: str, pool: int = AGGREGATE) -> list[int]:
        """``[current, peak, allocated, freed]`` of ``family`` for one pool type."""
        stat = getattr(self, family)
        if pool != AGGREGATE:
            current, peak, freed, base = stat[pool : pool + 4]
            return [current, peak, current - base + freed, freed]
        small, large = self.get(family, SMALL_POOL), self.get(family, LARGE_POOL)
        return [small[0] + large[0], stat[1], small[2] + large[2], small[3] + large[3]]

    def current(self, family: str) -> int:
        """The current value of ``family`` over both pools."""
        stat = getattr(self, family)
        return stat[4] + stat[8]

    # The record_* methods run on every allocation and free; they are written out
    # rather than looped (see the layout note above).

    def record_alloc(
        self, pool: int, size: int, requested: int, split_blocks: int, split_bytes: int
    ) -> None:
        """A block of ``size`` bytes (``requested`` asked for) was handed out.

        ``split_blocks``/``split_bytes``: the change in inactive split blocks and bytes
        (a split leaves a free remainder; taking a free split block removes one).
        """
        peak = pool + 1
        stat = self.allocation
        c = stat[pool] = stat[pool] + 1
        if c > stat[peak]:  # noqa: PLR1730 - max() is a call; this is the hot path
            stat[peak] = c
        c = stat[4] + stat[8]
        if c > stat[1]:  # noqa: PLR1730
            stat[1] = c
        stat = self.active
        c = stat[pool] = stat[pool] + 1
        if c > stat[peak]:  # noqa: PLR1730
            stat[peak] = c
        c = stat[4] + stat[8]
        if c > stat[1]:  # noqa: PLR1730
            stat[1] = c
        stat = self.allocated_bytes
        c = stat[pool] = stat[pool] + size
        if c > stat[peak]:  # noqa: PLR1730
            stat[peak] = c
        c = stat[4] + stat[8]
        if c > stat[1]:  # noqa: PLR1730
            stat[1] = c
        stat = self.active_bytes
        c = stat[pool] = stat[pool] + size
        if c > stat[peak]:  # noqa: PLR1730
            stat[peak] = c
        c = stat[4] + stat[8]
        if c > stat[1]:  # noqa: PLR1730
            stat[1] = c
        stat = self.requested_bytes
        c = stat[pool] = stat[pool] + requested
        if c > stat[peak]:  # noqa: PLR1730
            stat[peak] = c
        c = stat[4] + stat[8]
        if c > stat[1]:  # noqa: PLR1730
            stat[1] = c
        if split_blocks or split_bytes:
            self._record_split(pool, split_blocks, split_bytes)

    def _record_split(self, pool: int, blocks: int, nbytes: int) -> None:
        # A split adds one block and its bytes; a merge or a reuse removes them.
        if blocks > 0:
            stat_increase(self.inactive_split, pool, blocks)
        elif blocks < 0:
            stat_decrease(self.inactive_split, pool, -blocks)
        if nbytes > 0:
            stat_increase(self.inactive_split_bytes, pool, nbytes)
        elif nbytes < 0:
            stat_decrease(self.inactive_split_bytes, pool, -nbytes)

    def record_free(
        self, pool: int, size: int, requested: int, split_blocks: int, split_bytes: int
    ) -> None:
        """:meth:`record_free_requested` and :meth:`record_free_completed` at once."""
        freed = pool + 2
        stat = self.allocation
        stat[pool] -= 1
        stat[freed] += 1
        stat = self.active
        stat[pool] -= 1
        stat[freed] += 1
        stat = self.allocated_bytes
        stat[pool] -= size
        stat[freed] += size
        stat = self.active_bytes
        stat[pool] -= size
        stat[freed] += size
        stat = self.requested_bytes
        stat[pool] -= requested
        stat[freed] += requested
        if split_blocks or split_bytes:
            self._record_split(pool, split_blocks, split_bytes)

    def record_free_requested(self, pool: int, size: int) -> None:
        """A block of ``size`` bytes was given back by its user."""
        stat_decrease(self.allocation, pool, 1)
        stat_decrease(self.allocated_bytes, pool, size)

    def record_free_completed(
        self, pool: int, size: int, requested: int, split_blocks: int, split_bytes: int
    ) -> None:
        """A freed block became reusable; inactive split blocks/bytes changed by the deltas."""
        stat_decrease(self.active, pool, 1)
        stat_decrease(self.active_bytes, pool, size)
        stat_decrease(self.requested_bytes, pool, requested)
        if split_blocks or split_bytes:
            self._record_split(pool, split_blocks, split_bytes)

    def reset_peak(self) -> None:
        """Set every peak to its current value (``reset_peak_memory_stats``)."""
        for name in FAMILIES:
            stat = getattr(self, name)
            stat[5], stat[9], stat[1] = stat[4], stat[8], stat[4] + stat[8]
        for stat in (self.oversize_allocations, self.oversize_segments):
            stat[1] = stat[0]

    def reset_accumulated(self) -> None:
        """Zero the allocated/freed sums and the event counters."""
        for name in FAMILIES:
            stat = getattr(self, name)
            stat[6] = stat[10] = 0
            stat[7], stat[11] = stat[4], stat[8]
        for stat in (self.oversize_allocations, self.oversize_segments):
            stat[2] = stat[3] = 0
        for name in _SCALARS:
            setattr(self, name, 0)

    def as_nested_dict(self) -> dict[str, object]:
        """The stats as ``torch.cuda.memory_stats_as_nested_dict`` lays them out."""

        def one(values: list[int]) -> dict[str, int]:
            return dict(zip(STAT_FIELDS, values, strict=True))

        result: dict[str, object] = {
            "num_alloc_retries": self.num_alloc_retries,
            "num_ooms": self.num_ooms,
            "max_split_size": self.max_split_size,
            "oversize_allocations": one(self.oversize_allocations),
            "oversize_segments": one(self.oversize_segments),
            "num_sync_all_streams": self.num_sync_all_streams,
            "num_device_alloc": self.num_device_alloc,
            "num_device_free": self.num_device_free,
        }
        for name in FAMILIES:
            result[name] = {
                pool: one(self.get(name, 4 * i)) for i, pool in enumerate(POOL_TYPE_NAMES)
            }
        return result


def format_size(size: int) -> str:
    """Format a byte count the way torch's allocator messages do.

    Up to 1024 bytes: ``"N bytes"``; then KiB, MiB and GiB with two decimals, each
    unit used up to and including 1024 of the previous one.
    """
    if size <= 1024:
        return f"{size} bytes"
    if size <= 1048576:
        return f"{size / 1024.0:.2f} KiB"
    if size <= 1073741824:
        return f"{size / 1048576.0:.2f} MiB"
    return f"{size / 1073741824.0:.2f} GiB"
