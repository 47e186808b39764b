"""Differential tests of indexing against torch (spec TENSOR-400..407).

``x[idx]``: values, and for basic indices the view metadata (strides, offset, ``_base``,
shared storage), the autograd node and gradients. ``x[idx] = v``: the written tensor,
one version bump, the node (CopySlices / IndexPutBackward0) and gradients. The index
ops (gather, scatter, index_*, masked_*, take, nonzero): values, gradients, errors.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _oracle import In, check, randint, randn, torch

import refimpl as t

X = randn((3, 4, 5), seed=11)
M = randn((3, 4), seed=12)
V = randn((6,), seed=13)
S = In(1.5)


def _flat(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _node(x):
    fn = x.grad_fn
    return None if fn is None else type(fn).__name__.split(".")[-1].replace(
        "torch::autograd::", "")


def _meta(out, src) -> list:
    root = src if src._base is None else src._base
    return [(tuple(o.shape), tuple(o.stride()), o.storage_offset(), o._base is root,
             o.untyped_storage().data_ptr() == src.untyped_storage().data_ptr(), _node(o))
            for o in _flat(out)]


def _both(fn, inputs, requires_grad):
    out = []
    for m in (t, torch):
        args = [x.build(m, requires_grad) if isinstance(x, In) else x for x in inputs]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out.append((args, fn(m, *args)))
    return out


def check_index(fn, *inputs, grad: bool = True):
    """Values/errors/gradients (``check``) plus view metadata and the autograd node."""
    res = check(fn, *inputs, grad=grad)
    if isinstance(res, Exception):
        return res
    for rg in ((True, False) if grad else (False,)):
        (ra, r), (ta, T) = _both(fn, inputs, rg)
        assert _meta(r, ra[0]) == _meta(T, ta[0])
    return res


def L(m, data, dtype=None):
    """An index tensor built in module ``m``."""
    return m.tensor(data) if dtype is None else m.tensor(data, dtype=getattr(m, dtype))


GETITEM = {
    "int": (lambda m, x: x[1], X),
    "neg_int": (lambda m, x: x[-1], X),
    "int_int": (lambda m, x: x[0, 2], X),
    "slice": (lambda m, x: x[1:], X),
    "slice_full": (lambda m, x: x[:], X),
    "slice_step": (lambda m, x: x[::2, 1::2], X),
    "slice_clamp": (lambda m, x: x[-10:10, 3:100], X),
    "slice_empty": (lambda m, x: x[2:1], X),
    "full_slices_alias": (lambda m, x: x[:, :], X),
    "full_bounds_alias": (lambda m, x: x[0:3, :, 0:5], X),
    "ellipsis": (lambda m, x: x[...], X),
    "empty_tuple": (lambda m, x: x[()], X),
    "ellipsis_int": (lambda m, x: x[..., 1], X),
    "int_ellipsis_int": (lambda m, x: x[0, ..., 2], X),
    "two_ellipsis": (lambda m, x: x[0, ..., 0, ...], X),
    "none": (lambda m, x: x[None], X),
    "none_mid": (lambda m, x: x[:, None, 1], X),
    "none_both_ends": (lambda m, x: x[None, ..., None], X),
    "true": (lambda m, x: x[True], X),
    "false": (lambda m, x: x[False], X),
    "true_int": (lambda m, x: x[True, 0], X),
    "scalar_none": (lambda m, s: s[None], S),
    "scalar_ellipsis": (lambda m, s: s[...], S),
    "scalar_true": (lambda m, s: s[True], S),
    "zero_dim_int_tensor": (lambda m, x: x[L(m, 1)], X),
    "zero_dim_int_tensor_tuple": (lambda m, x: x[L(m, 1), :, L(m, [0, 1])], X),
    "zero_dim_bool_tensor": (lambda m, x: x[L(m, True)], X),
    "list": (lambda m, x: x[[0, 2]], X),
    "list_dup": (lambda m, x: x[[1, 1, 0]], X),
    "empty_list": (lambda m, x: x[[]], X),
    "tensor": (lambda m, x: x[L(m, [2, 0])], X),
    "tensor_int32": (lambda m, x: x[L(m, [2, 0], "int32")], X),
    "tensor_2d": (lambda m, x: x[L(m, [[0, 1], [1, 2]])], X),
    "tensor_negative": (lambda m, x: x[L(m, [-1, -3])], X),
    "adjacent_adv": (lambda m, x: x[:, [0, 1], [1, 2]], X),
    "separated_adv": (lambda m, x: x[[0, 1], :, [1, 2]], X),
    "adv_broadcast": (lambda m, x: x[L(m, [[0], [1]]), L(m, [0, 1, 2])], X),
    "adv_broadcast_separated": (lambda m, x: x[L(m, [0, 1]).view(2, 1), :, L(m, [0, 1, 2])], X),
    "int_and_adv": (lambda m, x: x[1, :, [0, 1]], X),
    "adv_int": (lambda m, x: x[[0, 1], 1], X),
    "slice_adv": (lambda m, x: x[1:3, L(m, [0, 3])], X),
    "ellipsis_adv": (lambda m, x: x[..., [0, 4]], X),
    "adv_none_adv": (lambda m, x: x[L(m, [0]), None, L(m, [0])], X),
    "none_adv_adv": (lambda m, x: x[None, L(m, [0]), L(m, [0])], X),
    "adv_none": (lambda m, x: x[L(m, [0, 1]), None], X),
    "mask_full": (lambda m, x: x[x > 0], X),
    "mask_leading": (lambda m, x: x[x[..., 0] > 0], X),
    "mask_rows": (lambda m, x: x[L(m, [True, False, True])], X),
    "mask_mid": (lambda m, x: x[:, L(m, [True, False, True, False])], X),
    "mask_and_adv": (lambda m, x: x[L(m, [True, False, True]), L(m, [0, 1])], X),
    "mask_2d_then_int": (lambda m, x: x[L(m, [[True, False, False, True]] * 3), 1], X),
    "mask_ellipsis": (lambda m, x: x[..., L(m, [True, False, True, False, True])], X),
    "bool_list": (lambda m, x: x[[True, False, True]], X),
    "mixed_list": (lambda m, x: x[[1, True]], X),
    "uint8_mask": (lambda m, x: x[L(m, [1, 0, 1], "uint8")], X),
    "list_as_tuple": (lambda m, x: x[[0, slice(None)]], X),
    "nested_list_as_tuple": (lambda m, x: x[[[0, 1], [1, 2]]], X),
    "long_list_is_index": (lambda m, v: v[[0, 1] * 16], V),
    "numpy_int": (lambda m, x: x[np.int64(1)], X),
    "numpy_array": (lambda m, x: x[np.array([0, 2])], X),
    "tensor_slice_bounds": (lambda m, x: x[L(m, 1):L(m, 3)], X),
    "int_tensor_values": (lambda m, x: x[[0, 2], 1], randint(0, 9, (3, 4))),
    "bool_values": (lambda m, x: (x > 0)[1:, [0, 1]], X),
    "complex_values": (lambda m, c: c[..., [1, 0]], In(np.arange(6).reshape(2, 3) * (1 + 2j),
                                                         "complex64")),
    "empty_dim_mask": (lambda m, x: x[:, :0][L(m, [True, False, True])], X),
}


@pytest.mark.parametrize("name", sorted(GETITEM))
def test_getitem(name):
    fn, *inputs = GETITEM[name]
    check_index(fn, *inputs, grad=name not in ("complex_values",))


GETITEM_ERRORS = {
    "int_range": (lambda m, x: x[5], X),
    "neg_int_range": (lambda m, x: x[-4], X),
    "second_int_range": (lambda m, x: x[0, 5], X),
    "range_after_none": (lambda m, x: x[None, 5], X),
    "range_after_ellipsis": (lambda m, x: x[..., 7], X),
    "too_many": (lambda m, x: x[0, 0, 0, 0], X),
    "too_many_1d": (lambda m, v: v[0, 0], V),
    "scalar_int": (lambda m, s: s[0], S),
    "scalar_int_1": (lambda m, s: s[1], S),
    "scalar_slice": (lambda m, s: s[:], S),
    "scalar_tensor": (lambda m, s: s[L(m, [0])], S),
    "negative_step": (lambda m, x: x[::-1], X),
    "zero_step": (lambda m, x: x[::0], X),
    "float": (lambda m, x: x[1.5], X),
    "object": (lambda m, x: x[object()], X),
    "float_tensor": (lambda m, x: x[L(m, [1.0])], X),
    "float_zero_dim_tensor": (lambda m, x: x[L(m, 1.0), 0], X),
    "int8_tensor": (lambda m, x: x[L(m, [0, 1], "int8")], X),
    "adv_range": (lambda m, x: x[L(m, [5])], X),
    "adv_range_neg": (lambda m, x: x[L(m, [-4])], X),
    "adv_range_second": (lambda m, x: x[:, :, L(m, [7])], X),
    "adv_range_ordinal": (lambda m, x: x[L(m, [0]), :, L(m, [5])], X),
    "adv_broadcast": (lambda m, x: x[[0, 1], [0, 1, 2]], X),
    "mask_shape": (lambda m, x: x[L(m, [True, False])], X),
    "mask_shape_2d": (lambda m, x: x[L(m, [[True, False, True]])], X),
    "mask_shape_second": (lambda m, x: x[L(m, [1, 2]), L(m, [True, False])], X),
    "adv_too_many": (lambda m, x: x[L(m, [0]), L(m, [0]), L(m, [0]), L(m, [0])], X),
}


@pytest.mark.parametrize("name", sorted(GETITEM_ERRORS))
def test_getitem_error(name):
    fn, *inputs = GETITEM_ERRORS[name]
    assert isinstance(check(fn, *inputs), Exception), f"{name}: torch did not raise"


def test_non_tuple_sequence_warns():
    for m in (t, torch):
        x = m.zeros(3, 4)
        with pytest.warns(UserWarning, match="Using a non-tuple sequence for multidimensional"):
            assert x[[0, slice(None)]].shape == (4,)


def test_uint8_index_warns():
    for m in (t, torch):
        with pytest.warns(UserWarning, match="indexing with dtype torch.uint8 is now deprecated"):
            m.zeros(3)[m.tensor([1, 0, 1], dtype=m.uint8)]


def _setitem(idx, value):
    """A program: clone a tensor, assign, return it."""

    def prog(m, x, *vals):
        y = x * 1
        v = value(m, *vals) if callable(value) else value
        i = idx(m) if callable(idx) else idx
        y[i] = v
        return y

    return prog


SETITEM = {
    "int_scalar": (_setitem(0, 1.0), X),
    "int_tensor_broadcast": (_setitem(0, lambda m, v: v[:5]), X, V),
    "int_tensor_leading_ones": (_setitem(1, lambda m, v: v[:5].view(1, 1, 5) * 2), X, V),
    "slice_tensor": (_setitem(slice(1, None), lambda m, v: v[:5]), X, V),
    "step_slice_scalar": (_setitem(slice(None, None, 2), 3.0), X),
    "tuple_basic": (_setitem(lambda m: (0, slice(1, 3)), lambda m, v: v[:5]), X, V),
    "ellipsis": (_setitem(Ellipsis, 2.0), X),
    "ellipsis_tensor": (_setitem(Ellipsis, lambda m, v: v[:5]), X, V),
    "none": (_setitem(None, 2.0), X),
    "true": (_setitem(True, 2.0), X),
    "false": (_setitem(False, 2.0), X),
    "empty_tuple": (_setitem((), 4.0), X),
    "full_slices": (_setitem(lambda m: (slice(None), slice(None)), 4.0), X),
    "zero_dim_tensor_value": (_setitem(1, lambda m, v: v[0]), X, V),
    "zero_dim_int_index": (_setitem(lambda m: L(m, 1), 1.0), X),
    "list_scalar": (_setitem([0, 2], 1.0), X),
    "list_tensor_value": (_setitem([0, 2], lambda m, v: v[:5]), X, V),
    "list_value_leading_one": (_setitem([0, 2], lambda m, v: v[:5].view(1, 1, 1, 5)), X, V),
    "adv_zero_dim_value": (_setitem([0, 2], lambda m, v: v[1]), X, V),
    "tensor_index": (_setitem(lambda m: L(m, [1, 0]), lambda m, v: v[:4].view(4, 1)), X, V),
    "adjacent_adv": (_setitem(lambda m: (slice(None), [0, 1], [1, 2]), 5.0), X),
    "separated_adv_value": (_setitem(lambda m: ([0, 1], slice(None), [0, 1]),
                                     lambda m, v: v[:2].view(2, 1)), X, V),
    "int_then_adv": (_setitem(lambda m: (0, [0, 1]), 3.0), X),
    "mask": (_setitem(lambda m: L(m, [True, False, True]), 5.0), X),
    "mask_value_tensor": (_setitem(lambda m: L(m, [True, False, True]),
                                   lambda m, v: v[:5]), X, V),
    "nested_list": (_setitem([[0, 1], [0, 1]], 2.0), X),
    "int_value_into_int": (_setitem(0, 1.7), randint(0, 5, (3, 4))),
    "float_into_int_adv": (_setitem([0], 1.7), randint(0, 5, (3, 4))),
    "bool_value": (_setitem(0, True), X),
    "complex_real_part": (_setitem(0, 1 + 0j), X),
}


# Known difference: filling a whole tensor with a 0-dim value records refimpl's
# FillBackward0 where torch's fill_.Tensor node is FillBackward3 (fill_ is copy.py's op).
FILL_NODE = {"ellipsis", "empty_tuple", "full_slices"}


@pytest.mark.parametrize("name", sorted(SETITEM))
def test_setitem(name):
    fn, *inputs = SETITEM[name]
    check(fn, *inputs, grad=True)
    for rg in (True, False):
        (_, r), (_, T) = _both(fn, inputs, rg)
        if name not in FILL_NODE:
            assert _node(r) == _node(T)
        assert r._version == T._version


def test_setitem_mask_from_self_and_version():
    for m in (t, torch):
        y = m.tensor([[1.0, -2.0], [-3.0, 4.0]])
        v0 = y._version
        y[y < 0] = 0
        assert y.tolist() == [[1.0, 0.0], [0.0, 4.0]] and y._version == v0 + 1
        z = y[0]
        y[0] = 9
        assert z.tolist() == [9.0, 9.0] and z._version == y._version


SETITEM_ERRORS = {
    "broadcast": (_setitem(0, lambda m, v: v[:3]), X, V),
    "too_many_dims": (_setitem(0, lambda m: m.ones(2, 4, 5)), X),
    "adv_dtype": (_setitem([0, 1], lambda m: m.tensor(2.0, dtype=m.float64)), X),
    "adv_shape": (_setitem([0, 1], lambda m: m.ones(3, 4, 5)), X),
    "adv_int_dtype": (_setitem([0], lambda m: m.tensor([3] * 5, dtype=m.int32)),
                      randint(0, 5, (3, 5))),
    "mask_shape": (_setitem(lambda m: L(m, [True, False]), 1.0), X),
    "index_range": (_setitem(5, 1.0), X),
    "adv_range": (_setitem(lambda m: L(m, [5]), 1.0), X),
    "complex_into_float": (_setitem(0, 1.5j), X),
    "str_value": (_setitem(0, "a"), X),
    "list_value": (_setitem(0, [1.0, 2.0]), X),
    "none_value": (_setitem(0, None), X),
    "float_overflow": (_setitem(0, 1e40), X),
    "int_overflow": (_setitem(0, 2 ** 63), X),
    "int8_overflow": (_setitem(0, 300), In(np.zeros(3), "int8")),
    "uint8_overflow": (_setitem(0, 256), In(np.zeros(3), "uint8")),
    "nan_into_int": (_setitem(0, float("nan")), randint(0, 5, (3,))),
}


@pytest.mark.parametrize("name", sorted(SETITEM_ERRORS))
def test_setitem_error(name):
    fn, *inputs = SETITEM_ERRORS[name]
    assert isinstance(check(fn, *inputs), Exception), f"{name}: torch did not raise"


def test_setitem_error_leaves_tensor_untouched():
    x = t.zeros(3)
    with pytest.raises(RuntimeError):
        x[[0, 1]] = t.ones(3)
    assert x._version == 0 and x.tolist() == [0.0, 0.0, 0.0]


def test_index_put():
    idx = (lambda m: (m.tensor([0, 0, 1]),))
    check(lambda m, x: x.index_put(idx(m), m.tensor([1.0, 2.0, 3.0]), accumulate=True),
          In(np.zeros(5)), grad=True)
    check(lambda m, x, v: x.index_put(idx(m), v, True), randn((5, 2)), randn((3, 2)),
          grad=True)
    check(lambda m, x: x.index_put((m.tensor([True, False, True]),), m.tensor(1.0)), M,
          grad=True)
    check(lambda m, x: x.index_put((m.tensor([0]),) * 3, m.tensor(1.0)), M)
    for m in (t, torch):
        x = m.zeros(5)
        assert x.index_put_((m.tensor([0, 0, 1]),), m.tensor([1.0, 2.0, 3.0]), True) is x
        assert x.tolist() == [3.0, 3.0, 0.0, 0.0, 0.0] and x._version == 1


def test_indexing_duplicates_accumulate_gradient():
    check(lambda m, x: x[m.tensor([1, 1, 1, 0])], randn((3, 2)), grad=True)
    check(lambda m, x: x[[[1, 1], [0, 1]]], randn((3, 3)), grad=True)


def test_index_backward_does_not_save_self():
    for m in (t, torch):
        x = m.tensor([1.0, 0.0, 2.0], requires_grad=True)
        a = x * 1
        b = a[a != 0]
        a[a != 0] = a[a != 0]
        b.sum().backward()
        assert x.grad.tolist() == [1.0, 0.0, 1.0]


OPS = {
    "gather": (lambda m, x: x.gather(1, m.tensor([[0, 1], [2, 0], [3, 3]])), M),
    "gather_dim0": (lambda m, x: m.gather(x, 0, m.tensor([[0, 1, 2, 0]])), M),
    "gather_int32": (lambda m, x: x.gather(1, m.tensor([[0], [1], [2]], dtype=m.int32)), M),
    "gather_scalar": (lambda m, s: s.gather(0, m.tensor([0, 0])), S),
    "gather_bool": (lambda m, x: (x > 0).gather(1, m.tensor([[0, 1]] * 3)), M),
    "scatter_src": (lambda m, x, s: x.scatter(1, m.tensor([[0, 1], [2, 0], [3, 3]]), s),
                    M, randn((3, 2), seed=5)),
    "scatter_value": (lambda m, x: x.scatter(1, m.tensor([[0, 1], [2, 0]]), -1.0), M),
    "scatter_value_kw": (lambda m, x: x.scatter(0, m.tensor([[1, 1, 0, 2]]), value=3), M),
    "scatter_reduce_add": (lambda m, x: x.scatter(1, m.tensor([[0, 0]]), 2.0, reduce="add"), M),
    "scatter_reduce_mul": (lambda m, x: x.scatter(1, m.tensor([[0, 1]] * 3),
                                                  m.ones(3, 4) * 3, reduce="multiply"), M),
    "scatter_add": (lambda m, x, s: x.scatter_add(0, m.tensor([[0, 0, 1, 2], [0, 1, 1, 1]]), s),
                    M, randn((2, 4), seed=6)),
    "scatter_": (lambda m, x: (x * 1).scatter_(1, m.tensor([[3], [2], [1]]), 0.5), M),
    "index_select": (lambda m, x: x.index_select(1, m.tensor([3, 0, 3])), M),
    "index_select_scalar_index": (lambda m, x: x.index_select(0, m.tensor(2)), M),
    "index_add": (lambda m, x, s: x.index_add(0, m.tensor([0, 0, 2]), s, alpha=2), M,
                  randn((3, 4), seed=7)),
    "index_add_": (lambda m, x, s: (x * 1).index_add_(1, m.tensor([1, 1]), s), M,
                   randn((3, 2), seed=8)),
    "index_copy": (lambda m, x, s: x.index_copy(0, m.tensor([2, 0]), s), M,
                   randn((2, 4), seed=9)),
    "index_fill": (lambda m, x: x.index_fill(1, m.tensor([0, -1]), -1.0), M),
    "index_fill_tensor": (lambda m, x, v: x.index_fill(1, m.tensor([0, 2]), v.sum()), M, V),
    "masked_fill": (lambda m, x: x.masked_fill(x > 0, 0.0), M),
    "masked_fill_broadcast": (lambda m, x: x.masked_fill(x[0] > 0, -1.0), M),
    "masked_fill_grow": (lambda m, x: x[0].masked_fill(m.ones(2, 4, dtype=m.bool), 1.0), M),
    "masked_fill_tensor": (lambda m, x, v: x.masked_fill(x < 0, v[0] * 2), M, V),
    "masked_fill_": (lambda m, x: (x * 1).masked_fill_(x > 0.5, 2.0), M),
    "masked_select": (lambda m, x: x.masked_select(x > 0), M),
    "masked_select_broadcast": (lambda m, x: x[0].masked_select(m.ones(2, 1, dtype=m.bool)), M),
    "masked_scatter": (lambda m, x, s: x.masked_scatter(x > 0, s), M, randn((20,), seed=10)),
    "masked_scatter_2d": (lambda m, x, s: x.masked_scatter(x[0] > 0, s), M, randn((3, 5))),
    "take": (lambda m, x: x.take(m.tensor([[0, 11], [-1, 5]])), M),
    "take_along_dim": (lambda m, x: x.take_along_dim(m.tensor([[0], [1], [2]]), 1), M),
    "take_along_dim_none": (lambda m, x: m.take_along_dim(x, m.tensor([0, 5])), M),
    "take_along_dim_bcast": (lambda m, x: x[:, :1].take_along_dim(m.tensor([[0, 0]]), 1), M),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_index_op(name):
    fn, *inputs = OPS[name]
    res = check(fn, *inputs, grad="reduce" not in name)
    assert not isinstance(res, Exception), res
    for rg in (True, False):
        (_, r), (_, T) = _both(fn, inputs, rg)
        assert _node(r) == _node(T), name


OP_ERRORS = {
    "gather_dtype": (lambda m, x: x.gather(1, m.tensor([[0.0]])), M),
    "gather_range": (lambda m, x: x.gather(1, m.tensor([[5]])), M),
    "gather_negative": (lambda m, x: x.gather(1, m.tensor([[-1]])), M),
    "gather_ndim": (lambda m, x: x.gather(1, m.tensor([0])), M),
    "gather_size": (lambda m, x: x.gather(1, m.zeros(4, 1, dtype=m.int64)), M),
    "scatter_dtype": (lambda m, x: x.scatter(1, m.tensor([[0]]), m.ones(1, 1, dtype=m.float64)),
                      M),
    "scatter_src_size": (lambda m, x: x.scatter(1, m.tensor([[0, 1], [1, 0]]), m.ones(1, 1)),
                         M),
    "scatter_self_size": (lambda m, x: x.scatter(1, m.zeros(4, 2, dtype=m.int64), 1.0), M),
    "scatter_range": (lambda m, x: x.scatter(1, m.tensor([[4]]), 1.0), M),
    "scatter_reduce_name": (lambda m, x: x.scatter(1, m.tensor([[0]]), 1.0, reduce="sum"), M),
    "scatter_index_dtype": (lambda m, x: x.scatter(1, m.tensor([[0.0]]), 1.0), M),
    "index_select_2d": (lambda m, x: x.index_select(1, m.tensor([[0]])), M),
    "index_select_range": (lambda m, x: x.index_select(0, m.tensor([3])), M),
    "index_select_negative": (lambda m, x: x.index_select(0, m.tensor([-1])), M),
    "index_select_dtype": (lambda m, x: x.index_select(0, m.tensor([0.0])), M),
    "index_add_shape": (lambda m, x: x.index_add(0, m.tensor([0, 0]), m.ones(2, 3)), M),
    "index_add_count": (lambda m, x: x.index_add(0, m.tensor([0, 0]), m.ones(3, 4)), M),
    "index_add_range": (lambda m, x: x.index_add(0, m.tensor([5]), m.ones(1, 4)), M),
    "index_add_dtype": (lambda m, x: x.index_add(0, m.tensor([0]),
                                                 m.ones(1, 4, dtype=m.float64)), M),
    "index_add_2d_index": (lambda m, x: x.index_add(0, m.tensor([[0]]), m.ones(1, 4)), M),
    "index_copy_count": (lambda m, x: x.index_copy(0, m.tensor([1]), m.ones(2, 4)), M),
    "index_copy_range": (lambda m, x: x.index_copy(0, m.tensor([5]), m.ones(1, 4)), M),
    "index_copy_dtype": (lambda m, x: x.index_copy(0, m.tensor([0]),
                                                   m.ones(1, 4, dtype=m.float64)), M),
    "index_copy_index_dtype": (lambda m, x: x.index_copy(0, m.tensor([0], dtype=m.int32),
                                                         m.ones(1, 4)), M),
    "index_fill_value_dim": (lambda m, x: x.index_fill(1, m.tensor([0]), m.tensor([1.0])), M),
    "index_fill_range": (lambda m, x: x.index_fill(1, m.tensor([5]), 1.0), M),
    "index_fill_dtype": (lambda m, x: x.index_fill(1, m.tensor([0], dtype=m.int32), 1.0), M),
    "masked_fill_mask_dtype": (lambda m, x: x.masked_fill(m.ones(3, 4, dtype=m.int32), 1.0), M),
    "masked_fill_uint8": (lambda m, x: x.masked_fill(m.ones(3, 4, dtype=m.uint8), 1.0), M),
    "masked_fill_value_dim": (lambda m, x: x.masked_fill(x > 0, m.tensor([1.0])), M),
    "masked_fill_broadcast": (lambda m, x: x.masked_fill(m.tensor([True, False]), 1.0), M),
    "masked_fill_overflow": (lambda m, x: x.masked_fill(x > 0, 1e40), M),
    "masked_fill__grow": (lambda m, x: x[0].clone().masked_fill_(m.ones(2, 4, dtype=m.bool),
                                                                  1.0), M),
    "masked_select_dtype": (lambda m, x: x.masked_select(m.ones(3, 4, dtype=m.int64)), M),
    "masked_scatter_dtype": (lambda m, x: x.masked_scatter(x > 0, m.ones(12, dtype=m.float64)),
                             M),
    "masked_scatter_short": (lambda m, x: x.masked_scatter(x > -9, m.ones(3)), M),
    "masked_scatter_mask": (lambda m, x: x.masked_scatter(m.ones(3, 4, dtype=m.int64),
                                                          m.ones(12)), M),
    "take_range": (lambda m, x: x.take(m.tensor([12])), M),
    "take_dtype": (lambda m, x: x.take(m.tensor([0], dtype=m.int32)), M),
    "take_along_dim_ndim": (lambda m, x: x.take_along_dim(m.tensor([[[0]]]), 0), M),
    "take_along_dim_dtype": (lambda m, x: x.take_along_dim(m.tensor([[0.0]]), 0), M),
    "take_along_dim_bcast": (lambda m, x: x.take_along_dim(m.tensor([[0, 2]]), 0), M),
}


@pytest.mark.parametrize("name", sorted(OP_ERRORS))
def test_index_op_error(name):
    fn, *inputs = OP_ERRORS[name]
    assert isinstance(check(fn, *inputs), Exception), f"{name}: torch did not raise"


def test_nonzero_and_argwhere():
    check(lambda m, x: x.nonzero(), randint(-1, 2, (3, 4)))
    check(lambda m, x: m.nonzero(x, as_tuple=True), randint(-1, 2, (3, 4)))
    check(lambda m, x: m.argwhere(x > 0), M)
    check(lambda m, s: s.nonzero(), S)
    check(lambda m, s: s.nonzero(as_tuple=True), S)
    check(lambda m, s: (s * 0).nonzero(), S)
    r, T = (m.tensor([[0, 1], [1, 1]]).nonzero() for m in (t, torch))
    assert r.stride() == T.stride() == (1, 3) and r._base is None
    parts = [m.nonzero(m.tensor([[0, 1], [1, 1]]), as_tuple=True) for m in (t, torch)]
    assert [p.stride() for p in parts[0]] == [p.stride() for p in parts[1]]


def test_getitem_on_meta_views():
    x = t.empty(3, 4, device="meta")
    assert x[1:, None, ::2].shape == (2, 1, 2)
    assert x[..., 1].stride() == (4,)


def test_outputs_follow_input_layout_like_torch():
    progs = [
        lambda m, x: x.index_put((m.tensor([0]),), m.tensor(1.0)),
        lambda m, x: x.index_fill(0, m.tensor([1]), 2.0),
        lambda m, x: x.masked_fill(x > 0, 1.0),
        lambda m, x: x.scatter(0, m.tensor([[0]]), 1.0),
        lambda m, x: x[[0, 1]],
    ]
    for prog in progs:
        r = prog(t, M.build(t, False).t())
        T = prog(torch, M.build(torch, False).t())
        assert r.stride() == T.stride()
