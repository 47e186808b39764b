"""refimpl.nn.functional against torch on the CPU: normalisations (with running
statistics), linear/bilinear, embedding, attention, distances, and the dropout family
(whose masks come from refimpl's own generator, so they are tested by their
properties, not bit for bit)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _oracle import In, check, check_double_backward, randint, randn

import refimpl as t
import refimpl.nn.functional as RF


def fn(name: str, **kw):
    """``fn(m, *args)`` calling ``name`` from refimpl's or torch's functional module."""
    def call(m, *args):
        mod = RF if m is t else m.nn.functional
        return getattr(mod, name)(*args, **kw)
    return call


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def w(n, seed=1):
    return randn((n,), "float64", seed)


NORMS = [
    ("layer_norm", [randn((4, 6), "float64"), (6,), w(6), w(6, 2)]),
    ("layer_norm", [randn((2, 3, 4), "float64"), (3, 4)]),
    ("group_norm", [randn((4, 6, 3), "float64"), 3, w(6), w(6, 2)]),
    ("group_norm", [randn((2, 4, 3, 3), "float64"), 2]),
    ("rms_norm", [randn((4, 6), "float64"), (6,), w(6)]),
    ("rms_norm", [randn((4, 6), "float64"), (6,), None, 1e-3]),
    ("batch_norm", [randn((4, 3, 5), "float64"), None, None, w(3), w(3, 2), True]),
    ("batch_norm", [randn((4, 3), "float64"), In(np.zeros(3), "float64"),
                    In(np.ones(3) * 2, "float64"), w(3), w(3, 2), False]),
    ("instance_norm", [randn((4, 3, 5), "float64")]),
    ("instance_norm", [randn((2, 3, 3, 3), "float64"), None, None, w(3), w(3, 2)]),
    ("local_response_norm", [randn((4, 5, 3, 3), "float64"), 3]),
    ("local_response_norm", [randn((4, 5, 3), "float64"), 2]),
]


@pytest.mark.parametrize("name,args", NORMS)
def test_normalisations(name, args):
    check(fn(name), *args, grad=True)


@pytest.mark.parametrize("name,args", NORMS[:7])
def test_normalisations_double_backward(name, args):
    check_double_backward(fn(name), *args)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_norm_dtypes(dtype):
    check(fn("layer_norm", normalized_shape=(6,)), randn((4, 6), dtype))
    check(fn("rms_norm", normalized_shape=(6,)), randn((4, 6), dtype))
    check(fn("group_norm", num_groups=2), randn((4, 6, 3), dtype))
    check(fn("batch_norm", running_mean=None, running_var=None, training=True),
          randn((4, 3, 2), dtype))


def test_batch_norm_updates_running_statistics_like_torch():
    def run(m, x):
        rm, rv = m.zeros(3, dtype=m.float64), m.ones(3, dtype=m.float64)
        out = (RF if m is t else m.nn.functional).batch_norm(x, rm, rv, training=True,
                                                             momentum=0.3)
        return out, rm, rv
    check(run, randn((5, 3, 4), "float64"), grad=True)

    def inst(m, x):
        rm, rv = m.zeros(3, dtype=m.float64), m.ones(3, dtype=m.float64)
        out = (RF if m is t else m.nn.functional).instance_norm(x, rm, rv, momentum=0.2)
        return out, rm, rv
    check(inst, randn((2, 3, 4), "float64"), grad=True)


def test_running_statistics_carry_no_history():
    x = t.randn(4, 3, requires_grad=True)
    rm, rv = t.zeros(3), t.ones(3)
    RF.batch_norm(x, rm, rv, training=True).sum().backward()
    assert rm.grad_fn is None and rv.grad_fn is None and not rm.requires_grad


@pytest.mark.parametrize("name,args", [
    ("batch_norm", [randn((1, 3)), In(np.zeros(3)), In(np.ones(3)), None, None, True]),
    ("batch_norm", [randn((4, 3)), In(np.zeros(4)), In(np.ones(4)), None, None, True]),
    ("batch_norm", [randn((4, 3)), None, None]),
    ("layer_norm", [randn((4, 3)), (4,)]),
    ("layer_norm", [randn((4, 3)), (3,), In(np.ones(4))]),
    ("layer_norm", [randint(0, 3, (4, 3)), (3,)]),
    ("group_norm", [randn((2, 6, 3)), 4]),
    ("group_norm", [randn((2, 6, 3)), 3, In(np.ones(5))]),
    ("rms_norm", [randn((4, 3)), (4,)]),
    ("rms_norm", [randint(0, 3, (4, 3)), (3,)]),
    ("instance_norm", [randn((1, 3, 1))]),
    ("local_response_norm", [randn((2, 3)), 2]),
])
def test_normalisation_errors(name, args):
    check(fn(name), *args)


def test_linear_bilinear_and_distances():
    check(fn("linear"), randn((4, 3), "float64"), randn((5, 3), "float64", 1), w(5, 2),
          grad=True)
    check(fn("linear"), randn((2, 4, 3), "float64"), randn((5, 3), "float64", 1), grad=True)
    check(fn("linear"), randn((2, 3)), randn((4, 5)))
    check(fn("bilinear"), randn((4, 3), "float64"), randn((4, 2), "float64", 3),
          randn((5, 3, 2), "float64", 1), w(5, 2), grad=True)
    check(fn("cosine_similarity"), randn((4, 3), "float64"), randn((4, 3), "float64", 1),
          grad=True)
    check(fn("cosine_similarity", dim=0), randn((4, 3), "float64"), randn((1, 3), "float64", 1),
          grad=True)
    check(fn("cosine_similarity"), In(np.zeros((2, 3))), In(np.ones((2, 3))), grad=True)
    check(fn("pairwise_distance"), randn((4, 3), "float64"), randn((4, 3), "float64", 1),
          grad=True)
    check(fn("pairwise_distance", p=1.0, keepdim=True), randn((4, 3), "float64"),
          randn((4, 3), "float64", 1), grad=True)
    check(fn("normalize"), randn((4, 3), "float64"), grad=True)
    check(fn("normalize", p=1.0, dim=0), randn((4, 3), "float64"), grad=True)


def test_embedding():
    check(fn("embedding"), randint(0, 5, (3, 4)), randn((5, 3), "float64"), grad=True)
    check(fn("embedding", padding_idx=2), randint(0, 5, (3, 4)), randn((5, 3), "float64"),
          grad=True)
    check(fn("embedding", padding_idx=-1), randint(0, 5, (6,)), randn((5, 3), "float64"),
          grad=True)
    check(fn("embedding"), In([5], "int64"), randn((3, 2)))
    check(fn("embedding"), In([1.0]), randn((3, 2)))
    check(fn("embedding", padding_idx=4), In([1], "int64"), randn((3, 2)))


def test_embedding_max_norm_renormalises_rows_in_place():
    def run(m, idx, weight):
        with m.no_grad():
            out = (RF if m is t else m.nn.functional).embedding(idx, weight, max_norm=1.0)
        return out, weight
    check(run, In([0, 2, 2], "int64"), randn((4, 3), "float64"))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag(mode):
    check(fn("embedding_bag", mode=mode), randint(0, 6, (3, 4)), randn((6, 2), "float64"),
          grad=True)
    check(lambda m, i, wt, o: fn("embedding_bag", mode=mode)(m, i, wt, o),
          In([1, 2, 4, 5, 4, 3, 2, 0], "int64"), randn((6, 2), "float64"), In([0, 3, 3, 6], "int64"), grad=True)


def test_embedding_bag_per_sample_weights_and_padding():
    check(lambda m, i, wt, o, s: fn("embedding_bag", mode="sum")(m, i, wt, o,
                                                                  per_sample_weights=s),
          In([1, 2, 4, 5], "int64"), randn((6, 2), "float64"), In([0, 2], "int64"), randn((4,), "float64", 5),
          grad=True)
    check(fn("embedding_bag", mode="mean", padding_idx=1), randint(0, 3, (3, 4)),
          randn((6, 2), "float64"), grad=True)


SDPA = [randn((2, 3, 4, 5), "float64"), randn((2, 3, 6, 5), "float64", 1),
        randn((2, 3, 6, 2), "float64", 2)]


@pytest.mark.parametrize("kw", [{}, {"is_causal": True}, {"scale": 0.3}])
def test_attention(kw):
    check(fn("scaled_dot_product_attention", **kw), *SDPA, grad=True)


def test_attention_masks_and_gqa():
    mask = In(np.random.default_rng(1).random((4, 6)) > 0.3, "bool")
    check(lambda m, q, k, v, a: fn("scaled_dot_product_attention")(m, q, k, v, attn_mask=a),
          *SDPA, mask, grad=True)
    check(lambda m, q, k, v, a: fn("scaled_dot_product_attention")(m, q, k, v, attn_mask=a),
          *SDPA, randn((4, 6), "float64", 7), grad=True)
    rows = np.ones((4, 6), bool)
    rows[1] = False  # a fully masked row gives zeros, not NaN
    check(lambda m, q, k, v, a: fn("scaled_dot_product_attention")(m, q, k, v, attn_mask=a),
          *SDPA, In(rows, "bool"), grad=True)
    check(fn("scaled_dot_product_attention", enable_gqa=True), randn((2, 4, 4, 5), "float64"),
          randn((2, 2, 6, 5), "float64", 1), randn((2, 2, 6, 2), "float64", 2), grad=True)
    check_double_backward(fn("scaled_dot_product_attention", is_causal=True), *SDPA)


def test_attention_errors():
    check(lambda m, q, k, v: fn("scaled_dot_product_attention")(
        m, q, k, v, is_causal=True, attn_mask=m.ones(4, 6, dtype=m.bool)), *SDPA)
    check(fn("scaled_dot_product_attention"), randn((2, 3, 4, 5)), randn((2, 3, 6, 5),
                                                                         "float64"),
          randn((2, 3, 6, 2)))


def test_dropout_statistics_and_scaling():
    t.manual_seed(0)
    x = t.ones(200, 100)
    y = RF.dropout(x, 0.3)
    kept = y != 0
    frac = float(kept.float().mean())
    assert abs(frac - 0.7) < 0.02
    np.testing.assert_allclose(np.asarray(y[kept]._np), 1 / 0.7, rtol=1e-6)
    t.manual_seed(0)
    assert bool((RF.dropout(x, 0.3) == y).all())  # the generator decides the mask


def test_dropout_modes_and_errors():
    x = t.randn(4, 5, requires_grad=True)
    assert RF.dropout(x, 0.5, training=False) is x
    assert bool((RF.dropout(x, 1.0) == 0).all())
    y = RF.dropout(x, 0.5)
    y.sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad._np), np.asarray((y != 0).float()._np) * 2)
    check(fn("dropout", p=1.5), randn((2, 3)))
    check(fn("dropout2d", p=0.5), randn((2,)))
    z = RF.dropout2d(t.ones(8, 16, 3, 3), 0.5)
    per_channel = z.reshape(8, 16, 9)
    assert bool(((per_channel == 0).all(-1).logical_or((per_channel == 2).all(-1))).all())
    z1 = RF.dropout1d(t.ones(4, 8, 5), 0.5)
    assert bool(((z1 == 0).all(-1).logical_or((z1 == 2).all(-1))).all())


def test_alpha_dropout_keeps_selu_statistics():
    t.manual_seed(1)
    x = t.randn(400, 250)
    y = RF.alpha_dropout(x, 0.2, training=True)
    assert abs(float(y.mean())) < 0.03 and abs(float(y.std()) - 1) < 0.03
    assert RF.alpha_dropout(x, 0.2) is x
    dropped = RF.feature_alpha_dropout(t.ones(8, 16, 4), 0.5, training=True)
    values = dropped.reshape(8, 16, 4)
    assert bool((values == values[..., :1]).all())  # whole channels share their fate



def _mha(m, q, k, v, w_in, b_in, w_out, b_out, bk, bv, **kw):
    F = RF if m is t else m.nn.functional
    return F.multi_head_attention_forward(q, k, v, 4, 2, w_in, b_in, bk, bv,
                                          kw.pop("add_zero_attn", False), 0.0, w_out, b_out,
                                          **kw)


MHA = [randn((3, 2, 4), "float64"), randn((5, 2, 4), "float64", 1),
       randn((5, 2, 4), "float64", 2), randn((12, 4), "float64", 3), randn((12,), "float64", 4),
       randn((4, 4), "float64", 5), randn((4,), "float64", 6)]


@pytest.mark.parametrize("kw", [
    {}, {"need_weights": False}, {"average_attn_weights": False},
    {"add_zero_attn": True}, {"with_bias_kv": True},
])
def test_multi_head_attention_forward(kw):
    kw = dict(kw)
    bias = kw.pop("with_bias_kv", False)
    bk = randn((1, 1, 4), "float64", 7) if bias else None
    bv = randn((1, 1, 4), "float64", 8) if bias else None
    check(lambda m, *a: _mha(m, *a, **kw), *MHA, bk, bv, grad=True)


def test_multi_head_attention_masks():
    pad = In(np.array([[False, False, True, False, True], [False] * 5]), "bool")
    causal = In(np.triu(np.ones((3, 5), bool), 3), "bool")
    for need in (True, False):
        check(lambda m, *a, need=need: _mha(m, *a[:-2], None, None, key_padding_mask=a[-2],
                                 attn_mask=a[-1], need_weights=need),
              *MHA, pad, causal, grad=True)
    check(lambda m, *a: _mha(m, *a, None, None, attn_mask=a[0].new_zeros(3, 5),
                             is_causal=True, need_weights=False), *MHA, grad=True)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape,dtype", [((8, 5, 12, 12), "float32"), ((6, 4, 50), "float64"),
                                         ((7, 3), "float64")])
def test_batch_norm_cpu_kernel_at_size(training, affine, shape, dtype):
    # the CPU kernel's per-channel sums are BLAS products over (N, C, L): its values and
    # all three gradients against torch's, with and without batch statistics
    c = shape[1]
    params = [randn((c,), dtype, 3), randn((c,), dtype, 4)] if affine else [None, None]

    def run(m, x, weight, bias):
        rm = m.tensor(np.linspace(-1, 1, c), dtype=x.dtype)
        rv = m.tensor(np.linspace(0.5, 2, c), dtype=x.dtype)
        out = (RF if m is t else m.nn.functional).batch_norm(
            x, rm, rv, weight, bias, training=training, momentum=0.2)
        return out, rm, rv
    check(run, randn(shape, dtype, 2), *params, grad=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("size", [5000, 4096, 3 * 1024 + 5, 100])
def test_relu_cpu_kernel_rows(dtype, size):
    # large contiguous arrays run as rows against a row of zeros: the same bits as the
    # plain maximum (NaN kept, -0.0 as numpy's maximum gives it), torch's values
    from refimpl.ops.activation import _relu_np

    rng = np.random.default_rng(size)
    x = rng.standard_normal(size).astype(dtype)
    x[::7], x[::11] = -0.0, np.nan
    for a in (x, x.reshape(-1, 5) if size % 5 == 0 else x, x[::2]):
        got, want = _relu_np(a), np.maximum(a, np.zeros((), a.dtype))
        assert got.shape == want.shape and got.dtype == want.dtype
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8))
    if dtype is not np.float16:
        check(lambda m, v: m.relu(v), In(x))
