"""The ``memory_summary()`` table, laid out exactly as torch lays it out.

Spec: cuda_memory (memory_summary clause). Sizes are printed in the unit that suits
the ``all`` row of their metric (B, KiB, MiB, ... switching at 768 of a unit),
counts in units, K or M (switching at 750 of a unit), so the three rows of a
metric share one unit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

__all__ = ["format_memory_summary"]

_WIDTH = 75
_SIZE_UNITS = ("B  ", "KiB", "MiB", "GiB", "TiB", "PiB")
_COUNT_UNITS = (" ", "K", "M")

_METRICS = (
    ("allocated_bytes", "Allocated memory", "size"),
    ("active_bytes", "Active memory", "size"),
    ("requested_bytes", "Requested memory", "size"),
    ("reserved_bytes", "GPU reserved memory", "size"),
    ("inactive_split_bytes", "Non-releasable memory", "size"),
    ("allocation", "Allocations", "count"),
    ("active", "Active allocs", "count"),
    ("segment", "GPU reserved segments", "count"),
    ("inactive_split", "Non-releasable allocs", "count"),
)
_OVERSIZE = (
    ("oversize_allocations", "Oversize allocations"),
    ("oversize_segments", "Oversize GPU segments"),
)
_FIELDS = ("current", "peak", "allocated", "freed")


def _size_cell(value: int, reference: float) -> str:
    unit = _SIZE_UNITS[0]
    for next_unit in _SIZE_UNITS[1:]:
        if reference < 768 * 1024:
            break
        unit = next_unit
        value //= 1024
        reference /= 1024
    return f"{value:6d} {unit}"


def _count_cell(value: int, reference: float) -> str:
    unit = _COUNT_UNITS[0]
    for next_unit in _COUNT_UNITS[1:]:
        if reference < 750 * 1000:
            break
        unit = next_unit
        value //= 1000
        reference /= 1000
    return f"{value:7d} {unit} "


def _row(name: str, cell: Callable[[int, float], str], values: list[int], refs: list[int]) -> str:
    cells = " | ".join(cell(v, r) for v, r in zip(values, refs, strict=True))
    return f" {name:<21} | {cells} "


def format_memory_summary(stats: Mapping[str, int], device: int, abbreviated: bool) -> str:
    """The table for flat ``memory_stats()`` output ``stats`` of device ``device``."""
    lines = [
        "=" * _WIDTH,
        f" {'':16} PyTorch CUDA memory summary, device ID {device:<17d} ",
        "-" * _WIDTH,
        (
            f"  {'':9} CUDA OOMs: {stats['num_ooms']:<12d} | {'':6} cudaMalloc retries: "
            f"{stats['num_alloc_retries']:<8d}  "
        ),
        "=" * _WIDTH,
        "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ",
    ]
    for key, title, kind in _METRICS:
        cell = _size_cell if kind == "size" else _count_cell
        lines.append("-" * _WIDTH)
        rows = [("all", title)]
        if not abbreviated:
            rows += [("large_pool", "      from large pool"), ("small_pool", "      from small pool")]
        refs = [stats[f"{key}.all.{field}"] for field in _FIELDS]
        for pool, name in rows:
            values = [stats[f"{key}.{pool}.{field}"] for field in _FIELDS]
            lines.append(_row(name, cell, values, refs))
    for key, title in _OVERSIZE:
        lines.append("-" * _WIDTH)
        values = [stats[f"{key}.{field}"] for field in _FIELDS]
        lines.append(_row(title, _count_cell, values, values))
    lines.append("=" * _WIDTH)
    return "|" + "|\n|".join(lines) + "|\n"
