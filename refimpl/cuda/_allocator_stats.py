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
    "stat_decrease",
    "stat_increase",
]

AGGREGATE, SMALL_POOL, LARGE_POOL = 0, 1, 2
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


def stat_increase(stat: list[int], amount: int) -> None:
    """Raise a ``[current, peak, allocated, freed]`` stat by ``amount``."""
    current = stat[0] + amount
    stat[0] = current
    if current > stat[1]:  # noqa: PLR1730 - max() is a call; this runs per allocation
        stat[1] = current
    stat[2] += amount


def stat_decrease(stat: list[int], amount: int) -> None:
    """Lower a ``[current, peak, allocated, freed]`` stat by ``amount``."""
    stat[0] -= amount
    stat[3] += amount


def _new_array() -> list[list[int]]:
    return [[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]


class DeviceStats:
    """All counters of one device's allocator.

    Each family attribute is a list indexed by pool type (``AGGREGATE``,
    ``SMALL_POOL``, ``LARGE_POOL``) of ``[current, peak, allocated, freed]`` lists.
    ``max_split_size`` is fixed when the allocator is created (torch reads the
    setting once, so a later ``_set_allocator_settings`` does not change it).
    """

    __slots__ = (
        *FAMILIES,
        *_SCALARS,
        "oversize_allocations",
        "oversize_segments",
        "max_split_size",
    )

    def __init__(self, max_split_size: int) -> None:
        for name in FAMILIES:
            setattr(self, name, _new_array())
        for name in _SCALARS:
            setattr(self, name, 0)
        self.oversize_allocations = [0, 0, 0, 0]
        self.oversize_segments = [0, 0, 0, 0]
        self.max_split_size = max_split_size

    def record_alloc(self, pool_index: int, size: int, requested: int) -> None:
        """A block of ``size`` bytes (``requested`` asked for) was handed out."""
        for index in (AGGREGATE, pool_index):
            for stat, amount in (
                (self.allocation[index], 1),
                (self.active[index], 1),
                (self.allocated_bytes[index], size),
                (self.active_bytes[index], size),
                (self.requested_bytes[index], requested),
            ):
                current = stat[0] + amount
                stat[0] = current
                if current > stat[1]:  # noqa: PLR1730 - max() is a call; this runs per allocation
                    stat[1] = current
                stat[2] += amount

    def record_free_requested(self, pool_index: int, size: int) -> None:
        """A block of ``size`` bytes was given back by its user."""
        for index in (AGGREGATE, pool_index):
            stat = self.allocation[index]
            stat[0] -= 1
            stat[3] += 1
            stat = self.allocated_bytes[index]
            stat[0] -= size
            stat[3] += size

    def record_free_completed(
        self, pool_index: int, size: int, requested: int, split_blocks: int, split_bytes: int
    ) -> None:
        """A freed block became reusable; inactive split blocks/bytes changed by the deltas."""
        for index in (AGGREGATE, pool_index):
            stat = self.active[index]
            stat[0] -= 1
            stat[3] += 1
            stat = self.active_bytes[index]
            stat[0] -= size
            stat[3] += size
            stat = self.requested_bytes[index]
            stat[0] -= requested
            stat[3] += requested
            if split_blocks > 0:
                stat_increase(self.inactive_split[index], split_blocks)
            elif split_blocks < 0:
                stat_decrease(self.inactive_split[index], -split_blocks)
            if split_bytes > 0:
                stat_increase(self.inactive_split_bytes[index], split_bytes)
            elif split_bytes < 0:
                stat_decrease(self.inactive_split_bytes[index], -split_bytes)

    def reset_peak(self) -> None:
        """Set every peak to its current value (``reset_peak_memory_stats``)."""
        for name in FAMILIES:
            for stat in getattr(self, name):
                stat[1] = stat[0]
        for stat in (self.oversize_allocations, self.oversize_segments):
            stat[1] = stat[0]

    def reset_accumulated(self) -> None:
        """Zero the allocated/freed sums and the event counters."""
        for name in FAMILIES:
            for stat in getattr(self, name):
                stat[2] = stat[3] = 0
        for stat in (self.oversize_allocations, self.oversize_segments):
            stat[2] = stat[3] = 0
        for name in _SCALARS:
            setattr(self, name, 0)

    def as_nested_dict(self) -> dict[str, object]:
        """The stats as ``torch.cuda.memory_stats_as_nested_dict`` lays them out."""

        def one(stat: list[int]) -> dict[str, int]:
            return dict(zip(STAT_FIELDS, stat, strict=True))

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
            array = getattr(self, name)
            result[name] = {pool: one(array[i]) for i, pool in enumerate(POOL_TYPE_NAMES)}
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
