"""The fused optimizer kernels' list argument, packed without a GPU.

``refimpl.optim._cuda_update`` packs ``SgdList<T>``/``AdamList<T>`` (its CUDA source)
with ``struct``; the bytes must be those of the C struct, which a ctypes mirror declared
field by field as the source declares them gives independently.
"""

from __future__ import annotations

import ctypes

import pytest

from refimpl import _dtype as D
from refimpl.optim import _cuda_update as U


def _mirror(kind: str, scalar) -> type:
    m = U._MAX_TENSORS
    ptrs = ("p", "g", "buf") if kind == "sgd" else ("p", "g", "m", "v", "vmax")
    fields = [(f, ctypes.c_uint64 * m) for f in ptrs] + [("n", ctypes.c_longlong * m)]
    if kind == "adam":
        fields += [("bc2_sqrt", scalar * m), ("neg_step_size", scalar * m)]
    return type(f"{kind}_list", (ctypes.Structure,), {"_fields_": fields})


@pytest.mark.parametrize("kind", ["sgd", "adam"])
@pytest.mark.parametrize(("dtype", "scalar"), [(D.float32, ctypes.c_float),
                                               (D.float64, ctypes.c_double)])
@pytest.mark.parametrize("count", [1, 3, U._MAX_TENSORS])
def test_list_struct_packs_the_c_layout(kind, dtype, scalar, count):
    mirror = _mirror(kind, scalar)()
    names = [f[0] for f in mirror._fields_]
    items = []
    for i in range(count):
        pointers = len(names) - (3 if kind == "adam" else 1)
        item = [4096 * (i + 1) + 256 * j for j in range(pointers)]
        item.append(1000 + i)  # n
        if kind == "adam":
            item += [0.5 + i, -0.25 * (i + 1)]
        items.append(tuple(item))
    for i, item in enumerate(items):
        for name, value in zip(names, item):
            getattr(mirror, name)[i] = value
    layout = U._list_struct(kind, dtype)
    values = []
    for column in zip(*items):
        values += column
        values += [0] * (U._MAX_TENSORS - count)
    assert layout.size == ctypes.sizeof(mirror)
    assert layout.pack(*values) == bytes(mirror)
