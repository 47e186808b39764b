"""Convolution and pooling keep the geometry their checks passed, per argument metadata:
a repeated call must still give torch's answers, and a call that differs in any checked
piece (shape, dtype, geometry) must be checked afresh."""

from __future__ import annotations

import pytest

import refimpl as t
from refimpl.ops import nn_conv, nn_pool
from refimpl.ops._helpers import int_key


def test_int_key_takes_only_plain_values():
    assert int_key((1, [2, 3], (4,), None, True, "x")) == (1, (2, 3), (4,), None, True, "x")
    assert int_key((t.tensor(2),)) is None  # a tensor's value may change in place
    assert int_key(([1.5],)) is None


def test_conv_memo_checks_each_new_geometry():
    nn_conv._CHECKED.clear()
    x, w = t.randn(1, 2, 5, 5), t.randn(3, 2, 3, 3)
    first = t.nn.functional.conv2d(x, w, padding=1)
    assert len(nn_conv._CHECKED) == 1
    again = t.nn.functional.conv2d(x, w, padding=1)
    assert len(nn_conv._CHECKED) == 1 and t.equal(first, again)
    # the same shapes with a geometry whose output would be empty still fail
    with pytest.raises(RuntimeError, match="Kernel size can't be greater than actual input size"):
        t.nn.functional.conv2d(t.randn(1, 2, 2, 2), w)
    with pytest.raises(RuntimeError, match="expected scalar type Float but found Double"):
        t.nn.functional.conv2d(x, w.double(), padding=1)
    # another spelling of the geometry (tuples and lists) is a key of its own
    t.nn.functional.conv2d(x, w, stride=(1, 1), padding=[1, 1])
    assert len(nn_conv._CHECKED) == 2


def test_conv_memo_takes_a_modules_parameters():
    # nn.Conv2d's weight and bias are Parameters: a training step's convolutions reuse
    # their checked geometry too (a tensor subclass of another kind does not)
    nn_conv._CHECKED.clear()
    conv, x = t.nn.Conv2d(2, 3, 3, padding=1), t.randn(1, 2, 5, 5)
    first = conv(x)
    assert len(nn_conv._CHECKED) == 1
    assert t.equal(conv(x), first) and len(nn_conv._CHECKED) == 1

    class Other(t.Tensor):
        pass

    nn_conv._CHECKED.clear()
    other = Other._make(x._storage, x._shape, x._stride, x._offset, x.dtype)
    t.nn.functional.conv2d(other, conv.weight, padding=1)
    assert len(nn_conv._CHECKED) == 0


def test_pool_memo_checks_each_new_geometry():
    nn_pool._CHECKED.clear()
    x = t.randn(1, 2, 6, 6)
    a = t.nn.functional.max_pool2d(x, 2)
    b = t.nn.functional.max_pool2d(x, 2)
    assert len(nn_pool._CHECKED) == 1 and t.equal(a, b)
    with pytest.raises(RuntimeError, match="pad should be at most half"):
        t.nn.functional.max_pool2d(x, 2, padding=2)
    with pytest.raises(RuntimeError, match="Output size is too small"):
        t.nn.functional.max_pool2d(t.randn(1, 2, 1, 1), 2)
    assert len(nn_pool._CHECKED) == 1
