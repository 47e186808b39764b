"""The two small models of issue 14's done-when, written once for torch and refimpl.

``make_cnn(lib)``: conv, batch norm, ReLU, max pooling, linear, cross-entropy, trained
with SGD and momentum; ``make_transformer(lib)``: one pre-norm transformer block (multi-head
attention, layer norm, GELU MLP) with a linear head, trained with AdamW. ``lib`` is the
``torch`` or ``refimpl`` module. ``train(...)`` runs steps on fixed seeded batches and
returns the losses; ``copy_weights`` loads torch's initial weights into a refimpl model
through ``load_state_dict``. The unit tests and ``bench_train.py`` both use them.
"""

from __future__ import annotations

import numpy as np

CNN_BATCH, CNN_SHAPE, CNN_CLASSES = 8, (3, 12, 12), 10
TF_BATCH, TF_SEQ, TF_DIM, TF_HEADS, TF_CLASSES = 8, 6, 16, 2, 5


def make_cnn(lib):
    """conv(3->8) BN ReLU pool conv(8->16) BN ReLU pool flatten linear(144->10)."""
    nn = lib.nn
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 3 * 3, CNN_CLASSES))


def make_transformer(lib):
    """A pre-norm transformer block over (batch, seq, dim) and a mean-pooled linear head."""
    nn = lib.nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(TF_DIM)
            self.attn = nn.MultiheadAttention(TF_DIM, TF_HEADS, batch_first=True)
            self.ln2 = nn.LayerNorm(TF_DIM)
            self.mlp = nn.Sequential(nn.Linear(TF_DIM, 4 * TF_DIM), nn.GELU(),
                                     nn.Linear(4 * TF_DIM, TF_DIM))
            self.head = nn.Linear(TF_DIM, TF_CLASSES)

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


def batches(kind: str, steps: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """``steps`` seeded (inputs, labels) batches, cycling through 4 distinct ones."""
    rng = np.random.default_rng(seed)
    if kind == "cnn":
        shape, classes = (CNN_BATCH, *CNN_SHAPE), CNN_CLASSES
    else:
        shape, classes = (TF_BATCH, TF_SEQ, TF_DIM), TF_CLASSES
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


def paired_models(kind: str, torch, refimpl, device: str = "cpu"):
    """A torch model (CPU, seeded init) and a refimpl model with the same weights."""
    torch.manual_seed(0)
    make = make_cnn if kind == "cnn" else make_transformer
    tm = make(torch)
    rm = make(refimpl)
    copy_weights(tm, rm, refimpl)
    return tm, rm.to(device)
