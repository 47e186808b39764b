"""Allocator settings: the ``PYTORCH_ALLOC_CONF`` / ``PYTORCH_CUDA_ALLOC_CONF`` string.

Spec: cuda_memory (allocator settings clauses). The grammar is torch's: a comma
separated list of ``key:value`` pairs, values may be ``[a:b,c:d]`` lists, and
whitespace is ignored everywhere. The string is read in two passes, as torch
does: a device-generic pass (rounding and splitting knobs) and a CUDA pass that
knows the CUDA-only keys and rejects unknown ones. Malformed strings raise the
exception type and message torch 2.13 raises; the one deliberate difference is
that a failing string changes nothing (torch may apply the keys it had already
read before the error).

Settings refimpl does not implement raise ``NotImplementedError`` naming them:
``expandable_segments:True`` and ``backend:cudaMallocAsync``.
"""

from __future__ import annotations

import math
import os
import re
import threading
from dataclasses import dataclass, field, replace

__all__ = [
    "SIZE_MAX",
    "AllocatorConfig",
    "get_config",
    "parse_allocator_settings",
    "set_allocator_settings",
]

MiB = 1024 * 1024
SIZE_MAX = 2**64 - 1
ROUNDUP_INTERVALS = 16  # one entry per power of two from 1 MiB to 32 GiB and above
_LARGE_BUFFER_MB = 20
_MAX_REGISTER_THREADS = 128

_GENERIC_KEYS = frozenset(
    {
        "max_split_size_mb",
        "max_non_split_rounding_mb",
        "garbage_collection_threshold",
        "roundup_power2_divisions",
        "expandable_segments",
        "pinned_use_background_threads",
    }
)
_CUDA_KEYS = frozenset(
    {
        "backend",
        "release_lock_on_cudamalloc",
        "release_lock_on_hipmalloc",
        "pinned_use_cuda_host_register",
        "pinned_use_hip_host_register",
        "pinned_num_register_threads",
        "pinned_reserve_segment_size_mb",
        "graph_capture_record_stream_reuse",
        "per_process_memory_fraction",
        "pinned_free_catch_all",
        "throw_on_cudamalloc_oom",
    }
)


@dataclass
class AllocatorConfig:
    """The allocator knobs, with torch's defaults.

    ``max_split_size`` is in bytes; ``SIZE_MAX`` means "no limit" (every block may
    be split). ``roundup_power2_divisions`` holds one division count per power-of-two
    interval starting at 1 MiB (index 0: [1 MiB, 2 MiB), ..., index 15: >= 32 GiB);
    0 or 1 means "round to 512 bytes only".
    """

    max_split_size: int = SIZE_MAX
    max_non_split_rounding_size: int = _LARGE_BUFFER_MB * MiB
    garbage_collection_threshold: float = 0.0
    roundup_power2_divisions: list[int] = field(default_factory=lambda: [0] * ROUNDUP_INTERVALS)
    expandable_segments: bool = False
    pinned_use_background_threads: bool = False
    backend: str = "native"
    release_lock_on_cudamalloc: bool = False
    pinned_use_cuda_host_register: bool = False
    pinned_num_register_threads: int = 1
    pinned_reserve_segment_size_mb: int = 0
    graph_capture_record_stream_reuse: bool = False
    per_process_memory_fraction: float = 1.0
    last_allocator_settings: str = ""
    # Whether any interval rounds to power-of-two divisions (kept in step by
    # __post_init__ and the parser; the allocator's hot path reads it).
    roundup_enabled: bool = False

    def __post_init__(self) -> None:
        self.roundup_enabled = any(d > 1 for d in self.roundup_power2_divisions)

    def roundup_divisions_for(self, size: int) -> int:
        """Division count that applies to a request of ``size`` bytes."""
        index = size.bit_length() - 1 - 20
        if index < 0:
            index = 0
        elif index >= ROUNDUP_INTERVALS:
            index = ROUNDUP_INTERVALS - 1
        return self.roundup_power2_divisions[index]

    def copy(self) -> AllocatorConfig:
        """An independent copy (the division list is not shared)."""
        return replace(self, roundup_power2_divisions=list(self.roundup_power2_divisions))

    def snapshot_settings(self) -> dict[str, object]:
        """The ``allocator_settings`` entry of a memory snapshot, keyed as torch keys it."""
        return {
            "PYTORCH_CUDA_ALLOC_CONF": self.last_allocator_settings,
            # torch stores the size_t limit into an int64, so "no limit" reads -1.
            "max_split_size": _as_int64(self.max_split_size),
            "garbage_collection_threshold": self.garbage_collection_threshold,
            "expandable_segments": self.expandable_segments,
            "pinned_num_register_threads": self.pinned_num_register_threads,
            "release_lock_on_cudamalloc": self.release_lock_on_cudamalloc,
            "pinned_use_cuda_host_register": self.pinned_use_cuda_host_register,
            "graph_capture_record_stream_reuse": self.graph_capture_record_stream_reuse,
            "roundup_power2_divisions": {
                str(1 << i): v for i, v in enumerate(self.roundup_power2_divisions)
            },
        }


def _as_int64(value: int) -> int:
    return value - 2**64 if value >= 2**63 else value


class _Tokens:
    """The settings string cut into keys, values and the punctuation ``, : [ ]``."""

    def __init__(self, text: str) -> None:
        self.items: list[str] = []
        buffer: list[str] = []
        for ch in text:
            if ch in ",:[]":
                if buffer:
                    self.items.append("".join(buffer))
                    buffer.clear()
                self.items.append(ch)
            elif not ch.isspace():
                buffer.append(ch)
        if buffer:
            self.items.append("".join(buffer))

    def __len__(self) -> int:
        return len(self.items)

    def at(self, i: int) -> str:
        if i >= len(self.items):
            raise RuntimeError("Index out of bounds in ConfigTokenizer")
        return self.items[i]

    def expect(self, i: int) -> None:
        # torch checks that the index exists but ignores whether the token matches,
        # so "max_split_size_mb;64" style typos surface later, as torch surfaces them.
        self.at(i)

    def size_t(self, i: int) -> int:
        return _stoull(self.at(i))

    def double(self, i: int) -> float:
        return _stod(self.at(i))

    def boolean(self, i: int) -> bool:
        token = self.at(i)
        if token == "True":
            return True
        if token == "False":
            return False
        raise ValueError(
            f"Expected 'True' or 'False' at index {i} in ConfigTokenizer but got '{token}'"
        )

    def skip_key(self, i: int) -> int:
        """Index of the last token of the value that follows the key at ``i``."""
        self.expect(i + 1)
        i += 2
        if self.at(i) != "[":
            return i
        i += 1
        while i < len(self.items) and self.items[i] != "]":
            i += 1
        if i >= len(self.items):
            raise RuntimeError(
                "Expected closing bracket ']' in ConfigTokenizer but reached end of config"
            )
        return i


_UINT_PREFIX = re.compile(r"[+-]?\d+")
_FLOAT_PREFIX = re.compile(
    r"[+-]?(?:inf(?:inity)?|nan|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)", re.IGNORECASE
)


def _stoull(token: str) -> int:
    """``std::stoull``: the leading integer, negatives wrapping modulo 2**64."""
    match = _UINT_PREFIX.match(token)
    if match is None:
        raise ValueError("stoull")
    value = int(match.group())
    if abs(value) > SIZE_MAX:
        raise IndexError("stoull")
    return value % 2**64


def _stod(token: str) -> float:
    """``std::stod``: the leading floating-point number of the token."""
    match = _FLOAT_PREFIX.match(token)
    if match is None:
        raise ValueError("stod")
    text = match.group()
    value = float(text)
    if math.isinf(value) and "inf" not in text.lower():
        raise IndexError("stod")
    return value


def _is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def _parse_mb_limit(tokens: _Tokens, i: int, key: str) -> tuple[int, int]:
    tokens.expect(i + 1)
    value = tokens.size_t(i + 2)
    if value < _LARGE_BUFFER_MB:
        raise ValueError(f"CachingAllocator option {key} too small, must be >= {_LARGE_BUFFER_MB}")
    return i + 2, min(value, SIZE_MAX // MiB) * MiB


def _parse_roundup(tokens: _Tokens, i: int, divisions: list[int]) -> int:
    tokens.expect(i + 1)
    i += 2
    if tokens.at(i) != "[":
        value = tokens.size_t(i)
        if not _is_power_of_two(value):
            raise ValueError("For roundups, the divisions has to be power of 2 ")
        divisions[:] = [value] * ROUNDUP_INTERVALS
        return i
    first = True
    last_index = 0
    i += 1
    while i < len(tokens) and tokens.items[i] != "]":
        bound_index = i
        tokens.expect(i + 1)
        i += 2
        value = tokens.size_t(i)
        if value != 0 and not _is_power_of_two(value):
            raise ValueError(
                "For roundups, the divisions has to be power of 2 or 0 to disable roundup "
            )
        if tokens.items[bound_index] == ">":
            for k in range(last_index + 1, ROUNDUP_INTERVALS):
                divisions[k] = value
        else:
            boundary = tokens.size_t(bound_index)
            if not _is_power_of_two(boundary):
                raise ValueError("For roundups, the intervals have to be power of 2 ")
            index = min(boundary.bit_length() - 1, ROUNDUP_INTERVALS - 1)
            if first:
                for k in range(index):
                    divisions[k] = value
                first = False
            divisions[index] = value
            last_index = index
        if tokens.at(i + 1) != "]":
            i += 1
            tokens.expect(i)
        i += 1
    if i >= len(tokens):
        raise RuntimeError(
            "Expected closing bracket ']' in ConfigTokenizer but reached end of config"
        )
    return i


def _generic_pass(tokens: _Tokens, cfg: AllocatorConfig) -> None:
    i = 0
    while i < len(tokens):
        key = tokens.at(i)
        if key in ("max_split_size_mb", "max_non_split_rounding_mb"):
            i, limit = _parse_mb_limit(tokens, i, key)
            if key == "max_split_size_mb":
                cfg.max_split_size = limit
            else:
                cfg.max_non_split_rounding_size = limit
        elif key == "garbage_collection_threshold":
            tokens.expect(i + 1)
            i += 2
            value = tokens.double(i)
            if not 0.0 < value < 1.0:
                raise ValueError("garbage_collect_threshold is invalid, set it in (0.0, 1.0)")
            cfg.garbage_collection_threshold = value
        elif key == "roundup_power2_divisions":
            i = _parse_roundup(tokens, i, cfg.roundup_power2_divisions)
        elif key in ("expandable_segments", "pinned_use_background_threads"):
            tokens.expect(i + 1)
            i += 2
            setattr(cfg, key, tokens.boolean(i))
        else:
            i = tokens.skip_key(i)
        if i + 1 < len(tokens):
            i += 1
        i += 1


def _cuda_pass(tokens: _Tokens, cfg: AllocatorConfig) -> None:
    i = 0
    while i < len(tokens):
        key = tokens.at(i)
        if key == "backend":
            tokens.expect(i + 1)
            i += 2
            backend = tokens.at(i)
            if backend not in ("native", "cudaMallocAsync"):
                raise ValueError(
                    "Unknown allocator backend, options are native and cudaMallocAsync"
                )
            cfg.backend = backend
        elif key in ("release_lock_on_cudamalloc", "release_lock_on_hipmalloc"):
            tokens.expect(i + 1)
            i += 2
            cfg.release_lock_on_cudamalloc = tokens.boolean(i)
        elif key in ("pinned_use_cuda_host_register", "pinned_use_hip_host_register"):
            tokens.expect(i + 1)
            i += 2
            cfg.pinned_use_cuda_host_register = tokens.boolean(i)
        elif key == "pinned_num_register_threads":
            tokens.expect(i + 1)
            i += 2
            value = tokens.size_t(i)
            if not _is_power_of_two(value):
                raise ValueError(f"Number of register threads has to be power of 2, got {value}")
            if value > _MAX_REGISTER_THREADS:
                raise ValueError(
                    "Number of register threads should be less than or equal to "
                    f"{_MAX_REGISTER_THREADS}, got {value}"
                )
            cfg.pinned_num_register_threads = value
        elif key == "pinned_reserve_segment_size_mb":
            tokens.expect(i + 1)
            i += 2
            value = tokens.size_t(i)
            if value <= 0:
                raise ValueError("Pinned reserve segment size has to be greater than 0")
            cfg.pinned_reserve_segment_size_mb = value
        elif key == "graph_capture_record_stream_reuse":
            tokens.expect(i + 1)
            i += 2
            cfg.graph_capture_record_stream_reuse = tokens.boolean(i)
        elif key == "per_process_memory_fraction":
            tokens.expect(i + 1)
            i += 2
            value = tokens.double(i)
            if not 0.0 <= value <= 1.0:
                raise ValueError("per_process_memory_fraction is invalid, set it in [0.0, 1.0]")
            cfg.per_process_memory_fraction = value
        else:
            if key not in _GENERIC_KEYS and key not in _CUDA_KEYS:
                raise ValueError(f"Unrecognized key '{key}' in CUDA allocator config.")
            i = tokens.skip_key(i)
        if i + 1 < len(tokens):
            i += 1
        i += 1


def parse_allocator_settings(text: str, base: AllocatorConfig | None = None) -> AllocatorConfig:
    """Apply the settings string ``text`` to a copy of ``base`` and return the copy.

    As in torch, every parse first resets ``max_split_size``,
    ``roundup_power2_divisions`` and ``garbage_collection_threshold`` to their
    defaults; the other keys keep their previous values unless named.
    """
    cfg = (base or AllocatorConfig()).copy()
    defaults = AllocatorConfig()
    cfg.max_split_size = defaults.max_split_size
    cfg.roundup_power2_divisions = defaults.roundup_power2_divisions
    cfg.garbage_collection_threshold = defaults.garbage_collection_threshold
    cfg.last_allocator_settings = text
    tokens = _Tokens(text)
    _generic_pass(tokens, cfg)
    _cuda_pass(tokens, cfg)
    cfg.roundup_enabled = any(d > 1 for d in cfg.roundup_power2_divisions)
    if cfg.expandable_segments:
        raise NotImplementedError(
            "expandable_segments:True is not implemented by refimpl's caching allocator"
        )
    if cfg.backend == "cudaMallocAsync":
        raise NotImplementedError(
            "backend:cudaMallocAsync is not implemented by refimpl; "
            "only the native caching allocator is"
        )
    return cfg


_config_lock = threading.Lock()
_config: AllocatorConfig | None = None


def get_config() -> AllocatorConfig:
    """The process-wide settings, read from the environment on first use.

    ``PYTORCH_ALLOC_CONF`` wins over the older ``PYTORCH_CUDA_ALLOC_CONF`` (and
    ``PYTORCH_HIP_ALLOC_CONF``), as in torch.
    """
    global _config
    cfg = _config
    if cfg is not None:
        return cfg
    with _config_lock:
        if _config is None:
            for name in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF"):
                text = os.environ.get(name)
                if text is not None:
                    _config = parse_allocator_settings(text)
                    break
            else:
                _config = AllocatorConfig()
        return _config


def set_allocator_settings(text: str) -> None:
    """Parse ``text`` into the process-wide configuration (``_set_allocator_settings``)."""
    current = get_config()
    new = parse_allocator_settings(text, current)
    with _config_lock:
        # Update in place: every device allocator holds this object.
        current.__dict__.update(new.__dict__)
