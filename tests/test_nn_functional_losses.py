"""refimpl.nn.functional activations and losses against torch on the CPU: values for
every floating dtype, torch's errors for integer inputs, gradients, double backward,
autograd node names of the activations that are ops of their own, and the losses'
reductions, class weights, ignore_index, label smoothing and probability targets."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _oracle import In, check, check_double_backward, randint, randn

import refimpl as t
import refimpl.nn.functional as RF

FLOATS = ["float32", "float64", "float16", "bfloat16"]
SMOOTH = ["elu", "selu", "celu", "mish", "logsigmoid", "softsign", "tanhshrink", "silu",
          "gelu", "softplus", "sigmoid", "tanh", "hardswish"]
PIECEWISE = ["leaky_relu", "hardsigmoid", "relu6", "hardshrink", "softshrink", "relu",
             "hardtanh"]


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


@pytest.mark.parametrize("name", SMOOTH + PIECEWISE)
@pytest.mark.parametrize("dtype", FLOATS)
def test_activation_values(name, dtype):
    check(fn(name), randn((4, 5), dtype), grad=dtype == "float64")


@pytest.mark.parametrize("name", SMOOTH + PIECEWISE)
def test_activation_integer_inputs(name):
    check(fn(name), randint(-3, 3, (4,)))


@pytest.mark.parametrize("name", SMOOTH)
def test_activation_double_backward(name):
    check_double_backward(fn(name), randn((4, 5), "float64"))


@pytest.mark.parametrize("name,kw", [
    ("elu", {"alpha": 0.5}), ("celu", {"alpha": 0.5}), ("gelu", {"approximate": "tanh"}),
    ("leaky_relu", {"negative_slope": 0.2}), ("softplus", {"beta": 2.0, "threshold": 1.0}),
    ("hardshrink", {"lambd": 0.3}), ("softshrink", {"lambd": 0.3}),
    ("hardtanh", {"min_val": -0.5, "max_val": 0.2}), ("threshold", {"threshold": 0.1,
                                                                   "value": 7.0}),
    ("softmin", {"dim": 1}), ("softmax", {"dim": 0}), ("log_softmax", {"dim": 1}),
    ("glu", {}), ("glu", {"dim": 0}),
])
def test_activation_arguments(name, kw):
    check(fn(name, **kw), randn((4, 6), "float64"), grad=True)


@pytest.mark.parametrize("name", ["elu", "leaky_relu", "hardsigmoid", "hardswish", "relu",
                                  "silu", "hardtanh", "selu", "celu", "relu6", "mish"])
def test_inplace_activations(name):
    def run(m, x):
        y = x.clone()
        out = fn(name, inplace=True)(m, y)
        return out, y
    check(run, randn((3, 4), "float64"), grad=True)


def test_activation_nodes_are_torchs():
    x = t.randn(3, requires_grad=True)
    nodes = {name: getattr(RF, name)(x).grad_fn.name() for name in
             ["elu", "selu", "leaky_relu", "hardsigmoid", "hardswish", "hardshrink",
              "softshrink", "gelu", "silu", "softplus", "relu6"]}
    assert nodes == {"elu": "EluBackward0", "selu": "EluBackward0",
                     "leaky_relu": "LeakyReluBackward0", "hardsigmoid": "HardsigmoidBackward0",
                     "hardswish": "HardswishBackward0", "hardshrink": "HardshrinkBackward0",
                     "softshrink": "SoftshrinkBackward0", "gelu": "GeluBackward0",
                     "silu": "SiluBackward0", "softplus": "SoftplusBackward0",
                     "relu6": "HardtanhBackward0"}


def test_activation_errors():
    check(fn("glu", dim=1), randn((2, 3)))
    check(fn("glu"), In(1.0))
    check(fn("prelu"), randn((2, 3)), randn((2,)))
    check(fn("prelu"), randn((2, 3, 4), "float64"), randn((3,), "float64", 1), grad=True)
    check(fn("prelu"), randn((2, 3, 4), "float64"), randn((1,), "float64", 1), grad=True)
    check(fn("softshrink", lambd=-1.0), randn((2,)))
    check(fn("softmax"), randn((2, 3)))


def probs(shape, seed=3):
    return In(np.random.default_rng(seed).random(shape), "float64")


def signs(n, seed=5):
    return In(np.where(np.random.default_rng(seed).random(n) > 0.5, 1.0, -1.0), "float64")


LOSSES = [
    ("nll_loss", [randn((4, 5), "float64"), randint(0, 5, (4,))]),
    ("nll_loss", [randn((2, 5, 3), "float64"), randint(0, 5, (2, 3))]),
    ("nll_loss", [randn((5,), "float64"), In(2, "int64")]),
    ("mse_loss", [randn((4, 5), "float64"), randn((4, 5), "float64", 1)]),
    ("l1_loss", [randn((4, 5), "float64"), randn((4, 5), "float64", 1)]),
    ("smooth_l1_loss", [randn((4, 5), "float64"), randn((4, 5), "float64", 1)]),
    ("huber_loss", [randn((4, 5), "float64"), randn((4, 5), "float64", 1)]),
    ("binary_cross_entropy", [probs((4, 5)), probs((4, 5), 4)]),
    ("binary_cross_entropy_with_logits", [randn((4, 5), "float64"), probs((4, 5))]),
    ("kl_div", [randn((4, 5), "float64"), probs((4, 5))]),
    ("margin_ranking_loss", [randn((6,), "float64"), randn((6,), "float64", 1), signs(6)]),
    ("hinge_embedding_loss", [randn((6,), "float64"), signs(6)]),
    ("multilabel_soft_margin_loss", [randn((4, 3), "float64"),
                                     In(np.random.default_rng(4).integers(0, 2, (4, 3)),
                                        "float64")]),
    ("cosine_embedding_loss", [randn((4, 3), "float64"), randn((4, 3), "float64", 1),
                               signs(4)]),
    ("triplet_margin_loss", [randn((4, 3), "float64"), randn((4, 3), "float64", 1),
                             randn((4, 3), "float64", 2)]),
    ("poisson_nll_loss", [randn((4, 3), "float64"), probs((4, 3))]),
    ("gaussian_nll_loss", [randn((4, 3), "float64"), randn((4, 3), "float64", 1),
                           In(np.random.default_rng(4).random((4, 3)) + 0.1, "float64")]),
]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name,args", LOSSES)
def test_losses(name, args, reduction):
    check(fn(name, reduction=reduction), *args, grad=True)


def test_soft_margin_loss_and_its_target():
    check(lambda m, x, y: fn("soft_margin_loss")(m, x, y.detach()), randn((6,), "float64"),
          signs(6), grad=True)
    check(fn("soft_margin_loss"), randn((6,), "float64"), signs(6), grad=True)


@pytest.mark.parametrize("kw", [{}, {"delta": 0.5}, {"beta": 0.5}, {"beta": 0.0}])
def test_smooth_losses_parameters(kw):
    name = "huber_loss" if "delta" in kw else "smooth_l1_loss"
    check(fn(name, **kw), randn((4, 5), "float64"), randn((4, 5), "float64", 1), grad=True)


@pytest.mark.parametrize("kw", [
    {}, {"reduction": "none"}, {"reduction": "sum"}, {"ignore_index": 2},
    {"label_smoothing": 0.2}, {"label_smoothing": 0.3, "ignore_index": 1, "reduction": "sum"},
    {"label_smoothing": 0.1, "reduction": "none"},
])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_class_indices(kw, weighted):
    weight = randn((5,), "float64", 9) if weighted else None

    def run(m, x, y, w):
        return fn("cross_entropy", weight=None if w is None else w.detach(), **kw)(m, x, y)
    check(run, randn((4, 5), "float64"), randint(0, 5, (4,)), weight, grad=True)
    check(run, randn((2, 5, 3), "float64"), randint(0, 5, (2, 3)), weight, grad=True)


@pytest.mark.parametrize("kw", [{}, {"reduction": "none"}, {"label_smoothing": 0.2},
                                {"reduction": "sum", "label_smoothing": 0.1}])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_probability_targets(kw, weighted):
    weight = randn((5,), "float64", 9) if weighted else None
    check(lambda m, x, y, w: fn("cross_entropy", weight=w, **kw)(m, x, y.softmax(1)),
          randn((4, 5), "float64"), randn((4, 5), "float64", 4), weight, grad=True)


def test_cross_entropy_double_backward():
    check_double_backward(fn("cross_entropy", label_smoothing=0.1), randn((4, 5), "float64"),
                          randint(0, 5, (4,)))


@pytest.mark.parametrize("name,args,kw", [
    ("cross_entropy", [randn((4, 3)), randint(0, 3, (5,))], {}),
    ("cross_entropy", [randn((4, 3)), randn((4,))], {}),
    ("cross_entropy", [randn((4, 3)), probs((4, 3))], {"ignore_index": 1}),
    ("cross_entropy", [randn((4, 3)), In([0, 1, 5, 2], "int64")], {}),
    ("cross_entropy", [randn((2, 3, 4)), randint(0, 3, (2, 5))], {}),
    ("cross_entropy", [randn((2, 3, 4)), randint(0, 3, (2, 4))], {"label_smoothing": 1.5}),
    ("nll_loss", [randn((4, 3)), In([0, 1, 5, 2], "int64")], {}),
    ("nll_loss", [randn((4, 3)), randint(0, 3, (4,), "int32")], {}),
    ("nll_loss", [randn((4, 3)), randint(0, 3, (4,))], {"reduction": "foo"}),
    ("binary_cross_entropy", [probs((3,)), probs((4,))], {}),
    ("binary_cross_entropy", [In([0.5, 1.5]), In([0.0, 1.0])], {}),
    ("binary_cross_entropy_with_logits", [randn((3,)), probs((4,))], {}),
    ("smooth_l1_loss", [randn((3,)), randn((3,))], {"beta": -1.0}),
    ("huber_loss", [randn((3,)), randn((3,))], {"delta": 0.0}),
    ("mse_loss", [randn((4, 3)), randn((2, 3))], {}),
    ("cosine_embedding_loss", [randn((4, 3)), randn((4, 2)), signs(4)], {}),
    ("triplet_margin_loss", [randn((4, 3)), randn((3,)), randn((4, 3))], {}),
    ("margin_ranking_loss", [randn((4,)), randn((4, 1)), signs(4)], {}),
])
def test_loss_errors(name, args, kw):
    check(fn(name, **kw), *args)


def test_legacy_reduction_arguments():
    check(fn("mse_loss", size_average=False), randn((4, 5), "float64"),
          randn((4, 5), "float64", 1))
    check(fn("l1_loss", reduce=False), randn((4, 5), "float64"), randn((4, 5), "float64", 1))
    check(fn("nll_loss", size_average=True, reduce=True), randn((4, 5), "float64"),
          randint(0, 5, (4,)))


def test_losses_with_weights():
    check(lambda m, x, y, pw: fn("binary_cross_entropy_with_logits", pos_weight=pw)(m, x, y),
          randn((4, 3), "float64"), probs((4, 3)), randn((3,), "float64", 8), grad=True)
    check(lambda m, x, y, w: fn("binary_cross_entropy", weight=w)(m, x, y), probs((4, 3)),
          probs((4, 3), 5), randn((3,), "float64", 8), grad=True)
    check(lambda m, x, y, w: fn("binary_cross_entropy", weight=w.detach())(m, x, y),
          probs((4, 3)), probs((4, 3), 5), randn((3,), "float64", 8), grad=True)
    check(fn("kl_div", reduction="batchmean", log_target=True), randn((4, 5), "float64"),
          randn((4, 5), "float64", 1), grad=True)
    check(fn("triplet_margin_loss", swap=True, p=1.0, margin=0.5), randn((4, 3), "float64"),
          randn((4, 3), "float64", 1), randn((4, 3), "float64", 2), grad=True)
    check(fn("poisson_nll_loss", log_input=False, full=True),
          In(np.random.default_rng(1).random((4, 3)) + 0.5, "float64"),
          In(np.random.default_rng(2).integers(0, 5, (4, 3)), "float64"), grad=True)
    check(fn("gaussian_nll_loss", full=True), randn((4, 3), "float64"),
          randn((4, 3), "float64", 1), In(np.random.default_rng(4).random(4) + 0.1, "float64"),
          grad=True)


def test_one_hot():
    check(fn("one_hot"), randint(0, 5, (3, 4)))
    check(fn("one_hot", num_classes=7), randint(0, 5, (3, 4)))
    check(fn("one_hot", num_classes=3), In([1, 4], "int64"))
    check(fn("one_hot"), In([-1, 2], "int64"))
    check(fn("one_hot"), In([1.0, 2.0]))
    check(fn("one_hot"), In(np.zeros(0), "int64"))


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_margin_losses_of_classes(reduction):
    check(fn("multi_margin_loss", reduction=reduction), randn((4, 5), "float64"),
          In([0, 3, 4, 1], "int64"), grad=True)
    check(fn("multi_margin_loss", p=2, margin=0.5, reduction=reduction),
          randn((4, 5), "float64"), In([0, 3, 4, 1], "int64"), grad=True)
    check(fn("multilabel_margin_loss", reduction=reduction), randn((3, 4), "float64"),
          In([[3, 0, -1, 1], [1, 2, 3, 0], [-1, 1, 2, 3]], "int64"), grad=True)


def test_distance_and_shuffle_helpers():
    check(fn("pdist"), randn((5, 3), "float64"), grad=True)
    check(fn("pdist", p=1.0), randn((5, 3), "float64"), grad=True)
    check(fn("channel_shuffle", groups=3), randn((2, 6, 2, 2), "float64"), grad=True)
    check(fn("channel_shuffle", groups=4), randn((1, 6, 2)))
    check(fn("triplet_margin_with_distance_loss", swap=True), randn((4, 3), "float64"),
          randn((4, 3), "float64", 1), randn((4, 3), "float64", 2), grad=True)


def test_max_unpool_inverts_max_pool():
    def run(m, x):
        F = RF if m is t else m.nn.functional
        values, idx = F.max_pool2d(x, 2, return_indices=True)
        return F.max_unpool2d(values, idx, 2)
    check(run, randn((1, 2, 4, 6), "float64"), grad=True)
    check(lambda m, x, i: fn("max_unpool2d", kernel_size=2)(m, x, i), randn((1, 1, 2, 2)),
          In([[[[0, 3], [9, 16]]]], "int64"))


def test_linear_cross_entropy():
    check(lambda m, x, w, y, b: fn("linear_cross_entropy", linear_bias=b, label_smoothing=0.1)(
        m, x, w, y), randn((4, 3), "float64"), randn((5, 3), "float64", 1),
        In([0, 4, 2, 1], "int64"), randn((5,), "float64", 2), grad=True)
    check(fn("linear_cross_entropy"), randn((2, 3)), randn((2, 4)), In([0, 1], "int64"))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_ctc_loss(reduction):
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((12, 3, 5))

    def run(m, x, targets, **kw):
        F = RF if m is t else m.nn.functional
        lp = x.log_softmax(2)
        return F.ctc_loss(lp, targets, [12, 10, 7], [4, 3, 2], reduction=reduction, **kw)
    padded = In([[1, 2, 2, 3], [4, 4, 1, 0], [2, 1, 0, 0]], "int64")
    check(lambda m, x, y: run(m, x, y), In(logits, "float64"), padded, grad=True)
    concatenated = In([1, 2, 2, 3, 4, 4, 1, 2, 1], "int64")
    check(lambda m, x, y: run(m, x, y), In(logits, "float64"), concatenated, grad=True)


def test_ctc_loss_impossible_alignments_and_raw_log_probs():
    rng = np.random.default_rng(1)
    lp = In(rng.standard_normal((3, 2, 4)), "float64")  # not normalised: torch's gradient
    targets = In([[1, 1, 1], [2, 3, 0]], "int64")       # 1,1,1 needs 5 steps: impossible
    for zero in (False, True):
        check(lambda m, x, y, zero=zero: (RF if m is t else m.nn.functional).ctc_loss(
            x, y, [3, 3], [3, 2], reduction="none", zero_infinity=zero), lp, targets,
            grad=zero)
