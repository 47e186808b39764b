"""test_cuda.py's ``test_allocator_fuzz`` at the seed's size, on a real GPU.

The seed runs 10,000 random operations (allocate an int32 tensor of 2 to 200 MiB
filled with its serial number, free a random live one, or ``empty_cache``), keeps at
most 1 GiB live, and when it frees a tensor checks that *every* element still holds the
tensor's number (``torch.all(v == x)``): a caching allocator that hands the same memory
to two live tensors, or that splits and merges blocks wrongly, overwrites someone's data.

refimpl has no CUDA reductions yet, so its check copies the tensor to the host and
compares every element there; torch (when it has CUDA) runs the seed's check as
written, as the oracle. Skipped without a GPU. It moves a few hundred GB between device
and host, so it takes minutes.
"""

from __future__ import annotations

import random

import pytest

import refimpl
import refimpl.cuda as cuda  # noqa: PLR0402 - refimpl also exports a cuda() op

pytestmark = [
    pytest.mark.skipif(not cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.timeout(1800),
]

OPERATIONS = 10_000
MiB = 1 << 20
SMALLEST, LARGEST = 2 * MiB // 4, 200 * MiB // 4  # elements of int32, as the seed
LIVE_LIMIT = 1024 * MiB / 4

try:
    import torch

    HAS_TORCH = torch.cuda.is_available()
except ImportError:  # pragma: no cover - the GPU image has torch
    torch = None
    HAS_TORCH = False


def _refimpl_holds(value: int, x) -> bool:
    return bool((x.cpu().numpy() == value).all())


def _torch_holds(value: int, x) -> bool:
    return bool(torch.all(value == x))


def _fuzz(t, holds) -> tuple[int, list[int]]:
    """The seed's loop on the target module ``t``; returns (tensors made, corrupt ids)."""
    rng = random.Random(123)
    live: list[tuple[int, object]] = []
    total = 0
    made = 0
    corrupt: list[int] = []

    def alloc() -> None:
        nonlocal total, made
        n = rng.randrange(SMALLEST, LARGEST)
        live.append((made, t.full((n,), made, dtype=t.int32, device="cuda")))
        made += 1
        total += n

    def free() -> None:
        nonlocal total
        value, x = live.pop(rng.randrange(0, len(live)))
        if not holds(value, x):
            corrupt.append(value)
        total -= x.numel()

    choices = [alloc, free, t.cuda.memory.empty_cache]
    for _ in range(OPERATIONS):
        while total >= LIVE_LIMIT:
            free()
        (action,) = rng.choices(choices, weights=[1, 1 if live else 0, 0.1])
        action()
    while live:
        free()
    return made, corrupt


def test_allocator_fuzz_seed_size_refimpl() -> None:
    base = refimpl.cuda.memory_allocated()
    made, corrupt = _fuzz(refimpl, _refimpl_holds)
    assert corrupt == [], f"tensors whose memory was overwritten: {corrupt[:20]}"
    assert made > 4000  # the seed's RNG makes 5,026 allocations
    assert refimpl.cuda.memory_allocated() == base


@pytest.mark.skipif(not HAS_TORCH, reason="needs torch with CUDA")
def test_allocator_fuzz_seed_size_torch() -> None:
    made, corrupt = _fuzz(torch, _torch_holds)
    assert corrupt == [] and made > 4000
    torch.cuda.empty_cache()

