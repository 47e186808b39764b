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

# Offsets of the pool types in a family's flat list of 12 ints: for each pool type,
# [current, peak, allocated, freed]. Flat lists keep the per-allocation updates cheap.
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
    """Raise a family's ``all`` entry and its ``pool`` entry by ``amount``.

    ``pool`` is ``SMALL_POOL`` or ``LARGE_POOL`` (lone 4-int stats such as the
    oversize counters use :func:`single_increase`).
    """
    current = stat[0] + amount
    stat[0] = current
    if current > stat[1]:  # noqa: PLR1730 - max() is a call; this runs per allocation
        stat[1] = current
    stat[2] += amount
    current = stat[pool] + amount
    stat[pool] = current
    if current > stat[pool + 1]:  # noqa: PLR1730 - as above
        stat[pool + 1] = current
    stat[pool + 2] += amount


def stat_decrease(stat: list[int], pool: int, amount: int) -> None:
    """Lower a family's ``all`` entry and its ``pool`` entry by ``amount``."""
    stat[0] -= amount
    stat[3] += amount
    stat[pool] -= amount
    stat[pool + 3] += amount


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

    Each family attribute is a flat list of 12 ints: ``[current, peak, allocated,
    freed]`` for ``all``, then for the small pool, then for the large pool (read
    one with :meth:`get`). ``oversize_allocations``/``oversize_segments`` are single
    4-int stats. ``max_split_size`` is fixed when the allocator is created (torch
    reads the setting once, so a later ``_set_allocator_settings`` does not change it).
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
        return getattr(self, family)[pool : pool + 4]

    # The three record_* methods run on every allocation and free, so they update
    # their stats inline (each stat: the "all" entry at 0..3, the pool's at pool..pool+3).

    def record_alloc(
        self, pool: int, size: int, requested: int, split_blocks: int, split_bytes: int
    ) -> None:
        """A block of ``size`` bytes (``requested`` asked for) was handed out.

        ``split_blocks``/``split_bytes``: the change in inactive split blocks and bytes
        (a split leaves a free remainder; taking a free split block removes one).
        """
        peak, total = pool + 1, pool + 2
        for stat, amount in (
            (self.allocation, 1),
            (self.active, 1),
            (self.allocated_bytes, size),
            (self.active_bytes, size),
            (self.requested_bytes, requested),
        ):
            current = stat[0] + amount
            stat[0] = current
            if current > stat[1]:  # noqa: PLR1730 - max() is a call; this is the hot path
                stat[1] = current
            stat[2] += amount
            current = stat[pool] + amount
            stat[pool] = current
            if current > stat[peak]:  # noqa: PLR1730 - as above
                stat[peak] = current
            stat[total] += amount
        if split_blocks or split_bytes:
            self._record_split(pool, split_blocks, split_bytes)

    def _record_split(self, pool: int, blocks: int, nbytes: int) -> None:
        peak, total, freed = pool + 1, pool + 2, pool + 3
        for stat, amount in ((self.inactive_split, blocks), (self.inactive_split_bytes, nbytes)):
            if amount > 0:
                current = stat[0] + amount
                stat[0] = current
                if current > stat[1]:  # noqa: PLR1730 - max() is a call; this is the hot path
                    stat[1] = current
                stat[2] += amount
                current = stat[pool] + amount
                stat[pool] = current
                if current > stat[peak]:  # noqa: PLR1730 - as above
                    stat[peak] = current
                stat[total] += amount
            elif amount < 0:
                stat[0] += amount
                stat[3] -= amount
                stat[pool] += amount
                stat[freed] -= amount

    def record_free(
        self, pool: int, size: int, requested: int, split_blocks: int, split_bytes: int
    ) -> None:
        """:meth:`record_free_requested` and :meth:`record_free_completed` at once."""
        freed = pool + 3
        for stat, amount in (
            (self.allocation, 1),
            (self.allocated_bytes, size),
            (self.active, 1),
            (self.active_bytes, size),
            (self.requested_bytes, requested),
        ):
            stat[0] -= amount
            stat[3] += amount
            stat[pool] -= amount
            stat[freed] += amount
        if split_blocks or split_bytes:
            self._record_split(pool, split_blocks, split_bytes)

    def record_free_requested(self, pool: int, size: int) -> None:
        """A block of ``size`` bytes was given back by its user."""
        freed = pool + 3
        stat = self.allocation
        stat[0] -= 1
        stat[3] += 1
        stat[pool] -= 1
        stat[freed] += 1
        stat = self.allocated_bytes
        stat[0] -= size
        stat[3] += size
        stat[pool] -= size
        stat[freed] += size

    def record_free_completed(
        self, pool: int, size: int, requested: int, split_blocks: int, split_bytes: int
    ) -> None:
        """A freed block became reusable; inactive split blocks/bytes changed by the deltas."""
        freed = pool + 3
        for stat, amount in (
            (self.active, 1),
            (self.active_bytes, size),
            (self.requested_bytes, requested),
        ):
            stat[0] -= amount
            stat[3] += amount
            stat[pool] -= amount
            stat[freed] += amount
        if split_blocks or split_bytes:
            self._record_split(pool, split_blocks, split_bytes)

    def reset_peak(self) -> None:
        """Set every peak to its current value (``reset_peak_memory_stats``)."""
        for stat in (*(getattr(self, n) for n in FAMILIES), self.oversize_allocations,
                     self.oversize_segments):
            for base in range(0, len(stat), 4):
                stat[base + 1] = stat[base]

    def reset_accumulated(self) -> None:
        """Zero the allocated/freed sums and the event counters."""
        for stat in (*(getattr(self, n) for n in FAMILIES), self.oversize_allocations,
                     self.oversize_segments):
            for base in range(0, len(stat), 4):
                stat[base + 2] = stat[base + 3] = 0
        for name in _SCALARS:
            setattr(self, name, 0)

    def as_nested_dict(self) -> dict[str, object]:
        """The stats as ``torch.cuda.memory_stats_as_nested_dict`` lays them out."""

        def one(stat: list[int], base: int = 0) -> dict[str, int]:
            return dict(zip(STAT_FIELDS, stat[base : base + 4], strict=True))

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
            flat = getattr(self, name)
            result[name] = {pool: one(flat, 4 * i) for i, pool in enumerate(POOL_TYPE_NAMES)}
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
