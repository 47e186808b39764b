"""refimpl.optim against torch: optimizer trajectories over many settings and the learning
rates of every scheduler, step for step."""

from __future__ import annotations

import numpy as np
import pytest

import refimpl
import refimpl.optim

torch = pytest.importorskip("torch")
STEPS = 12

OPTIMIZERS = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    ("SGD", {"lr": 0.1, "momentum": 0.5, "dampening": 0.5, "maximize": True}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "foreach": True}),
    ("Adam", {"lr": 0.05}),
    ("Adam", {"lr": 0.05, "amsgrad": True, "weight_decay": 0.1, "maximize": True}),
    ("Adam", {"lr": 0.05, "betas": (0.8, 0.9), "eps": 1e-6, "fused": True}),
    ("AdamW", {"lr": 0.05}),
    ("AdamW", {"lr": 0.05, "amsgrad": True, "weight_decay": 0.5, "foreach": True}),
    ("RMSprop", {"lr": 0.01}),
    ("RMSprop", {"lr": 0.01, "centered": True, "momentum": 0.9, "weight_decay": 0.1}),
    ("Adagrad", {"lr": 0.1}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.05, "initial_accumulator_value": 0.1,
                 "weight_decay": 0.01, "maximize": True}),
    ("Adadelta", {"lr": 1.0}),
    ("Adadelta", {"lr": 0.5, "rho": 0.8, "weight_decay": 0.1, "maximize": True}),
    ("Adamax", {"lr": 0.05}),
    ("Adamax", {"lr": 0.05, "betas": (0.8, 0.9), "weight_decay": 0.1}),
    ("NAdam", {"lr": 0.05}),
    ("NAdam", {"lr": 0.05, "weight_decay": 0.1, "decoupled_weight_decay": True,
               "momentum_decay": 0.01}),
    ("RAdam", {"lr": 0.05}),
    ("RAdam", {"lr": 0.05, "betas": (0.9, 0.9), "weight_decay": 0.1, "maximize": True}),
    ("Rprop", {"lr": 0.05}),
    ("Rprop", {"lr": 0.05, "etas": (0.3, 1.5), "step_sizes": (1e-3, 0.1), "maximize": True}),
]


def _trajectory(lib, name: str, kwargs: dict, dtype: str) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    init = [rng.standard_normal(s) for s in [(3, 4), (4,), (2, 2, 2)]]
    coef = [rng.random(s) for s in [(3, 4), (4,), (2, 2, 2)]]
    dt = getattr(lib, dtype)
    params = [lib.nn.Parameter(lib.tensor(a, dtype=dt)) for a in init]
    coefs = [lib.tensor(c, dtype=dt) for c in coef]
    opt = getattr(lib.optim, name)([{"params": params[:2]},
                                    {"params": params[2:], "lr": 0.02}], **kwargs)
    out = []
    for i in range(STEPS):
        opt.zero_grad()
        loss = sum(((c * p - 0.1 * i) ** 2).sum() for c, p in zip(coefs, params, strict=True))
        loss.backward()
        opt.step()
        out.append(np.concatenate([p.detach().numpy().ravel() for p in params]))
    state = opt.state_dict()["state"]
    out.extend(np.asarray(v.numpy() if hasattr(v, "numpy") else v, dtype=np.float64).ravel()
               for s in state.values() for v in s.values())
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("name", "kwargs"), OPTIMIZERS, ids=lambda v: str(v))
def test_optimizer_matches_torch(name, kwargs, dtype):
    expected = _trajectory(torch, name, kwargs, dtype)
    actual = _trajectory(refimpl, name, kwargs, dtype)
    rtol = 1e-5 if dtype == "float32" else 1e-12
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected, strict=True):
        np.testing.assert_allclose(a, e, rtol=rtol, atol=rtol)


SCHEDULERS = [
    ("StepLR", {"step_size": 3, "gamma": 0.5}),
    ("MultiStepLR", {"milestones": [2, 4, 4, 9], "gamma": 0.3}),
    ("ExponentialLR", {"gamma": 0.8}),
    ("CosineAnnealingLR", {"T_max": 4, "eta_min": 0.001}),
    ("LinearLR", {"start_factor": 0.1, "end_factor": 0.9, "total_iters": 5}),
    ("ConstantLR", {"factor": 0.2, "total_iters": 3}),
    ("LambdaLR", {"lr_lambda": [lambda e: 0.9 ** e, lambda e: 1 / (1 + e)]}),
    ("MultiplicativeLR", {"lr_lambda": lambda e: 0.95}),
    ("PolynomialLR", {"total_iters": 8, "power": 2.0}),
    ("OneCycleLR", {"max_lr": [1.0, 0.5], "total_steps": 20}),
    ("CyclicLR", {"base_lr": 0.01, "max_lr": [0.1, 0.2], "step_size_up": 3,
                  "step_size_down": 2, "mode": "triangular2"}),
    ("CyclicLR", {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 4, "mode": "exp_range",
                  "gamma": 0.9}),
    ("CosineAnnealingWarmRestarts", {"T_0": 3, "T_mult": 2, "eta_min": 0.01}),
    ("OneCycleLR", {"max_lr": 1.0, "total_steps": 20, "three_phase": True,
                    "anneal_strategy": "linear"}),
]


@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
@pytest.mark.parametrize(("name", "kwargs"), SCHEDULERS, ids=lambda v: str(v)[:40])
def test_scheduler_matches_torch(name, kwargs, optimizer):
    def run(lib):
        params = [lib.nn.Parameter(lib.ones(1)), lib.nn.Parameter(lib.ones(1))]
        extra = {"momentum": 0.9} if optimizer == "SGD" else {}
        opt = getattr(lib.optim, optimizer)([{"params": params[:1]},
                                             {"params": params[1:], "lr": 0.3}], lr=0.1,
                                            **extra)
        sched = getattr(lib.optim.lr_scheduler, name)(opt, **kwargs)
        seen = []
        for _ in range(19):
            opt.step()
            sched.step()
            seen.append([*sched.get_last_lr(),
                         *(g.get("momentum", g.get("betas", (0,))[0]) for g in opt.param_groups)])
        return np.array(seen)

    np.testing.assert_allclose(run(refimpl), run(torch), rtol=1e-14, atol=0)


def test_reduce_lr_on_plateau_matches_torch():
    metrics = [1.0, 0.9, 0.95, 0.95, 0.95, 0.8, 0.8, 0.8, 0.8, 0.8, 0.5, 0.6, 0.6, 0.6]

    def run(lib, **kwargs):
        opt = lib.optim.SGD([lib.nn.Parameter(lib.ones(1))], lr=1.0)
        sched = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
        out = []
        for m in metrics:
            sched.step(m)
            out.append(sched.get_last_lr()[0])
        return out

    for kwargs in [{"patience": 1}, {"mode": "max", "patience": 0, "threshold_mode": "abs"},
                   {"patience": 1, "cooldown": 2, "min_lr": 0.05, "factor": 0.5}]:
        assert run(refimpl, **kwargs) == run(torch, **kwargs)


def test_sequential_and_chained_match_torch():
    def run(lib, kind):
        opt = lib.optim.SGD([lib.nn.Parameter(lib.ones(1))], lr=1.0)
        sch = lib.optim.lr_scheduler
        if kind == "sequential":
            sched = sch.SequentialLR(opt, [sch.LinearLR(opt, 0.1, total_iters=3),
                                           sch.ExponentialLR(opt, 0.9),
                                           sch.StepLR(opt, 2, 0.5)], milestones=[3, 7])
        else:
            sched = sch.ChainedScheduler([sch.ConstantLR(opt, 0.5, total_iters=4),
                                          sch.ExponentialLR(opt, 0.9)])
        out = [sched.get_last_lr()[0]]
        for _ in range(12):
            opt.step()
            sched.step()
            out.append(sched.get_last_lr()[0])
        state = sched.state_dict()
        return out, sorted(state), len(state["_schedulers"])

    for kind in ("sequential", "chained"):
        mine, theirs = run(refimpl, kind), run(torch, kind)
        np.testing.assert_allclose(mine[0], theirs[0], rtol=1e-14)
        assert mine[1:] == theirs[1:]


def test_step_with_epoch_uses_closed_form():
    def run(lib):
        opt = lib.optim.SGD([lib.nn.Parameter(lib.ones(1))], lr=1.0)
        sched = lib.optim.lr_scheduler.PolynomialLR(opt, total_iters=10, power=0.5)
        with pytest.warns(UserWarning, match="The epoch parameter in `scheduler.step\\(\\)`"):
            sched.step(6)
        return sched.get_last_lr()

    np.testing.assert_allclose(run(refimpl), run(torch), rtol=1e-14)
