"""Tensor over Storage, factories, RNG and interop (spec TENSOR-0xx, 2xx, 7xx, 8xx)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import refimpl as t


def test_views_share_storage_version_and_base():
    x = t.zeros(2, 3)
    v = x.t()
    assert v.untyped_storage() is x.untyped_storage()
    assert v._base is x and v.t()._base is x
    assert v.stride() == (1, 3) and not v.is_contiguous()
    before = x._version
    v.add_(1)
    assert x._version == v._version == before + 1
    assert x.tolist() == [[1.0] * 3] * 2


def test_detach_shares_version_counter():
    x = t.ones(3)
    d = x.detach()
    d.mul_(2)
    assert x._version == 1 and x.tolist() == [2.0] * 3


def test_contiguous_and_clone():
    x = t.arange(6).view(2, 3)
    assert x.contiguous() is x
    c = x.t().contiguous()
    assert c.is_contiguous() and c.tolist() == [[0, 3], [1, 4], [2, 5]]
    k = x.clone()
    assert k.data_ptr() != x.data_ptr() and k.tolist() == x.tolist()


def test_view_errors_match_torch_text():
    x = t.zeros(2, 3)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        x.t().view(6)
    with pytest.raises(RuntimeError, match=r"shape '\[4\]' is invalid for input of size 6"):
        x.view(4)


def test_bool_and_scalar_conversion_errors():
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        bool(t.ones(2))
    with pytest.raises(RuntimeError, match="with no values is ambiguous"):
        bool(t.ones(0))
    with pytest.raises(RuntimeError, match="2 elements cannot be converted to Scalar"):
        t.ones(2).item()
    assert bool(t.ones(1)) is True and float(t.tensor(2.5)) == 2.5 and int(t.tensor(3)) == 3


def test_tensor_infers_dtype():
    assert t.tensor([1, 2]).dtype is t.int64
    assert t.tensor([1, 2.0]).dtype is t.float32
    assert t.tensor([True, False]).dtype is t.bool
    assert t.tensor([1, 2j]).dtype is t.complex64
    assert t.tensor(np.arange(3, dtype=np.int16)).dtype is t.int16
    assert t.tensor([[1.5]], dtype=t.bfloat16).dtype is t.bfloat16


def test_factories():
    assert t.zeros(2, 3).shape == (2, 3) and repr(t.zeros(2, 3).shape) == "torch.Size([2, 3])"
    assert t.full((2,), 7).dtype is t.int64 and t.full((2,), True).dtype is t.bool
    assert t.arange(0, 1, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75]
    assert t.arange(5).dtype is t.int64
    assert t.linspace(0, 10, 5, dtype=t.int64).tolist() == [0, 2, 5, 7, 10]
    assert t.eye(2, 3).tolist() == [[1, 0, 0], [0, 1, 0]]
    x = t.ones(2, dtype=t.int8)
    assert x.new_zeros(3).dtype is t.int8 and t.zeros_like(x).shape == (2,)
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        t.arange(0, 5, 0)
    with pytest.raises(RuntimeError, match="negative dimension -1"):
        t.zeros(-1)


def test_generator_is_deterministic_and_restorable():
    g = t.Generator().manual_seed(123)
    state = g.get_state()
    a = t.rand(5, generator=g)
    g.set_state(state)
    b = t.rand(5, generator=g)
    assert a.tolist() == b.tolist()
    assert g.initial_seed() == 123
    t.manual_seed(7)
    c = t.randn(4)
    t.manual_seed(7)
    assert t.randn(4).tolist() == c.tolist()


def test_random_distributions():
    g = t.Generator().manual_seed(0)
    u = t.rand(100_000, generator=g)._np
    assert 0.0 <= u.min() and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.01
    n = t.randn(100_000, generator=g)._np
    assert abs(n.mean()) < 0.02 and abs(n.std() - 1.0) < 0.02
    r = t.randint(3, 9, (10_000,), generator=g)._np
    assert r.min() == 3 and r.max() == 8
    p = t.randperm(50, generator=g)._np
    assert sorted(p.tolist()) == list(range(50))
    with pytest.raises(RuntimeError, match="expects 'from' to be less than 'to'"):
        t.randint(3, 1, (2,))


def test_philox_known_answer():
    # Philox4x32-10 known-answer vector (counter 0, key 0) from the Random123 paper.
    from refimpl._random import philox4x32

    out = philox4x32(np.zeros(1, np.uint64), np.zeros(1, np.uint64), 0)[0]
    assert [hex(v) for v in out] == ["0x6627e8d5", "0xe169c58d", "0xbc57ac4c", "0x9b00dbd8"]


def test_numpy_shares_memory():
    x = t.zeros(3)
    a = x.numpy()
    a[1] = 4.0
    assert x.tolist() == [0.0, 4.0, 0.0]
    y = t.from_numpy(a)
    y.add_(1)
    assert a.tolist() == [1.0, 5.0, 1.0]
    with pytest.raises(RuntimeError, match="Can't call numpy\\(\\) on Tensor that requires grad"):
        t.ones(2, requires_grad=True).numpy()
    with pytest.raises(TypeError, match="BFloat16"):
        t.ones(2, dtype=t.bfloat16).numpy()


def test_from_numpy_strided_and_pickle():
    base = np.arange(12, dtype=np.float64).reshape(3, 4)
    y = t.from_numpy(base[:, 1:3])
    assert y.stride() == (4, 1) and y.tolist() == base[:, 1:3].tolist()
    z = pickle.loads(pickle.dumps(t.tensor([[1, 2]], dtype=t.int16)))
    assert z.dtype is t.int16 and z.tolist() == [[1, 2]]


def test_dlpack_with_torch():
    torch = pytest.importorskip("torch")
    x = t.arange(4)
    y = torch.from_dlpack(x)
    y[0] = 9
    assert x.tolist()[0] == 9
    z = t.from_dlpack(torch.arange(3.0))
    assert z.tolist() == [0.0, 1.0, 2.0]


def test_inplace_cast_error_and_out():
    x = t.ones(3, dtype=t.int32)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired"):
        x.add_(2.5)
    out = t.empty(3)
    r = t.add(t.ones(3), t.ones(3), out=out)
    assert r is out and out.tolist() == [2.0] * 3


def test_broadcast_error_text():
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(3\) must match the size of "
                                           r"tensor b \(4\) at non-singleton dimension 1"):
        t.ones(2, 3) + t.ones(4)
