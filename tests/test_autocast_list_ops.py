"""The ops of refimpl.ops.amp_list_ops (torch's autocast-list ops refimpl lacked) against
torch 2.13 on the CPU: forward values, gradients and errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import refimpl

torch = pytest.importorskip("torch")

N = 6


def _arrays(seed: int, shapes):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float64) for s in shapes]


def _cell(chunks: int, lstm: bool):
    shapes = [(N, N), (N, N)] + ([(N, N)] if lstm else []) + [(chunks * N, N)] * 2 + \
        [(chunks * N,)] * 2
    return shapes


CASES = {
    "addr": ([(N, N), (N,), (N,)], lambda m, a, b, c: m.addr(a, b, c, beta=0.5, alpha=2)),
    "addr_method": ([(N, N), (N,), (N,)], lambda m, a, b, c: a.addr(b, c)),
    "renorm": ([(N, 4, 3)], lambda m, a: m.renorm(a, 2, 1, 1.5)),
    "renorm_p1": ([(N, 4)], lambda m, a: a.renorm(1, 0, 0.5)),
    "chain_matmul": ([(N, 3), (3, 4), (4, 5)], lambda m, a, b, c: m.chain_matmul(a, b, c)),
    "conv_tbc": ([(7, 2, 3), (3, 3, 5), (5,)], lambda m, a, b, c: m.conv_tbc(a, b, c, 1)),
    "rnn_tanh_cell": (_cell(1, False), lambda m, *a: m.rnn_tanh_cell(*a)),
    "rnn_relu_cell": (_cell(1, False), lambda m, *a: m.rnn_relu_cell(*a)),
    "gru_cell": (_cell(3, False), lambda m, *a: m.gru_cell(*a)),
    "lstm_cell": (_cell(4, True), lambda m, x, h, c, *w: m.lstm_cell(x, (h, c), *w)[0]
                  + 2 * m.lstm_cell(x, (h, c), *w)[1]),
    "cdist": ([(2, 5, 3), (2, 4, 3)], lambda m, a, b: m.cdist(a, b)),
    "cdist_p1": ([(5, 3), (4, 3)], lambda m, a, b: m.cdist(a, b, p=1.0)),
    "convolution": ([(2, 3, 6, 6), (4, 3, 3, 3), (4,)],
                    lambda m, a, b, c: m.convolution(a, b, c, [1, 1], [1, 1], [1, 1], False,
                                                     [0, 0], 1)),
    "_convolution_t": ([(2, 3, 5, 5), (3, 4, 3, 3), (4,)],
                       lambda m, a, b, c: m._convolution(a, b, c, [2, 2], [1, 1], [1, 1], True,
                                                         [1, 1], 1, False, True, True, True)),
    "linalg_vecdot": ([(N, N), (N, N)], lambda m, a, b: m._C._linalg.linalg_vecdot(a, b)),
    "linalg_multi_dot": ([(N, 3), (3, 4), (4, 2)],
                         lambda m, a, b, c: m._C._linalg.linalg_multi_dot([a, b, c])),
    "upsample_nearest1d": ([(1, 2, 5)], lambda m, a: m._C._nn.upsample_nearest1d(a, [9])),
    "upsample_nearest2d": ([(1, 2, 3, 4)],
                           lambda m, a: m._C._nn.upsample_nearest2d(a, [5, 7])),
    "upsample_nearest3d": ([(1, 2, 2, 3, 2)],
                           lambda m, a: m._C._nn.upsample_nearest3d(a, [3, 5, 4])),
    "upsample_nearest2d_vec": ([(1, 2, 3, 4)],
                               lambda m, a: m._C._nn.upsample_nearest2d(a, None, [2.0, 1.5])),
    "upsample_linear1d": ([(1, 2, 5)],
                          lambda m, a: m._C._nn.upsample_linear1d(a, [8], False)),
    "upsample_bilinear2d": ([(1, 2, 3, 4)],
                            lambda m, a: m._C._nn.upsample_bilinear2d(a, [5, 7], True)),
    "upsample_trilinear3d": ([(1, 2, 2, 3, 2)],
                             lambda m, a: m._C._nn.upsample_trilinear3d(a, [3, 5, 4], False)),
    "upsample_bicubic2d": ([(1, 2, 4, 4)],
                           lambda m, a: m._C._nn.upsample_bicubic2d(a, [6, 7], False)),
    "prelu": ([(2, 3, 4), (3,)], lambda m, a, b: m.prelu(a, b)),
    "kl_div": ([(N, N), (N, N)], lambda m, a, b: m.kl_div(a, b.abs(), 1)),
    "bce_logits": ([(N, N), (N, N)],
                   lambda m, a, b: m.binary_cross_entropy_with_logits(a, b.sigmoid())),
    "grid_sampler": ([(1, 2, 4, 5), (1, 3, 3, 2)],
                     lambda m, a, b: m.grid_sampler(a, b.tanh(), 0, 0, False)),
    "nearest_exact1d": ([(1, 2, 5)],
                        lambda m, a: m._C._nn._upsample_nearest_exact1d(a, [8])),
    "nearest_exact2d": ([(1, 2, 3, 4)],
                        lambda m, a: m._C._nn._upsample_nearest_exact2d(a, [5, 7])),
    "nearest_exact3d": ([(1, 1, 2, 3, 2)],
                        lambda m, a: m._C._nn._upsample_nearest_exact3d(a, [3, 4, 5])),
    "native_layer_norm": ([(2, 3, 4), (3, 4), (3, 4)],
                          lambda m, a, w, b: sum(o.sum() * (i + 1) for i, o in enumerate(
                              m.native_layer_norm(a, [3, 4], w, b, 1e-5)))),
    "frobenius_norm": ([(3, 4, 2)], lambda m, a: m.frobenius_norm(a, [0, 2])),
    "nn_smooth_l1": ([(N, N), (N, N)], lambda m, a, b: m._C._nn.smooth_l1_loss(a, b)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_and_grad_match_torch(name):
    shapes, fn = CASES[name]
    arrays = _arrays(len(name), shapes)
    results = []
    for mod in (refimpl, torch):
        xs = [mod.tensor(a, requires_grad=True) for a in arrays]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(mod, *xs)
        weights = mod.tensor(_arrays(99, [tuple(out.shape)])[0])
        grads = mod.autograd.grad((out * weights).sum(), xs, allow_unused=True)
        results.append((out.detach().numpy(),
                        [None if g is None else g.numpy() for g in grads]))
    (ours, our_grads), (theirs, their_grads) = results
    np.testing.assert_allclose(ours, theirs, rtol=1e-7, atol=1e-9)
    for a, b in zip(our_grads, their_grads, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize(("call", "match"), [
    (lambda m: m.addr(m.ones(2, 2), m.ones(2, 1), m.ones(2)), "Expected 1-D argument vec1"),
    (lambda m: m.renorm(m.ones(2, 2), 0, 0, 1.0), "non-positive-norm not supported"),
    (lambda m: m.renorm(m.ones(2, 2), 2, 0, -1.0), "expected maxnorm to be >= 0"),
    (lambda m: m.conv_tbc(m.ones(2, 2), m.ones(1, 2, 2), m.ones(2)), "Input must have 3 dims"),
])
def test_errors_match_torch(call, match):
    for mod in (refimpl, torch):
        with pytest.raises(RuntimeError, match=match):
            call(mod)


def test_addr_beta_zero_ignores_nan():
    for mod in (refimpl, torch):
        out = mod.addr(mod.full((2, 2), float("nan")), mod.ones(2), mod.ones(2), beta=0)
        assert out.tolist() == [[1.0, 1.0], [1.0, 1.0]]
