"""Differential tests of the view ops against torch (spec TENSOR-004..008, TENSOR-022,
TENSOR-303, TENSOR-308, TENSOR-309).

Every view case runs the same program on refimpl and torch and compares values, dtype,
shape, strides, storage offset, aliasing (shared storage, ``_base`` is the root, a write
through the view reaches the base, one shared version counter), the autograd node name
and the gradients; error cases compare the exception type and message.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _oracle import In, check, randn, torch

import refimpl as t

X = randn((3, 4, 5), seed=1)
M = randn((4, 6), seed=2)
V = randn((6,), seed=3)
S = In(2.5)
C = In(np.arange(12).reshape(3, 4) + 1j * np.arange(12).reshape(3, 4), "complex64")
I = In(np.arange(24).reshape(2, 3, 4), "int64")


def _flat(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _root(x):
    return x if x._base is None else x._base


def describe(out, src) -> list:
    """What a view must agree on: metadata, aliasing and autograd node per output."""
    rows = []
    for o in _flat(out):
        rows.append({
            "shape": tuple(o.shape), "stride": tuple(o.stride()),
            "offset": o.storage_offset(), "dtype": str(o.dtype),
            "is_view": o._base is not None, "base_is_root": o._base is _root(src),
            "same_storage": o.untyped_storage().data_ptr() == src.untyped_storage().data_ptr(),
            "contiguous": o.is_contiguous(),
            "node": None if o.grad_fn is None else type(o.grad_fn).__name__.split(".")[-1],
        })
    return rows


def _run(fn, mod, inputs, requires_grad):
    args = [x.build(mod, requires_grad) if isinstance(x, In) else x for x in inputs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return args, fn(mod, *args)


def check_view(fn, *inputs, grad: bool = True, write: bool = True):
    """``check`` (values, errors, gradients) plus metadata, aliasing and write-through."""
    check(fn, *inputs, grad=grad)
    for requires_grad in ((True, False) if grad else (False,)):
        rargs, r = _run(fn, t, inputs, requires_grad)
        targs, T = _run(fn, torch, inputs, requires_grad)
        assert describe(r, rargs[0]) == describe(T, targs[0])
    if not write:
        return
    rargs, r = _run(fn, t, inputs, False)
    targs, T = _run(fn, torch, inputs, False)
    for a, b in zip(_flat(r), _flat(T)):
        if b._base is not _root(targs[0]) or b.numel() == 0:
            continue
        vr, vt = rargs[0]._version, targs[0]._version
        a.fill_(7)
        b.fill_(7)
        assert rargs[0]._version - vr == targs[0]._version - vt == 1
        assert a._version == rargs[0]._version
        np.testing.assert_array_equal(rargs[0].tolist(), targs[0].tolist())


VIEW_CASES = {
    "view": (lambda m, x: x.view(12, 5), X),
    "view_tuple": (lambda m, x: x.view((-1, 20)), X),
    "view_of_transpose_split": (lambda m, x: x.transpose(0, 1).view(2, 2, 3, 5), X),
    "view_size": (lambda m, x: x.view(m.Size([60])) if m is torch else x.view(t.Size([60])), X),
    "view_scalar": (lambda m, x: x.view(1, 1), S),
    "view_as": (lambda m, x, y: x[:2, :3, :4].reshape(-1).view_as(y), X, M),
    "reshape_view": (lambda m, x: x.reshape(3, 20), X),
    "reshape_copy": (lambda m, x: x.transpose(0, 1).reshape(60), X),
    "reshape_as": (lambda m, x, y: x.reshape(60)[:24].reshape_as(y), X, M),
    "flatten": (lambda m, x: x.flatten(), X),
    "flatten_range": (lambda m, x: x.flatten(1, 2), X),
    "flatten_copy": (lambda m, x: x.mT.flatten(), X),
    "flatten_scalar": (lambda m, x: x.flatten(), S),
    "unflatten": (lambda m, x: x.unflatten(1, (2, -1)), X),
    "transpose": (lambda m, x: x.transpose(0, 2), X),
    "transpose_neg": (lambda m, x: x.transpose(-1, 0), X),
    "swapaxes": (lambda m, x: x.swapaxes(0, 1), X),
    "swapdims": (lambda m, x: m.swapdims(x, 1, 2), X),
    "t": (lambda m, x: x.t(), M),
    "t_1d": (lambda m, x: x.t(), V),
    "T": (lambda m, x: x.T, M),
    "mT": (lambda m, x: x.mT, X),
    "mH_real": (lambda m, x: x.mH, X),
    "H_real": (lambda m, x: x.H, M),
    "permute": (lambda m, x: x.permute(2, 0, 1), X),
    "permute_list": (lambda m, x: x.permute([1, -1, 0]), X),
    "movedim": (lambda m, x: x.movedim(0, -1), X),
    "movedim_multi": (lambda m, x: m.movedim(x, (0, 1), (2, 0)), X),
    "moveaxis": (lambda m, x: m.moveaxis(x, 2, 0), X),
    "expand": (lambda m, x: x[:, :1].expand(2, 3, 4, 5), X),
    "expand_minus1": (lambda m, x: x[:, :1].expand(-1, 7, -1), X),
    "expand_scalar": (lambda m, x: x.expand(2, 3), S),
    "expand_new_ones": (lambda m, x: x.expand(1, 2, 1, 6), V),
    "expand_as": (lambda m, x, y: x.expand_as(y), V, M),
    "broadcast_to": (lambda m, x: m.broadcast_to(x, (2, 4, 6)), M),
    "squeeze_all": (lambda m, x: x[:, :1, None].squeeze(), X),
    "squeeze_dim": (lambda m, x: x[:, :1].squeeze(1), X),
    "squeeze_dim_not1": (lambda m, x: x.squeeze(0), X),
    "squeeze_dims": (lambda m, x: x[:1, :1].squeeze((0, 1, 2)), X),
    "squeeze_scalar": (lambda m, x: x.squeeze(-1), S),
    "unsqueeze": (lambda m, x: x.unsqueeze(1), X),
    "unsqueeze_last": (lambda m, x: x.unsqueeze(-1), X),
    "unsqueeze_scalar": (lambda m, x: x.unsqueeze(0), S),
    "unsqueeze_of_slice": (lambda m, x: x[:, 1:3].unsqueeze(2), X),
    "narrow": (lambda m, x: x.narrow(1, 1, 2), X),
    "narrow_neg_start": (lambda m, x: x.narrow(0, -1, 1), X),
    "narrow_tensor_start": (lambda m, x: x.narrow(2, m.tensor(1), 3), X),
    "select": (lambda m, x: x.select(1, 2), X),
    "select_neg": (lambda m, x: x.select(-1, -2), X),
    "select_tensor": (lambda m, x: x.select(0, m.tensor(1)), X),
    "slice_steps": (lambda m, x: x[1:, ::2, 1::3], X),
    "slice_clamped": (lambda m, x: x[-100:100, 5:], X),
    "as_strided": (lambda m, x: x.as_strided((2, 2), (1, 2)), X),
    "as_strided_offset": (lambda m, x: x[1].as_strided((3, 3), (4, 1), 7), X),
    "diagonal": (lambda m, x: x.diagonal(), X),
    "diagonal_offset": (lambda m, x: x.diagonal(1, 1, 2), X),
    "diagonal_neg": (lambda m, x: x.diagonal(-2, -1, 0), X),
    "diagonal_empty": (lambda m, x: x.diagonal(10), X),
    "unbind": (lambda m, x: x.unbind(1), X),
    "unbind_0": (lambda m, x: m.unbind(x), M),
    "chunk": (lambda m, x: x.chunk(2), X),
    "chunk_dim": (lambda m, x: x.chunk(3, 2), X),
    "chunk_more_than_size": (lambda m, x: x.chunk(6), X),
    "split_int": (lambda m, x: x.split(2, 2), X),
    "split_list": (lambda m, x: x.split([1, 3], 1), X),
    "split_with_sizes": (lambda m, x: x.split_with_sizes([2, 1]), X),
    "split_fn": (lambda m, x: m.split(x, 4, -1), X),
    "tensor_split_sections": (lambda m, x: x.tensor_split(4), X),
    "tensor_split_indices": (lambda m, x: x.tensor_split([1, 3], 2), X),
    "tensor_split_unsorted": (lambda m, x: x.tensor_split([2, 1]), X),
    "unfold": (lambda m, x: x.unfold(2, 2, 1), X),
    "unfold_step": (lambda m, x: x.unfold(0, 2, 2), X),
    "alias_getitem": (lambda m, x: x[...], X),
    "real": (lambda m, c: c.real, C),
    "imag": (lambda m, c: c.imag, C),
    "view_as_real": (lambda m, c: m.view_as_real(c), C),
    "view_as_complex": (lambda m, x: m.view_as_complex(x.reshape(4, 3, 2)), M),
    "int_views": (lambda m, i: i.transpose(0, 2)[1:].unsqueeze(0), I),
}


@pytest.mark.parametrize("name", sorted(VIEW_CASES))
def test_view_op(name):
    fn, *inputs = VIEW_CASES[name]
    overlapping = name.startswith(("expand", "broadcast", "unfold", "as_strided"))
    complex_out = name == "view_as_complex"
    check_view(fn, *inputs, grad=not complex_out, write=not overlapping)


def test_view_dtype_reinterprets_bytes():
    for target in ("float16", "int32", "uint8", "float64", "complex64", "bool"):
        dt = (lambda m, name=target: getattr(m, name))
        check(lambda m, x, dt=dt: x.view(dt(m)), randn((3, 4, 6), seed=4))
    r = t.zeros(3, 4).view(t.int32)
    T = torch.zeros(3, 4).view(torch.int32)
    assert (r._base, r.stride(), r.dtype.itemsize) == (None, T.stride(), T.dtype.itemsize)
    x = t.zeros(2, 2)
    y = x.view(t.int32)
    y.add_(1)
    assert x._version == y._version == 1


VIEW_ERRORS = {
    "view_incompatible": (lambda m, x: x.transpose(0, 1).view(60), X),
    "view_bad_numel": (lambda m, x: x.view(7, -1), X),
    "view_two_infer": (lambda m, x: x.view(-1, -1), X),
    "view_negative": (lambda m, x: x.view(-2, 3), X),
    "view_zero_infer": (lambda m, x: x[:0].view(-1, 0), X),
    "view_float_size": (lambda m, x: x.view(3, 20.0), X),
    "view_dtype_size": (lambda m, x: x.view(m.float64), X),
    "view_dtype_stride": (lambda m, x: x.transpose(1, 2).view(m.float64), randn((2, 4, 4))),
    "view_dtype_offset": (lambda m, x: x[:, 1:3].view(m.float64), randn((2, 4))),
    "view_dtype_0d": (lambda m, x: x.view(m.float16), S),
    "t_3d": (lambda m, x: x.t(), X),
    "transpose_range": (lambda m, x: x.transpose(0, 3), X),
    "permute_len": (lambda m, x: x.permute(0, 1), X),
    "permute_dup": (lambda m, x: x.permute(0, 1, 1), X),
    "expand_mismatch": (lambda m, x: x.expand(2, 4), randn((3,))),
    "expand_too_few": (lambda m, x: x.expand(3, 4), X),
    "expand_leading_minus1": (lambda m, x: x.expand(-1, 6), V),
    "squeeze_dup": (lambda m, x: x.squeeze((0, 0)), X),
    "squeeze_range": (lambda m, x: x.squeeze(5), X),
    "unsqueeze_range": (lambda m, x: x.unsqueeze(4), X),
    "flatten_order": (lambda m, x: x.flatten(2, 1), X),
    "unflatten_product": (lambda m, x: x.unflatten(1, (2, 3)), X),
    "unflatten_empty": (lambda m, x: x.unflatten(1, ()), X),
    "narrow_exceeds": (lambda m, x: x.narrow(0, 1, 5), X),
    "narrow_start_range": (lambda m, x: x.narrow(0, -4, 1), X),
    "narrow_length": (lambda m, x: x.narrow(0, 1, -1), X),
    "narrow_0d": (lambda m, x: x.narrow(0, 0, 1), S),
    "select_range": (lambda m, x: x.select(0, 3), X),
    "select_neg_range": (lambda m, x: x.select(-1, -6), X),
    "select_0d": (lambda m, x: x.select(0, 0), S),
    "as_strided_bounds": (lambda m, x: x.as_strided((100,), (1,)), X),
    "as_strided_negative": (lambda m, x: x.as_strided((2, 2), (-1, 2)), X),
    "as_strided_offset": (lambda m, x: x.as_strided((2,), (1,), -1), X),
    "as_strided_len": (lambda m, x: x.as_strided((2, 2), (1,)), X),
    "diagonal_same": (lambda m, x: x.diagonal(0, 1, 1), X),
    "diagonal_1d": (lambda m, x: x.diagonal(), V),
    "unbind_0d": (lambda m, x: x.unbind(), S),
    "chunk_zero": (lambda m, x: x.chunk(0), X),
    "chunk_0d": (lambda m, x: x.chunk(1), S),
    "split_zero": (lambda m, x: x.split(0), X),
    "split_negative": (lambda m, x: x.split(-1), X),
    "split_sizes_sum": (lambda m, x: x.split([1, 1]), X),
    "split_sizes_negative": (lambda m, x: x.split([1, -1, 3]), X),
    "tensor_split_zero": (lambda m, x: x.tensor_split(0), X),
    "unfold_too_big": (lambda m, x: x.unfold(0, 4, 1), X),
    "unfold_step": (lambda m, x: x.unfold(0, 2, 0), X),
    "movedim_repeat": (lambda m, x: x.movedim((0, 0), (1, 2)), X),
    "movedim_len": (lambda m, x: x.movedim((0, 1), (2,)), X),
    "mT_1d": (lambda m, x: x.mT, V),
    "H_3d": (lambda m, x: x.H, X),
    "view_as_real_real": (lambda m, x: m.view_as_real(x), X),
    "view_as_complex_last": (lambda m, x: m.view_as_complex(x), X),
    "view_as_complex_stride": (lambda m, x: m.view_as_complex(x[..., :2]), X),
    "imag_real": (lambda m, x: x.imag, X),
}


@pytest.mark.parametrize("name", sorted(VIEW_ERRORS))
def test_view_error(name):
    fn, *inputs = VIEW_ERRORS[name]
    err = check(fn, *inputs)
    assert isinstance(err, Exception), f"{name}: torch did not raise"


def test_real_of_real_is_self_and_real_setter():
    for m in (t, torch):
        x = m.zeros(2)
        assert x.real is x
        c = m.zeros(2, dtype=m.complex64)
        c.real = m.tensor([1.0, 2.0])
        c.imag = m.tensor([3.0, 4.0])
        assert c.tolist() == [1 + 3j, 2 + 4j]


def test_T_warns_for_3d():
    x = t.zeros(2, 3, 4)
    from refimpl.ops import views_properties

    views_properties._warned.discard("T")
    with pytest.warns(UserWarning, match="The use of `x.T` on tensors of dimension other"):
        assert x.T.shape == (4, 3, 2)


def test_flatten_same_dim_returns_self():
    for m in (t, torch):
        x = m.zeros(2, 3, 4)
        assert x.flatten(1, 1) is x


INPLACE_VIEW_CASES = {
    "t_": (lambda m, x: x.t_(), M),
    "transpose_": (lambda m, x: x.transpose_(0, 2), X),
    "swapaxes_": (lambda m, x: x.swapaxes_(0, 1), X),
    "squeeze_": (lambda m, x: x.squeeze_(), randn((3, 1, 4, 1))),
    "squeeze_dim_": (lambda m, x: x.squeeze_(1), randn((3, 1, 4))),
    "squeeze_dims_": (lambda m, x: x.squeeze_((1, 3)), randn((3, 1, 4, 1))),
    "unsqueeze_": (lambda m, x: x.unsqueeze_(1), X),
    "as_strided_": (lambda m, x: x.as_strided_((2, 2), (1, 3), 1), M),
}


@pytest.mark.parametrize("name", sorted(INPLACE_VIEW_CASES))
def test_inplace_view_op(name):
    fn, inp = INPLACE_VIEW_CASES[name]
    prog = (lambda m, x: fn(m, x * 1))
    check(prog, inp, grad=True)
    for m in (t, torch):
        x = inp.build(m, False)
        v0 = x._version
        out = fn(m, x)
        assert out is x and x._version == v0 + 1
    rx, Tx = inp.build(t, False), inp.build(torch, False)
    fn(t, rx), fn(torch, Tx)
    assert (rx.shape, rx.stride(), rx.storage_offset()) == (
        Tx.shape, Tx.stride(), Tx.storage_offset())
    rx, Tx = inp.build(t, True) * 1, inp.build(torch, True) * 1
    assert type(fn(t, rx).grad_fn).__name__ == type(fn(torch, Tx).grad_fn).__name__


def test_resize_sets_shape_and_bumps_only_on_change():
    for m in (t, torch):
        x = m.zeros(6)
        assert x.resize_(6) is x and x._version == 0
        x.resize_(1, 2)
        assert x._version == 1 and x.stride() == (2, 1)
        x.resize_as_(m.zeros(5))
        assert x._version == 2 and x.shape == (5,)
        x.resize_(5)
        assert x._version == 2
        y = m.zeros(3, 3).t()
        y.resize_(3, 3)
        assert y.stride() == (1, 3)
        y.resize_(9)
        assert y.stride() == (1,)
    g = t.zeros(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
        g.resize_(3)


def test_resize_grows_the_storage():
    for m in (t, torch):
        x = m.zeros(3)
        v = x.view(3)
        x.resize_(4, 5)
        assert x.untyped_storage().nbytes() == 80 and x.shape == (4, 5)
        assert v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()


def test_view_of_view_base_is_root_and_versions_shared():
    for m in (t, torch):
        x = m.zeros(4, 6)
        v = x.t()[1:].unsqueeze(0).select(0, 0).narrow(0, 1, 2).diagonal()
        assert v._base is x
        v.fill_(1)
        assert x._version == v._version == 1
        assert x.sum().item() == 2


def test_meta_functions_run_without_data():
    x = t.empty(3, 4, 5, device="meta")
    assert x.transpose(0, 2).stride() == (1, 5, 20)
    assert x[1:, ::2].shape == (2, 2, 5)
    assert [p.shape for p in x.split(2)] == [(2, 4, 5), (1, 4, 5)]
