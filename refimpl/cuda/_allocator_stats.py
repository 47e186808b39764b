"""Statistics of the caching allocator: the counters behind ``memory_stats()``.

Spec: cuda_memory (memory statistics clauses). Every counter is a *stat* with four
fields: ``current``, ``peak`` (highest ``current`` since the last peak reset),
``allocated`` (sum of all increases) and ``freed`` (sum of all decreases). Most
stats come as an array over three *pool types*: ``all``, ``small_pool`` and
``large_pool``; an event in one pool updates that pool's entry and ``all``.

The families and scalars are exactly those torch 2.11 reports; the nested layout
is the one ``torch._C._cuda_memoryStats`` returns.

How they are kept. These counters move on every allocation and free, so their
layout is chosen for what costs least in Python: plain attributes, a handful per
event.

* Each pool (small, large) has a :class:`PoolCounters` with, per family ``F``, the
  attributes ``F`` (current), ``F_peak``, ``F_freed`` and ``F_base`` (the current
  value at the last accumulated-stats reset): ``allocated`` is then
  ``current - base + freed`` and needs no update of its own.
* The ``all`` pool type is the sum of the two pools, except its peaks, which a
  third :class:`PoolCounters` (``aggregate``) keeps.
* ``active`` and ``active_bytes`` are not counters of their own. A block is
  active while allocated or *pending* (freed, waiting for events of other
  streams), so ``active = allocation + pending``, and the same for the bytes:
  only ``pending``/``pending_bytes`` are counted, and they are zero unless
  ``record_stream`` is used. The peak of ``active`` is the larger of the peak of
  ``allocation`` and ``active_peak``, which a peak reset sets to active's current
  value and which is raised only at allocations made while some block is
  pending. Why this is exact: active rises only at allocations; at one made while
  nothing is pending, active equals allocation, whose peak covers it, and at any
  other, ``active_peak`` does. Its ``allocated`` is that of ``allocation`` (both
  rise at each allocation and only then); its ``freed`` is that of ``allocation``
  less the blocks that became pending since the last reset and have not
  completed: ``- pending + pending_base``. In the common case (nothing pending)
  an allocation and a free thus update three families, not five.
"""

from __future__ import annotations

__all__ = [
    "AGGREGATE",
    "FAMILIES",
    "LARGE_POOL",
    "POOL_TYPE_NAMES",
    "SMALL_POOL",
    "DeviceStats",
    "PoolCounters",
    "format_size",
    "single_decrease",
    "single_increase",
]

# Pool types, as indices into DeviceStats.pools and POOL_TYPE_NAMES.
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
# The families derived from allocation + pending (see the module docstring).
_DERIVED = {"active": ("allocation", "pending"), "active_bytes": ("allocated_bytes", "pending_bytes")}
_COUNTED = tuple(name for name in FAMILIES if name not in _DERIVED)
_SCALARS = (
    "num_alloc_retries",
    "num_ooms",
    "num_sync_all_streams",
    "num_device_alloc",
    "num_device_free",
)


def single_increase(stat: list[int], amount: int) -> None:
    """Raise a lone ``[current, peak, allocated, freed]`` stat by ``amount``."""
    current = stat[0] + amount
    stat[0] = current
    if current > stat[1]:  # noqa: PLR1730 - max() is a call; this runs per allocation
        stat[1] = current
    stat[2] += amount


def single_decrease(stat: list[int], amount: int) -> None:
    """Lower a lone ``[current, peak, allocated, freed]`` stat by ``amount``."""
    stat[0] -= amount
    stat[3] += amount


class PoolCounters:
    """The counters of one pool: ``F``, ``F_peak``, ``F_freed`` and ``F_base`` for each
    counted family ``F``, the pending counts, and the peaks of active while pending.

    In the ``aggregate`` instance of :class:`DeviceStats` only the peaks are used.
    """

    __slots__ = (
        *(name + suffix for name in _COUNTED for suffix in ("", "_peak", "_freed", "_base")),
        "pending",
        "pending_base",
        "pending_bytes",
        "pending_bytes_base",
        "active_peak",
        "active_bytes_peak",
    )

    def __init__(self) -> None:
        for name in self.__slots__:
            setattr(self, name, 0)

    def stat(self, family: str) -> list[int]:
        """``[current, peak, allocated, freed]`` of ``family`` in this pool."""
        derived = _DERIVED.get(family)
        if derived is not None:
            counted, pending = derived
            current, peak, allocated, freed = self.stat(counted)
            waiting = getattr(self, pending)
            return [
                current + waiting,
                max(peak, getattr(self, family + "_peak")),
                allocated,
                freed - waiting + getattr(self, pending + "_base"),
            ]
        current = getattr(self, family)
        freed = getattr(self, family + "_freed")
        return [
            current,
            getattr(self, family + "_peak"),
            current - getattr(self, family + "_base") + freed,
            freed,
        ]


class DeviceStats:
    """All counters of one device's allocator (laid out as the module docstring says).

    Read a pool type's ``[current, peak, allocated, freed]`` with :meth:`get` and a
    current value with :meth:`current`. ``oversize_allocations`` and
    ``oversize_segments`` are plain ``[current, peak, allocated, freed]`` lists.
    ``max_split_size`` is fixed when the allocator is created (torch reads the
    setting once, so a later ``_set_allocator_settings`` does not change it).
    """

    __slots__ = (
        *_SCALARS,
        "aggregate",
        "large",
        "max_split_size",
        "oversize_allocations",
        "oversize_segments",
        "pools",
        "small",
    )

    def __init__(self, max_split_size: int) -> None:
        self.aggregate = PoolCounters()
        self.small = PoolCounters()
        self.large = PoolCounters()
        self.pools = (self.aggregate, self.small, self.large)
        for name in _SCALARS:
            setattr(self, name, 0)
        self.oversize_allocations = [0, 0, 0, 0]
        self.oversize_segments = [0, 0, 0, 0]
        self.max_split_size = max_split_size

    def get(self, family: str, pool: int = AGGREGATE) -> list[int]:
        """``[current, peak, allocated, freed]`` of ``family`` for one pool type."""
        if pool != AGGREGATE:
            return self.pools[pool].stat(family)
        small, large = self.small.stat(family), self.large.stat(family)
        aggregate = self.aggregate
        derived = _DERIVED.get(family)
        if derived is None:
            peak = getattr(aggregate, family + "_peak")
        else:
            peak = max(getattr(aggregate, derived[0] + "_peak"), getattr(aggregate, family + "_peak"))
        return [small[0] + large[0], peak, small[2] + large[2], small[3] + large[3]]

    def current(self, family: str) -> int:
        """The current value of ``family`` over both pools."""
        return self.get(family)[0]

    # The record_* methods run on every allocation and free. They are written out,
    # family by family, with no loops or helper calls: each attribute read, call
    # and loop step costs measurable time in Python.

    def record_alloc(
        self, pool: int, size: int, requested: int, split_blocks: int, split_bytes: int
    ) -> None:
        """A block of ``size`` bytes (``requested`` asked for) was handed out.

        ``split_blocks``/``split_bytes``: the change in inactive split blocks and bytes
        (a split leaves a free remainder; taking a free split block removes one).
        """
        counters = self.pools[pool]
        small, large, aggregate = self.small, self.large, self.aggregate
        c = counters.allocation + 1
        counters.allocation = c
        if c > counters.allocation_peak:  # noqa: PLR1730 - max() is a call; this is the hot path
            counters.allocation_peak = c
        c = small.allocation + large.allocation
        if c > aggregate.allocation_peak:  # noqa: PLR1730
            aggregate.allocation_peak = c
        c = counters.allocated_bytes + size
        counters.allocated_bytes = c
        if c > counters.allocated_bytes_peak:  # noqa: PLR1730
            counters.allocated_bytes_peak = c
        c = small.allocated_bytes + large.allocated_bytes
        if c > aggregate.allocated_bytes_peak:  # noqa: PLR1730
            aggregate.allocated_bytes_peak = c
        c = counters.requested_bytes + requested
        counters.requested_bytes = c
        if c > counters.requested_bytes_peak:  # noqa: PLR1730
            counters.requested_bytes_peak = c
        c = small.requested_bytes + large.requested_bytes
        if c > aggregate.requested_bytes_peak:  # noqa: PLR1730
            aggregate.requested_bytes_peak = c
        if small.pending or large.pending:
            self._raise_active_peaks(counters)
        # record_split written out: allocations that split a block are the common case.
        if split_blocks > 0:
            c = counters.inactive_split + split_blocks
            counters.inactive_split = c
            if c > counters.inactive_split_peak:  # noqa: PLR1730
                counters.inactive_split_peak = c
            c = small.inactive_split + large.inactive_split
            if c > aggregate.inactive_split_peak:  # noqa: PLR1730
                aggregate.inactive_split_peak = c
        elif split_blocks < 0:
            counters.inactive_split += split_blocks
            counters.inactive_split_freed -= split_blocks
        if split_bytes > 0:
            c = counters.inactive_split_bytes + split_bytes
            counters.inactive_split_bytes = c
            if c > counters.inactive_split_bytes_peak:  # noqa: PLR1730
                counters.inactive_split_bytes_peak = c
            c = small.inactive_split_bytes + large.inactive_split_bytes
            if c > aggregate.inactive_split_bytes_peak:  # noqa: PLR1730
                aggregate.inactive_split_bytes_peak = c
        elif split_bytes < 0:
            counters.inactive_split_bytes += split_bytes
            counters.inactive_split_bytes_freed -= split_bytes

    def _raise_active_peaks(self, counters: PoolCounters) -> None:
        # An allocation while blocks are pending: active may pass allocation's peak.
        small, large, aggregate = self.small, self.large, self.aggregate
        c = counters.allocation + counters.pending
        if c > counters.active_peak:  # noqa: PLR1730
            counters.active_peak = c
        c = counters.allocated_bytes + counters.pending_bytes
        if c > counters.active_bytes_peak:  # noqa: PLR1730
            counters.active_bytes_peak = c
        c = small.allocation + small.pending + large.allocation + large.pending
        if c > aggregate.active_peak:  # noqa: PLR1730
            aggregate.active_peak = c
        c = small.allocated_bytes + small.pending_bytes + large.allocated_bytes + large.pending_bytes
        if c > aggregate.active_bytes_peak:  # noqa: PLR1730
            aggregate.active_bytes_peak = c

    def record_split(self, pool: int, blocks: int, nbytes: int) -> None:
        """Inactive split blocks and bytes changed by ``blocks`` and ``nbytes`` (either sign).

        A split adds a free remainder; taking a free split block whole, or a merge,
        removes one.
        """
        counters = self.pools[pool]
        if blocks > 0:
            c = counters.inactive_split + blocks
            counters.inactive_split = c
            if c > counters.inactive_split_peak:  # noqa: PLR1730
                counters.inactive_split_peak = c
            c = self.small.inactive_split + self.large.inactive_split
            if c > self.aggregate.inactive_split_peak:  # noqa: PLR1730
                self.aggregate.inactive_split_peak = c
        elif blocks < 0:
            counters.inactive_split += blocks
            counters.inactive_split_freed -= blocks
        if nbytes > 0:
            c = counters.inactive_split_bytes + nbytes
            counters.inactive_split_bytes = c
            if c > counters.inactive_split_bytes_peak:  # noqa: PLR1730
                counters.inactive_split_bytes_peak = c
            c = self.small.inactive_split_bytes + self.large.inactive_split_bytes
            if c > self.aggregate.inactive_split_bytes_peak:  # noqa: PLR1730
                self.aggregate.inactive_split_bytes_peak = c
        elif nbytes < 0:
            counters.inactive_split_bytes += nbytes
            counters.inactive_split_bytes_freed -= nbytes

    def record_free(
        self, pool: int, size: int, requested: int, split_blocks: int, split_bytes: int
    ) -> None:
        """A block of ``size`` bytes came back and is reusable at once (no other-stream
        uses): :meth:`record_free_requested` and :meth:`record_free_completed` in one."""
        counters = self.pools[pool]
        counters.allocation -= 1
        counters.allocation_freed += 1
        counters.allocated_bytes -= size
        counters.allocated_bytes_freed += size
        counters.requested_bytes -= requested
        counters.requested_bytes_freed += requested
        # record_split written out: frees that merge with a free neighbour are the
        # common case.
        if split_blocks < 0:
            counters.inactive_split += split_blocks
            counters.inactive_split_freed -= split_blocks
        elif split_blocks > 0:
            c = counters.inactive_split + split_blocks
            counters.inactive_split = c
            if c > counters.inactive_split_peak:  # noqa: PLR1730
                counters.inactive_split_peak = c
            c = self.small.inactive_split + self.large.inactive_split
            if c > self.aggregate.inactive_split_peak:  # noqa: PLR1730
                self.aggregate.inactive_split_peak = c
        if split_bytes < 0:
            counters.inactive_split_bytes += split_bytes
            counters.inactive_split_bytes_freed -= split_bytes
        elif split_bytes > 0:
            c = counters.inactive_split_bytes + split_bytes
            counters.inactive_split_bytes = c
            if c > counters.inactive_split_bytes_peak:  # noqa: PLR1730
                counters.inactive_split_bytes_peak = c
            c = self.small.inactive_split_bytes + self.large.inactive_split_bytes
            if c > self.aggregate.inactive_split_bytes_peak:  # noqa: PLR1730
                self.aggregate.inactive_split_bytes_peak = c

    def record_free_requested(self, pool: int, size: int) -> None:
        """A block of ``size`` bytes was given back by its user; it is pending until
        its uses on other streams complete."""
        counters = self.pools[pool]
        counters.allocation -= 1
        counters.allocation_freed += 1
        counters.allocated_bytes -= size
        counters.allocated_bytes_freed += size
        counters.pending += 1
        counters.pending_bytes += size

    def record_free_completed(
        self, pool: int, size: int, requested: int, split_blocks: int, split_bytes: int
    ) -> None:
        """A pending block became reusable; inactive split blocks/bytes changed by the deltas."""
        counters = self.pools[pool]
        counters.pending -= 1
        counters.pending_bytes -= size
        counters.requested_bytes -= requested
        counters.requested_bytes_freed += requested
        if split_blocks or split_bytes:
            self.record_split(pool, split_blocks, split_bytes)

    def record_segment_alloc(self, pool: int, size: int) -> None:
        """A segment of ``size`` bytes was reserved from the device."""
        counters = self.pools[pool]
        small, large, aggregate = self.small, self.large, self.aggregate
        c = counters.segment + 1
        counters.segment = c
        if c > counters.segment_peak:  # noqa: PLR1730
            counters.segment_peak = c
        c = small.segment + large.segment
        if c > aggregate.segment_peak:  # noqa: PLR1730
            aggregate.segment_peak = c
        c = counters.reserved_bytes + size
        counters.reserved_bytes = c
        if c > counters.reserved_bytes_peak:  # noqa: PLR1730
            counters.reserved_bytes_peak = c
        c = small.reserved_bytes + large.reserved_bytes
        if c > aggregate.reserved_bytes_peak:  # noqa: PLR1730
            aggregate.reserved_bytes_peak = c

    def record_segment_free(self, pool: int, size: int) -> None:
        """A segment of ``size`` bytes was returned to the device."""
        counters = self.pools[pool]
        counters.segment -= 1
        counters.segment_freed += 1
        counters.reserved_bytes -= size
        counters.reserved_bytes_freed += size

    def reset_peak(self) -> None:
        """Set every peak to its current value (``reset_peak_memory_stats``)."""
        aggregate = self.aggregate
        for name in FAMILIES:
            for pool in (SMALL_POOL, LARGE_POOL):
                setattr(self.pools[pool], name + "_peak", self.get(name, pool)[0])
            setattr(aggregate, name + "_peak", self.get(name)[0])
        for stat in (self.oversize_allocations, self.oversize_segments):
            stat[1] = stat[0]

    def reset_accumulated(self) -> None:
        """Zero the allocated/freed sums and the event counters."""
        for counters in (self.small, self.large):
            for name in (*_COUNTED, "pending", "pending_bytes"):
                setattr(counters, name + "_base", getattr(counters, name))
            for name in _COUNTED:
                setattr(counters, name + "_freed", 0)
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
            result[name] = {pool: one(self.get(name, i)) for i, pool in enumerate(POOL_TYPE_NAMES)}
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
