"""Deterministic inputs: numpy arrays from a seeded generator, then target tensors.

The seed of an input is derived from a stable hash (BLAKE2b) of the case id and
the input's name, never from Python's ``hash()`` (salted per process) and never
from the target's own RNG, so every target and every run sees the same numbers.
"""

from __future__ import annotations

import hashlib
from typing import Any

import ml_dtypes
import numpy as np

from conformance.model import InputSpec

#: numpy dtype used to hold each FORMAT.md dtype (bfloat16 values live in float32).
NUMPY_DTYPES: dict[str, Any] = {
    "bool": np.bool_,
    "uint8": np.uint8,
    "int8": np.int8,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "float16": np.float16,
    "bfloat16": np.float32,
    "float32": np.float32,
    "float64": np.float64,
    "complex64": np.complex64,
    "complex128": np.complex128,
}


def seed_for(case_id: str, name: str) -> int:
    """The generator seed of input ``name`` of case ``case_id`` (stable across runs)."""
    digest = hashlib.blake2b(f"{case_id}\x00{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def numpy_input(spec: InputSpec, case_id: str) -> np.ndarray:
    """The numpy array of one input, in the numpy dtype that holds ``spec.dtype``."""
    seed = spec.seed if spec.seed is not None else seed_for(case_id, spec.name)
    rng = np.random.default_rng(seed)
    dtype = spec.dtype
    if spec.kind in ("randn", "rand"):
        draw = rng.standard_normal if spec.kind == "randn" else rng.random
        data = np.asarray(draw(spec.args))
        if dtype.startswith("complex"):
            data = data + 1j * np.asarray(draw(spec.args))
        elif dtype == "bool":
            data = data > (0.0 if spec.kind == "randn" else 0.5)
    elif spec.kind == "randint":
        low, high, shape = spec.args
        data = np.asarray(rng.integers(low, high, size=shape))
    else:
        data = np.asarray(spec.args)
    if dtype == "bfloat16":
        data = data.astype(ml_dtypes.bfloat16)
    return np.ascontiguousarray(data.astype(NUMPY_DTYPES[dtype]))


def build_inputs(
    specs: tuple[InputSpec, ...], case_id: str, adapter: Any
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Every input as a target tensor and as a (read-only) numpy array, by name."""
    tensors: dict[str, Any] = {}
    arrays: dict[str, np.ndarray] = {}
    for spec in specs:
        array = numpy_input(spec, case_id)
        tensors[spec.name] = adapter.make_tensor(array, spec.dtype, spec.device, spec.requires_grad)
        array.setflags(write=False)
        arrays[spec.name] = array
    return tensors, arrays
