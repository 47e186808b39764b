"""Errors raised by refimpl's CUDA caching allocator (spec: cuda_memory, ALLOC clauses).

``OutOfMemoryError`` mirrors ``torch.cuda.OutOfMemoryError``: a ``RuntimeError``
subclass, so ``assertRaisesRegex(RuntimeError, "Tried to allocate")`` matches it
exactly as it matches torch's.
"""

from __future__ import annotations

__all__ = ["OutOfMemoryError"]


class OutOfMemoryError(RuntimeError):
    """The caching allocator could not find or reserve memory for a request.

    Raised after the allocator has freed its cache and retried, with torch's
    message: ``CUDA out of memory. Tried to allocate ... GPU 0 has a total
    capacity of ...``.
    """
