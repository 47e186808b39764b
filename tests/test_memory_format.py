"""Output layouts against torch (TENSOR-011/014): memory formats, ``preserve_format``
and the dim order elementwise ops, factories, copies and cat give their outputs.

Each program runs on refimpl and on torch from the same data; the strides (and values)
must agree.
"""

from __future__ import annotations

import numpy as np
import pytest
from _oracle import torch

import refimpl as t

DATA = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)


def _inputs(m):
    x = m.tensor(DATA)
    return {
        "x": x,
        "cl": x.contiguous(memory_format=m.channels_last),
        "xt": m.tensor(DATA[0, 0]).t(),                       # (5, 4), strides (1, 5)
        "perm": x.permute(0, 2, 3, 1),                        # a permuted 4-d view
        "col": m.tensor(DATA[0, 0, :, :1]),                   # (4, 1)
        "row": m.tensor(DATA[0, 0, :1, :]),                   # (1, 5)
        "sliced": m.tensor(DATA[0]).transpose(1, 2)[:, ::2],  # not dense
        "c1": m.tensor(DATA[:, :1]).contiguous(memory_format=m.channels_last),
        "exp": m.tensor(DATA[:1]).expand(2, 3, 4, 5),
        "cl3d": m.tensor(np.random.default_rng(1).standard_normal((2, 3, 2, 4, 5))
                         .astype(np.float32)).contiguous(memory_format=m.channels_last_3d),
    }


PROGRAMS = {
    "clone": lambda m, v: v["cl"].clone(),
    "clone_contiguous": lambda m, v: v["cl"].clone(memory_format=m.contiguous_format),
    "clone_to_channels_last": lambda m, v: v["x"].clone(memory_format=m.channels_last),
    "clone_transposed": lambda m, v: v["xt"].clone(),
    "clone_sliced": lambda m, v: v["sliced"].clone(),
    "clone_expanded": lambda m, v: v["exp"].clone(),
    "clone_size1_channel": lambda m, v: v["c1"].clone(),
    "clone_3d": lambda m, v: v["cl3d"].clone(),
    "empty_like": lambda m, v: m.empty_like(v["cl"]).fill_(1),
    "zeros_like": lambda m, v: m.zeros_like(v["cl"]),
    "ones_like_transposed": lambda m, v: m.ones_like(v["xt"]),
    "full_like_contiguous": lambda m, v: m.full_like(v["cl"], 2.0,
                                                     memory_format=m.contiguous_format),
    "zeros_like_sliced": lambda m, v: m.zeros_like(v["sliced"]),
    "rand_like_shape": lambda m, v: m.rand_like(v["cl"]).mul(0),
    "empty_channels_last": lambda m, v: m.empty(2, 3, 4, 5,
                                                memory_format=m.channels_last).fill_(0),
    "empty_channels_last_3d": lambda m, v: m.empty(2, 3, 2, 4, 5,
                                                   memory_format=m.channels_last_3d).fill_(0),
    "add_scalar": lambda m, v: v["cl"] + 1,
    "add_mixed": lambda m, v: v["cl"] + v["x"],
    "add_mixed_other_order": lambda m, v: v["x"] + v["cl"],
    "mul_broadcast_channel": lambda m, v: v["cl"] * m.tensor(DATA[0, :, :1, :1]),
    "unary": lambda m, v: v["cl"].exp(),
    "unary_transposed": lambda m, v: v["xt"].neg(),
    "binary_transposed": lambda m, v: v["xt"] * 2,
    "binary_permuted": lambda m, v: v["perm"] + 1,
    "broadcast_row_col": lambda m, v: v["col"] + v["row"],
    "broadcast_transposed_row": lambda m, v: v["xt"] + v["row"].t().expand(5, 4),
    "comparison": lambda m, v: v["cl"] > 0,
    "where": lambda m, v: m.where(v["cl"] > 0, v["cl"], 0.0),
    "clamp": lambda m, v: v["cl"].clamp(-0.5, 0.5),
    "lerp": lambda m, v: v["cl"].lerp(v["x"], 0.5),
    "addcmul": lambda m, v: m.addcmul(v["cl"], v["cl"], v["cl"]),
    "relu": lambda m, v: v["cl"].relu(),
    "to_dtype": lambda m, v: v["cl"].to(m.float64),
    "to_dtype_transposed": lambda m, v: v["xt"].to(m.float64),
    "to_memory_format": lambda m, v: v["x"].to(memory_format=m.channels_last),
    "contiguous": lambda m, v: v["cl"].contiguous(),
    "reshape_copy": lambda m, v: v["cl"].reshape(2, 60),
    "cat_channels_last": lambda m, v: m.cat([v["cl"], v["cl"]], 1),
    "cat_mixed": lambda m, v: m.cat([v["cl"], v["x"]], 1),
    "sum_keepdim": lambda m, v: v["cl"].sum(1, keepdim=True),
    "resize_channels_last": lambda m, v: m.zeros(0).resize_(2, 3, 4, 5,
                                                           memory_format=m.channels_last),
    "resize_as_preserve": lambda m, v: m.zeros(0).resize_as_(
        v["cl"], memory_format=m.preserve_format),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_output_layout_matches_torch(name):
    ours = PROGRAMS[name](t, _inputs(t))
    theirs = PROGRAMS[name](torch, _inputs(torch))
    assert ours.stride() == theirs.stride()
    assert ours.shape == theirs.shape
    if name.startswith(("empty", "resize", "rand")):
        return
    np.testing.assert_allclose(np.array(ours.tolist(), dtype=np.float64),
                               np.array(theirs.tolist(), dtype=np.float64), rtol=1e-6)


@pytest.mark.parametrize("prog", [
    lambda m: m.empty(2, 3, memory_format=m.channels_last),
    lambda m: m.empty(2, 3, memory_format=m.preserve_format),
    lambda m: m.zeros(0).resize_(2, 3, memory_format=m.channels_last),
    lambda m: m.zeros(0).resize_(2, 3, 4, 5, memory_format=m.preserve_format),
    lambda m: m.randn(2, 3).contiguous(memory_format=m.channels_last_3d),
])
def test_bad_memory_formats_raise_like_torch(prog):
    with pytest.raises(RuntimeError) as theirs:
        prog(torch)
    with pytest.raises(RuntimeError, match=f"^{theirs.value.args[0]}$"):
        prog(t)


def test_resize_to_a_format_keeps_the_version():
    x = t.zeros(2, 3, 4, 5)
    x.resize_(2, 3, 4, 5, memory_format=t.channels_last)
    assert (x.stride(), x._version) == ((60, 1, 15, 3), 0)


def test_fake_tensors_get_the_same_layout():
    from refimpl._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = t.empty(2, 3, 4, 5).contiguous(memory_format=t.channels_last)
        got = [(x + 1).stride(), x.exp().stride(), x.clone().stride(),
               t.cat([x, x], 1).stride()]
    assert got == [(60, 1, 15, 3), (60, 1, 15, 3), (60, 1, 15, 3), (120, 1, 30, 6)]
