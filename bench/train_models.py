"""The two small models of issue 14's done-when, written once for torch and refimpl.

``make_cnn(lib)``: conv, batch norm, ReLU, max pooling, linear, cross-entropy, trained
with SGD and momentum; ``make_transformer(lib)``: one pre-norm transformer block (multi-head
attention, layer norm, GELU MLP) with a linear head, trained with AdamW. ``lib`` is the
``torch`` or ``refimpl`` module. ``train(...)`` runs steps on fixed seeded batches and
returns the losses; ``copy_weights`` loads torch's initial weights into a refimpl model
through ``load_state_dict``. The unit tests use the ``"test"`` sizes (a few seconds for
100 steps); ``bench_train.py`` also times the larger ``"bench"`` sizes, where the
arithmetic rather than the per-op overhead sets the step time.
"""

from __future__ import annotations

import numpy as np

CNN_CLASSES, TF_HEADS, TF_CLASSES = 10, 2, 5
SIZES = {
    "test": {"cnn_batch": 8, "image": 12, "width": 8, "tf_batch": 8, "seq": 6, "dim": 16},
    "bench": {"cnn_batch": 32, "image": 32, "width": 16, "tf_batch": 32, "seq": 32,
              "dim": 64},
}
TF_DIM = SIZES["test"]["dim"]


def make_cnn(lib, size: str = "test"):
    """conv(3->w) BN ReLU pool conv(w->2w) BN ReLU pool flatten linear(->10)."""
    nn = lib.nn
    w, side = SIZES[size]["width"], SIZES[size]["image"] // 4
    return nn.Sequential(
        nn.Conv2d(3, w, 3, padding=1), nn.BatchNorm2d(w), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(w, 2 * w, 3, padding=1), nn.BatchNorm2d(2 * w), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(2 * w * side * side, CNN_CLASSES))


def make_transformer(lib, size: str = "test"):
    """A pre-norm transformer block over (batch, seq, dim) and a mean-pooled linear head."""
    nn = lib.nn
    dim = SIZES[size]["dim"]

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(dim)
            self.attn = nn.MultiheadAttention(dim, TF_HEADS, batch_first=True)
            self.ln2 = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
            self.head = nn.Linear(dim, TF_CLASSES)

        def forward(self, x):
            h = self.ln1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            x = x + self.mlp(self.ln2(x))
            return self.head(x.mean(1))

    return Block()


def make_optimizer(lib, kind: str, model):
    """SGD with momentum for the CNN, AdamW for the transformer."""
    if kind == "cnn":
        return lib.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return lib.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)


def batches(kind: str, steps: int, size: str = "test",
            seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """``steps`` seeded (inputs, labels) batches, cycling through 4 distinct ones."""
    rng = np.random.default_rng(seed)
    sz = SIZES[size]
    if kind == "cnn":
        shape, classes = (sz["cnn_batch"], 3, sz["image"], sz["image"]), CNN_CLASSES
    else:
        shape, classes = (sz["tf_batch"], sz["seq"], sz["dim"]), TF_CLASSES
    data = [(rng.standard_normal(shape).astype(np.float32),
             rng.integers(0, classes, shape[0]).astype(np.int64)) for _ in range(4)]
    return [data[i % 4] for i in range(steps)]


def copy_weights(torch_model, ref_model, refimpl) -> None:
    """Load the torch model's state dict into the refimpl model."""
    sd = {k: refimpl.tensor(v.detach().cpu().numpy()) for k, v in
          torch_model.state_dict().items()}
    ref_model.load_state_dict(sd)


def train_step(lib, model, opt, x, y):
    """One step: zero_grad, forward, cross-entropy, backward, optimizer step; the loss."""
    opt.zero_grad()
    loss = lib.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def train(lib, kind: str, model, steps: int, device: str = "cpu") -> list[float]:
    """The losses of ``steps`` training steps on the seeded batches."""
    opt = make_optimizer(lib, kind, model)
    model.train()
    data = [(lib.tensor(x, device=device), lib.tensor(y, device=device))
            for x, y in batches(kind, min(steps, 4))]
    return [train_step(lib, model, opt, *data[i % len(data)]).item() for i in range(steps)]


def paired_models(kind: str, torch, refimpl, device: str = "cpu", size: str = "test"):
    """A torch model (CPU, seeded init) and a refimpl model with the same weights."""
    torch.manual_seed(0)
    make = make_cnn if kind == "cnn" else make_transformer
    tm = make(torch, size)
    rm = make(refimpl, size)
    copy_weights(tm, rm, refimpl)
    return tm, rm.to(device)
