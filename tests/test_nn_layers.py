"""refimpl.nn layers against torch: each layer built in torch, its state dict loaded into
refimpl's, then forward outputs and gradients (inputs and parameters) compared."""

from __future__ import annotations

import numpy as np
import pytest

import refimpl

torch = pytest.importorskip("torch")

LAYERS = [
    ("Linear(5, 3)", (4, 5)),
    ("Linear(5, 3, bias=False)", (2, 4, 5)),
    ("Bilinear(3, 4, 2)", None),
    ("Conv1d(3, 4, 3, stride=2, padding=1)", (2, 3, 9)),
    ("Conv2d(4, 6, 3, padding='same', groups=2, padding_mode='reflect')", (2, 4, 6, 6)),
    ("Conv2d(3, 4, (3, 2), stride=(2, 1), dilation=(1, 2), padding_mode='circular')",
     (2, 3, 7, 7)),
    ("Conv3d(2, 3, 2)", (1, 2, 4, 4, 4)),
    ("ConvTranspose2d(3, 2, 3, stride=2, padding=1, output_padding=1)", (2, 3, 4, 4)),
    ("ConvTranspose1d(2, 4, 3, groups=2)", (2, 2, 5)),
    ("BatchNorm1d(4)", (6, 4)),
    ("BatchNorm2d(3, momentum=None)", (4, 3, 2, 2)),
    ("BatchNorm2d(3, affine=False, track_running_stats=False)", (4, 3, 2, 2)),
    ("LayerNorm([3, 4])", (2, 3, 4)),
    ("GroupNorm(2, 4)", (3, 4, 5)),
    ("RMSNorm(4, eps=1e-5)", (3, 4)),
    ("Embedding(10, 3, padding_idx=2)", "indices"),
    ("PReLU(3)", (2, 3, 4)),
    ("GELU(approximate='tanh')", (3, 4)),
    ("SiLU()", (3, 4)),
    ("LeakyReLU(0.2)", (3, 4)),
    ("ELU(0.5)", (3, 4)),
    ("Softmax(dim=1)", (3, 4)),
    ("LogSoftmax(dim=-1)", (3, 4)),
    ("Hardtanh(-0.5, 0.5)", (3, 4)),
    ("MaxPool2d(2, stride=1, padding=1)", (2, 3, 5, 5)),
    ("AvgPool2d(3, stride=2, padding=1, count_include_pad=False)", (2, 3, 5, 5)),
    ("AdaptiveAvgPool2d((2, 3))", (2, 3, 5, 7)),
    ("MaxPool1d(3)", (2, 3, 9)),
    ("Flatten(0, 1)", (2, 3, 4)),
    ("Unflatten(1, (2, 2))", (3, 4)),
]


def _run(lib, spec: str, shape, torch_module, initial: dict, train: bool):
    rng = np.random.default_rng(0)
    if lib is torch:
        module = torch_module
    else:
        module = eval("lib.nn." + spec)
        module.load_state_dict(initial)
    module.train(train)
    if shape == "indices":
        inputs = [lib.tensor(rng.integers(0, 10, (4, 3)))]
    elif shape is None:
        inputs = [lib.tensor(rng.standard_normal((5, 3)).astype(np.float32), requires_grad=True),
                  lib.tensor(rng.standard_normal((5, 4)).astype(np.float32), requires_grad=True)]
    else:
        inputs = [lib.tensor(rng.standard_normal(shape).astype(np.float32),
                             requires_grad=True)]
    out = module(*inputs)
    weight = lib.tensor(rng.standard_normal(tuple(out.shape)).astype(np.float32))
    (out * weight).sum().backward()
    grads = [i.grad for i in inputs if i.requires_grad] + [p.grad for p in module.parameters()]
    state = [v for v in module.state_dict().values()]
    return [out, *grads, *state]


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize(("spec", "shape"), LAYERS, ids=[s for s, _ in LAYERS])
def test_layer_matches_torch(spec, shape, train):
    if spec.startswith("ConvTranspose") and not hasattr(refimpl.nn.functional,
                                                        "conv_transpose1d"):
        with pytest.raises(NotImplementedError, match="conv_transpose"):
            tm = eval("torch.nn." + spec)
            _run(refimpl, spec, shape, tm,
                 {k: refimpl.tensor(v.numpy()) for k, v in tm.state_dict().items()}, train)
        return
    torch.manual_seed(0)
    torch_module = eval("torch.nn." + spec)
    initial = {k: refimpl.tensor(v.numpy()) for k, v in torch_module.state_dict().items()}
    expected = _run(torch, spec, shape, torch_module, initial, train)
    actual = _run(refimpl, spec, shape, torch_module, initial, train)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected, strict=True):
        np.testing.assert_allclose(a.detach().numpy(), e.detach().numpy(), rtol=1e-4,
                                   atol=1e-5)


MHA = [
    ({}, {}),
    ({"batch_first": True}, {"average_attn_weights": False}),
    ({"kdim": 3, "vdim": 5, "bias": False}, {}),
    ({"add_bias_kv": True, "add_zero_attn": True}, {}),
    ({}, {"attn_mask": "bool", "key_padding_mask": True}),
    ({}, {"attn_mask": "float", "need_weights": False}),
    ({"batch_first": True}, {"self": True}),
]


@pytest.mark.parametrize(("ctor", "call"), MHA, ids=[str(i) for i in range(len(MHA))])
def test_multihead_attention_matches_torch(ctor, call):
    def run(lib, tm):
        rng = np.random.default_rng(3)
        e, kd, vd = 4, ctor.get("kdim", 4), ctor.get("vdim", 4)
        first = ctor.get("batch_first", False)
        lq, ls, n = 3, 5, 2

        def arr(*s):
            return lib.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True)

        q = arr(n, lq, e) if first else arr(lq, n, e)
        k = arr(n, ls, kd) if first else arr(ls, n, kd)
        v = arr(n, ls, vd) if first else arr(ls, n, vd)
        if call.get("self"):
            k = v = q
        m = tm if lib is torch else refimpl.nn.MultiheadAttention(4, 2, **ctor)
        if lib is not torch:
            m.load_state_dict({key: refimpl.tensor(val.numpy())
                               for key, val in tm.state_dict().items()})
        kwargs = {key: val for key, val in call.items() if key != "self"}
        if kwargs.get("attn_mask") == "bool":
            kwargs["attn_mask"] = lib.tensor(np.triu(np.ones((lq, ls), bool), 1))
        elif kwargs.get("attn_mask") == "float":
            kwargs["attn_mask"] = lib.tensor(rng.standard_normal((lq, ls)).astype(np.float32))
        if kwargs.get("key_padding_mask"):
            kwargs["key_padding_mask"] = lib.tensor(np.array([[0, 0, 0, 0, 1],
                                                              [0, 1, 0, 0, 0]], bool))
        out, weights = m(q, k, v, **kwargs)
        out.sum().backward()
        res = [out, q.grad, k.grad, v.grad, *(p.grad for p in m.parameters())]
        return res + ([weights] if weights is not None else [])

    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(4, 2, **ctor)
    expected = run(torch, tm)
    actual = run(refimpl, tm)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected, strict=True):
        np.testing.assert_allclose(a.detach().numpy(), e.detach().numpy(), rtol=1e-4,
                                   atol=1e-5)


LOSSES = [
    ("CrossEntropyLoss(label_smoothing=0.1)", "classes"),
    ("NLLLoss(reduction='sum')", "classes"),
    ("MSELoss()", "same"),
    ("L1Loss(reduction='none')", "same"),
    ("SmoothL1Loss(beta=0.5)", "same"),
    ("HuberLoss(delta=0.3)", "same"),
    ("BCEWithLogitsLoss()", "prob"),
    ("BCELoss()", "sigmoid"),
    ("KLDivLoss(reduction='batchmean')", "same"),
]


@pytest.mark.parametrize(("spec", "kind"), LOSSES, ids=[s for s, _ in LOSSES])
def test_loss_matches_torch(spec, kind):
    def run(lib):
        rng = np.random.default_rng(5)
        x = lib.tensor(rng.standard_normal((4, 3)).astype(np.float32), requires_grad=True)
        inp = x.sigmoid() if kind == "sigmoid" else x
        if kind == "classes":
            inp = inp.log_softmax(1) if "NLL" in spec else inp
            target = lib.tensor(rng.integers(0, 3, 4))
        elif kind in ("prob", "sigmoid"):
            target = lib.tensor(rng.random((4, 3)).astype(np.float32))
        else:
            target = lib.tensor(rng.standard_normal((4, 3)).astype(np.float32))
        loss = eval("lib.nn." + spec)(inp, target)
        loss.sum().backward()
        return [loss, x.grad]

    for a, e in zip(run(refimpl), run(torch), strict=True):
        np.testing.assert_allclose(a.detach().numpy(), e.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


RNNS = [
    ("LSTM(3, 4)", False),
    ("LSTM(3, 5, num_layers=2, proj_size=2, bidirectional=True, batch_first=True)", True),
    ("GRU(3, 4, num_layers=2, bias=False)", False),
    ("GRU(3, 4, bidirectional=True)", False),
    ("RNN(3, 4, nonlinearity='relu', num_layers=2)", False),
    ("RNN(3, 4)", "unbatched"),
]


@pytest.mark.parametrize(("spec", "first"), RNNS, ids=[s for s, _ in RNNS])
def test_recurrent_layer_matches_torch(spec, first):
    torch.manual_seed(0)
    tm = eval("torch.nn." + spec)
    initial = {k: refimpl.tensor(v.numpy()) for k, v in tm.state_dict().items()}

    def run(lib):
        rng = np.random.default_rng(4)
        shape = (5, 3) if first == "unbatched" else ((2, 5, 3) if first else (5, 2, 3))
        x = lib.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
        m = tm if lib is torch else eval("refimpl.nn." + spec)
        if lib is not torch:
            m.load_state_dict(initial)
        out, hidden = m(x)
        hs = list(hidden) if isinstance(hidden, tuple) else [hidden]
        (out.sum() + sum(h.sum() for h in hs)).backward()
        return [out, *hs, x.grad, *(p.grad for p in m.parameters())]

    assert repr(eval("refimpl.nn." + spec)) == repr(tm)
    assert [n for n, _ in eval("refimpl.nn." + spec).named_parameters()] == \
        [n for n, _ in tm.named_parameters()]
    for a, e in zip(run(refimpl), run(torch), strict=True):
        np.testing.assert_allclose(a.detach().numpy(), e.detach().numpy(), rtol=1e-4,
                                   atol=1e-5)


EXTRA_LAYERS = [
    ("Hardshrink(0.3)", (3, 4)),
    ("Softshrink()", (3, 4)),
    ("RReLU(0.1, 0.3)", "eval"),
    ("Softmax2d()", (2, 3, 2, 2)),
    ("InstanceNorm1d(3)", (2, 3, 5)),
    ("InstanceNorm2d(3, affine=True, track_running_stats=True)", (2, 3, 4, 4)),
    ("InstanceNorm2d(3)", (3, 4, 4)),
    ("LocalResponseNorm(2)", (2, 4, 3, 3)),
    ("ZeroPad2d((1, 0, 2, 1))", (1, 2, 3, 3)),
    ("ConstantPad1d(2, 3.5)", (2, 3, 4)),
    ("ReflectionPad2d(1)", (1, 2, 3, 3)),
    ("ReplicationPad1d((0, 2))", (2, 3, 4)),
    ("CircularPad2d(1)", (1, 2, 3, 3)),
    ("PixelShuffle(2)", (1, 8, 2, 3)),
    ("PixelUnshuffle(2)", (1, 2, 4, 6)),
    ("ChannelShuffle(2)", (1, 4, 2, 2)),
    ("Upsample(scale_factor=2, mode='bilinear')", (1, 2, 3, 3)),
    ("UpsamplingNearest2d(size=(5, 4))", (1, 2, 3, 3)),
    ("UpsamplingBilinear2d(scale_factor=2)", (1, 2, 3, 3)),
    ("Unfold(2, stride=1)", (1, 2, 4, 4)),
    ("Fold((4, 5), 2)", (1, 8, 12)),
]


@pytest.mark.parametrize(("spec", "shape"), EXTRA_LAYERS, ids=[s for s, _ in EXTRA_LAYERS])
def test_extra_layer_matches_torch(spec, shape):
    torch.manual_seed(0)
    torch_module = eval("torch.nn." + spec)
    assert repr(eval("refimpl.nn." + spec)) == repr(torch_module)
    initial = {k: refimpl.tensor(v.numpy()) for k, v in torch_module.state_dict().items()}
    train = shape != "eval"
    shape = (3, 4) if shape == "eval" else shape
    expected = _run(torch, spec, shape, torch_module, initial, train)
    actual = _run(refimpl, spec, shape, torch_module, initial, train)
    for a, e in zip(actual, expected, strict=True):
        np.testing.assert_allclose(a.detach().numpy(), e.detach().numpy(), rtol=1e-4,
                                   atol=1e-5)


EXTRA_LOSSES = [
    ("MarginRankingLoss(margin=0.2)", "ranking"),
    ("CosineEmbeddingLoss(margin=0.1)", "ranking"),
    ("HingeEmbeddingLoss(margin=0.5)", "sign"),
    ("MultiLabelSoftMarginLoss()", "prob"),
    ("MultiMarginLoss(p=2, margin=0.5)", "classes"),
    ("MultiLabelMarginLoss()", "multilabel"),
    ("TripletMarginLoss(margin=0.3, swap=True)", "triplet"),
    ("TripletMarginWithDistanceLoss(margin=0.4)", "triplet"),
    ("PoissonNLLLoss(full=True)", "positive"),
    ("GaussianNLLLoss()", "gaussian"),
]


@pytest.mark.parametrize(("spec", "kind"), EXTRA_LOSSES, ids=[s for s, _ in EXTRA_LOSSES])
def test_extra_loss_matches_torch(spec, kind):
    def run(lib):
        rng = np.random.default_rng(6)

        def arr(*s):
            return lib.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True)

        loss_fn = eval("lib.nn." + spec)
        x = arr(4, 3)
        if kind == "ranking":
            other = arr(4, 3) if "Cosine" in spec else arr(4)
            target = lib.tensor(np.array([1.0, -1.0, 1.0, -1.0], np.float32))
            first = x if "Cosine" in spec else x[:, 0]
            loss = loss_fn(first, other, target)
            inputs = [x, other]
        elif kind == "triplet":
            p, n = arr(4, 3), arr(4, 3)
            loss = loss_fn(x, p, n)
            inputs = [x, p, n]
        elif kind == "gaussian":
            var = lib.tensor(rng.random((4, 3)).astype(np.float32) + 0.1)
            loss = loss_fn(x, lib.tensor(rng.standard_normal((4, 3)).astype(np.float32)), var)
            inputs = [x]
        else:
            targets = {
                "sign": lambda: lib.tensor(np.sign(rng.standard_normal((4, 3))).astype(np.float32)),
                "prob": lambda: lib.tensor((rng.random((4, 3)) > 0.5).astype(np.float32)),
                "classes": lambda: lib.tensor(rng.integers(0, 3, 4)),
                "multilabel": lambda: lib.tensor(np.array([[0, 2, -1], [1, -1, 0], [2, 1, 0],
                                                           [-1, 0, 0]])),
                "positive": lambda: lib.tensor(rng.integers(0, 5, (4, 3)).astype(np.float32)),
            }
            loss = loss_fn(x, targets[kind]())
            inputs = [x]
        loss.backward()
        return [loss, *(i.grad for i in inputs)]

    for a, e in zip(run(refimpl), run(torch), strict=True):
        np.testing.assert_allclose(a.detach().numpy(), e.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("train", [True, False])
def test_transformer_layers_match_torch(norm_first, train):
    torch.manual_seed(0)
    kwargs = {"dim_feedforward": 16, "dropout": 0.0, "norm_first": norm_first,
              "batch_first": True}
    t_enc = torch.nn.TransformerEncoderLayer(8, 2, activation="gelu", **kwargs)
    t_dec = torch.nn.TransformerDecoderLayer(8, 2, **kwargs)

    def run(lib):
        rng = np.random.default_rng(8)
        src = lib.tensor(rng.standard_normal((2, 5, 8)).astype(np.float32), requires_grad=True)
        tgt = lib.tensor(rng.standard_normal((2, 3, 8)).astype(np.float32), requires_grad=True)
        mask = lib.tensor(np.triu(np.ones((3, 3), bool), 1))
        pad = lib.tensor(np.array([[0, 0, 0, 0, 1], [0, 0, 0, 0, 0]], bool))
        if lib is torch:
            enc, dec = t_enc, t_dec
        else:
            enc = refimpl.nn.TransformerEncoderLayer(8, 2, activation="gelu", **kwargs)
            dec = refimpl.nn.TransformerDecoderLayer(8, 2, **kwargs)
            for mine, theirs in ((enc, t_enc), (dec, t_dec)):
                mine.load_state_dict({k: refimpl.tensor(v.detach().numpy())
                                      for k, v in theirs.state_dict().items()})
        enc.train(train)
        dec.train(train)
        memory = enc(src, src_key_padding_mask=pad)
        out = dec(tgt, memory, tgt_mask=mask, memory_key_padding_mask=pad)
        if not train:
            return [memory, out]
        out.sum().backward()
        return [memory, out, src.grad, tgt.grad, *(p.grad for p in enc.parameters())]

    assert repr(refimpl.nn.TransformerEncoderLayer(8, 2, **kwargs)) == repr(
        torch.nn.TransformerEncoderLayer(8, 2, **kwargs))
    for a, e in zip(run(refimpl), run(torch), strict=True):
        np.testing.assert_allclose(a.detach().numpy(), e.detach().numpy(), rtol=1e-4,
                                   atol=1e-5)


@pytest.mark.parametrize("mode", ["train", "eval", "inference"])
@pytest.mark.parametrize("batch_first", [True, False])
def test_transformer_stacks_match_torch(mode, batch_first):
    import warnings

    torch.manual_seed(0)
    kwargs = {"dim_feedforward": 16, "dropout": 0.0, "batch_first": batch_first}

    def build(lib):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            enc = lib.nn.TransformerEncoder(lib.nn.TransformerEncoderLayer(8, 2, **kwargs), 2,
                                            norm=lib.nn.LayerNorm(8))
            dec = lib.nn.TransformerDecoder(lib.nn.TransformerDecoderLayer(8, 2, **kwargs), 2)
        return enc, dec, [str(x.message) for x in w]

    t_enc, t_dec, t_warn = build(torch)
    r_enc, r_dec, r_warn = build(refimpl)
    assert r_warn == t_warn
    assert repr(r_enc) == repr(t_enc) and repr(r_dec) == repr(t_dec)
    for mine, theirs in ((r_enc, t_enc), (r_dec, t_dec)):
        mine.load_state_dict({k: refimpl.tensor(v.detach().numpy())
                              for k, v in theirs.state_dict().items()})

    def run(lib, enc, dec):
        rng = np.random.default_rng(9)
        shape_s, shape_t = ((2, 5, 8), (2, 3, 8)) if batch_first else ((5, 2, 8), (3, 2, 8))
        src = lib.tensor(rng.standard_normal(shape_s).astype(np.float32))
        tgt = lib.tensor(rng.standard_normal(shape_t).astype(np.float32))
        pad = lib.tensor(np.array([[0, 0, 0, 1, 1], [0, 0, 0, 0, 0]], bool))
        causal = lib.nn.Transformer.generate_square_subsequent_mask(3) if lib is torch else \
            lib.tensor(np.triu(np.full((3, 3), -np.inf, np.float32), 1))
        enc.train(mode == "train")
        dec.train(mode == "train")
        ctx = lib.no_grad() if mode == "inference" else lib.enable_grad()
        with ctx:
            memory = enc(src, src_key_padding_mask=pad)
            out = dec(tgt, memory, tgt_mask=causal, memory_key_padding_mask=pad)
        return [memory, out]

    for a, e in zip(run(refimpl, r_enc, r_dec), run(torch, t_enc, t_dec), strict=True):
        np.testing.assert_allclose(a.detach().numpy(), e.detach().numpy(), rtol=1e-4,
                                   atol=1e-5)


def test_full_transformer_matches_torch():
    import warnings

    torch.manual_seed(0)
    kwargs = {"d_model": 8, "nhead": 2, "num_encoder_layers": 2, "num_decoder_layers": 1,
              "dim_feedforward": 16, "dropout": 0.0}
    with warnings.catch_warnings(record=True) as tw:
        warnings.simplefilter("always")
        tm = torch.nn.Transformer(**kwargs)
    with warnings.catch_warnings(record=True) as rw:
        warnings.simplefilter("always")
        rm = refimpl.nn.Transformer(**kwargs)
    assert [str(w.message) for w in rw] == [str(w.message) for w in tw]
    assert [n for n, _ in rm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    rm.load_state_dict({k: refimpl.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})

    def run(lib, m):
        rng = np.random.default_rng(10)
        src = lib.tensor(rng.standard_normal((5, 2, 8)).astype(np.float32), requires_grad=True)
        tgt = lib.tensor(rng.standard_normal((4, 2, 8)).astype(np.float32))
        mask = (torch.nn.Transformer if lib is torch else refimpl.nn.Transformer) \
            .generate_square_subsequent_mask(4)
        out = m(src, tgt, tgt_mask=mask)
        out.sum().backward()
        return [mask, out, src.grad]

    for a, e in zip(run(refimpl, rm), run(torch, tm), strict=True):
        np.testing.assert_allclose(a.detach().numpy(), e.detach().numpy(), rtol=1e-4,
                                   atol=1e-5)
    with pytest.raises(RuntimeError, match="the feature number of src and tgt must be equal to "
                       "d_model"):
        rm(refimpl.ones(3, 2, 4), refimpl.ones(3, 2, 8))


def test_batch_norm_running_update_takes_the_one_pass_path(monkeypatch):
    # training batch norm on plain CPU buffers updates the running statistics inside the
    # fused op, in one pass over their numpy views (the ops it stands for are the
    # fallback); grad mode is on outside, as in a training step
    from refimpl.ops import nn_norm_kernel

    calls = []
    real = nn_norm_kernel.update_running_np
    monkeypatch.setattr(nn_norm_kernel, "update_running_np",
                        lambda *a: calls.append(a) or real(*a))
    bn = refimpl.nn.BatchNorm2d(3)
    x = refimpl.randn(4, 3, 5, 5, requires_grad=True)
    v0 = bn.running_mean._version
    bn(x).sum().backward()
    assert len(calls) == 1
    # torch's batch norm kernels leave the running statistics' versions alone
    assert bn.running_mean._version == v0 and bn.num_batches_tracked.item() == 1
