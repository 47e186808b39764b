"""Unit tests of refimpl's fake tensors and the meta device (the behaviour torch shares is
checked by the conformance cases in conformance/cases/fake/)."""

from __future__ import annotations

import gc
import pickle

import numpy as np
import pytest

import refimpl as t
from refimpl import _dispatch
from refimpl._subclasses import fake_tensor as F


@pytest.fixture(autouse=True)
def _clean_cache():
    F.FakeTensorMode.cache_clear()
    yield
    F.FakeTensorMode.cache_clear()


# -- the meta device ------------------------------------------------------------------------

def test_meta_tensors_refuse_data_access():
    x = t.empty(2, 3, device="meta")
    with pytest.raises(RuntimeError, match="Tensor.item\\(\\) cannot be called on meta tensors"):
        x.sum().item()
    with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor; no data!"):
        x.tolist()
    with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor; no data!"):
        x.cpu()


def test_meta_writes_return_self_and_inplace_views_restride():
    x = t.empty(2, 3, device="meta")
    assert x.fill_(1.0) is x
    assert x.copy_(t.empty(3, device="meta")) is x
    assert x.unsqueeze_(0) is x
    assert x.shape == (1, 2, 3)
    assert t.rand(4, 4, device="meta").device.type == "meta"


def test_naming_cuda_does_not_initialise():
    from refimpl._device import resolve

    assert str(resolve("cuda")) == "cuda:0"
    if not t.cuda.is_available():
        assert not t.cuda.is_initialized()


# -- fake tensors -----------------------------------------------------------------------------

def test_views_and_aliases_of_fakes_are_fakes():
    with F.FakeTensorMode() as mode:
        x = t.empty(4, 6, device="cuda")
    for v in (x.t(), x[1:], x.view(24), x.unbind(0)[0], x.expand(2, 4, 6)):
        assert type(v) is F.FakeTensor and v.fake_mode is mode
        assert v.untyped_storage() is x.untyped_storage()
        assert str(v.device) == "cuda:0"


def test_fake_layer_is_installed_only_with_a_mode():
    assert _dispatch.FAKE_LAYER is None or _dispatch.FAKE_LAYER is F._fake_layer
    F.FakeTensorMode()
    assert _dispatch.FAKE_LAYER is F._fake_layer
    # real programs still run their kernels with the layer installed
    assert (t.ones(2) + 1).tolist() == [2.0, 2.0]


def test_no_data_is_allocated():
    with F.FakeTensorMode():
        a = t.empty(2 ** 20, 2 ** 20)
        c = a @ a
    assert c.untyped_storage()._data is None
    assert c.untyped_storage().nbytes() == 2 ** 40 * 4


def test_cache_hit_of_inplace_op_bumps_the_version():
    with F.FakeTensorMode():
        x, y = t.randn(3), t.randn(3)
        F.FakeTensorMode.cache_clear()
        x.add_(y)
        x.add_(y)
    info = F.FakeTensorMode.cache_info()
    assert (info.hits, info.misses) == (1, 1)
    assert x._version == 2


def test_cache_hit_gives_fresh_outputs():
    with F.FakeTensorMode():
        x = t.randn(3)
        a = x * 2
        b = x * 2
    assert a is not b and a.untyped_storage() is not b.untyped_storage()
    assert F.FakeTensorMode.cache_info().hits == 1


def test_bypass_is_remembered_per_key():
    with F.FakeTensorMode():
        x = t.randn(1, 2)
        x.unsqueeze_(0)
        x.unsqueeze_(0)
    info = F.FakeTensorMode.cache_info()
    assert info.bypasses == {"inplace view": 2}


def test_converter_memo_is_weak_on_both_sides():
    mode = F.FakeTensorMode()
    conv = mode.fake_tensor_converter
    x = t.rand(3)
    fx = mode.from_tensor(x)
    assert len(conv.tensor_memo) == 1
    del fx
    gc.collect()
    assert len(conv.tensor_memo) == 0
    fx = mode.from_tensor(x)
    del x
    gc.collect()
    assert len(conv.tensor_memo) == 0 and type(fx) is F.FakeTensor


def test_fake_views_of_converted_views():
    mode = F.FakeTensorMode()
    base = t.rand(4, 4)
    view = base[1]
    fv = mode.from_tensor(view)
    assert fv._is_view() and fv._base is mode.from_tensor(base)
    assert fv.storage_offset() == 4


def test_constant_folding_and_invalidation():
    with F.FakeTensorMode():
        x = t.tensor(2.0)
        y = x * 3
        assert y.constant is not None and y.item() == 6.0
        z = x + t.rand(())
        assert z.constant is None
        x.mul_(t.rand(()))
        assert x.constant is None


def test_backward_over_fakes_produces_fake_grads():
    with F.FakeTensorMode():
        w = t.randn(5, 3, requires_grad=True)
        (t.randn(7, 5) @ w).tanh().sum().backward()
    assert type(w.grad) is F.FakeTensor
    assert w.grad.shape == (5, 3) and w.grad.stride() == (3, 1)


def test_unpickled_tensor_in_mode_is_meta_fake():
    blob = pickle.dumps(t.arange(3))
    with F.FakeTensorMode():
        y = pickle.loads(blob)
    assert type(y) is F.FakeTensor and y.device.type == "meta" and y.shape == (3,)


def test_render_call_matches_torch_style():
    x = t.zeros(2)
    msg = F.render_call(t.ops.get("add"), (x, 1), {})
    assert msg == "aten.add.Tensor(tensor([...], size=(2,)), 1)"


# -- namespaces, memory formats, nn.functional ---------------------------------------------------

def test_aten_namespace_and_user_library():
    aten = t.ops.aten
    assert aten.add.Tensor(t.ones(2), t.ones(2)).tolist() == [2.0, 2.0]
    out = aten.slice_scatter.default(t.zeros(3), t.ones(1), start=1, end=2)
    assert out.tolist() == [0.0, 1.0, 0.0]
    lib = t.library.Library("unit_ns", "DEF")
    try:
        lib.define("twice(Tensor self) -> Tensor")
        lib.impl("twice", lambda x: x * 2, "CPU")
        assert t.ops.unit_ns.twice.default(t.ones(2)).tolist() == [2.0, 2.0]
        with F.FakeTensorMode(), pytest.raises(F.UnsupportedOperatorException,
                                               match="unit_ns.twice.default"):
            t.ops.unit_ns.twice(t.ones(2))
    finally:
        lib._destroy()
    with pytest.raises(AttributeError):
        t.ops.unit_ns  # noqa: B018


def test_channels_last_round_trip():
    x = t.randn(2, 3, 4, 5)
    y = x.contiguous(memory_format=t.channels_last)
    assert y.stride() == (60, 1, 15, 3)
    assert y.is_contiguous(memory_format=t.channels_last) and not y.is_contiguous()
    np.testing.assert_array_equal(np.array(y.tolist()), np.array(x.tolist()))
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        t.randn(2, 3).contiguous(memory_format=t.channels_last)


def test_cross_entropy_gradients_flow():
    logits = t.randn(4, 3, requires_grad=True)
    loss = t.nn.functional.cross_entropy(logits, t.tensor([0, 2, 1, 2]), label_smoothing=0.1)
    loss.backward()
    assert logits.grad.shape == (4, 3)
    np.testing.assert_allclose(np.array(logits.grad.sum(1).tolist()), 0.0, atol=1e-6)


def test_default_device_for_factories():
    try:
        t.set_default_device("meta")
        assert t.empty(2).device.type == "meta" and t.tensor([1.0]).device.type == "meta"
        assert t.get_default_device().type == "meta"
    finally:
        t.set_default_device(None)
    assert t.zeros(1).device.type == "cpu"
