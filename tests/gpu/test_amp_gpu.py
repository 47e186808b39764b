"""GradScaler's CUDA kernels against torch on the same GPU: the fused unscale (every float
dtype torch's kernel takes, contiguous and strided, with and without inf/NaN), the scale
update over long random flag sequences, their argument checks, and a 100-step training run
with injected infs that must skip the same steps and end on the same scale as torch's.
Skipped where there is no GPU or no CUDA build of torch."""

from __future__ import annotations

import numpy as np
import pytest

import refimpl as t

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(
    not (t.cuda.is_available() and torch.cuda.is_available()),
    reason="needs a CUDA device and a CUDA build of torch")


def grad(lib, arr: np.ndarray, dtype: str, layout: str):
    """``arr`` as a CUDA tensor of ``lib``: contiguous, transposed or a column slice."""
    dt = getattr(lib, dtype)
    if layout == "transposed":
        return lib.tensor(arr.T.tolist(), dtype=dt, device="cuda").t()
    if layout == "sliced":
        wide = lib.zeros((arr.shape[0], arr.shape[1] + 4), dtype=dt, device="cuda")
        wide[:, 2:-2] = lib.tensor(arr.tolist(), dtype=dt, device="cuda")
        return wide[:, 2:-2]
    return lib.tensor(arr.tolist(), dtype=dt, device="cuda")


def host(x) -> np.ndarray:
    return np.asarray(x.double().cpu().tolist(), dtype=np.float64)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
@pytest.mark.parametrize("inject", [None, "inf", "nan"])
def test_unscale_kernel_matches_torch(dtype, layout, inject):
    rng = np.random.default_rng(16)
    arrays = [(rng.integers(-500, 500, size=(33, 70)) * 4.0) for _ in range(3)]
    if inject:
        arrays[1][17, 3] = np.inf if inject == "inf" else np.nan
    results = []
    for lib in (t, torch):
        grads = [grad(lib, a, dtype, layout) for a in arrays]
        found = lib.zeros((), device="cuda")
        inv = lib.full((), 1.0 / 3.0, device="cuda")
        lib._amp_foreach_non_finite_check_and_unscale_(grads, found, inv)
        results.append(([host(g) for g in grads], found.item()))
    (ours, our_found), (theirs, their_found) = results
    assert our_found == their_found == (1.0 if inject else 0.0)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)


def test_unscale_kernel_mixed_dtypes_and_large_tensor():
    rng = np.random.default_rng(17)
    big = rng.standard_normal(1 << 20) * 1000.0
    results = []
    for lib in (t, torch):
        grads = [lib.tensor(big.tolist(), device="cuda"),
                 lib.tensor(big[:4096].tolist(), dtype=lib.float16, device="cuda")]
        found = lib.zeros((), device="cuda")
        lib._amp_foreach_non_finite_check_and_unscale_(grads, found, lib.full((), 0.001,
                                                                             device="cuda"))
        results.append(([host(g) for g in grads], found.item()))
    assert results[0][1] == results[1][1]
    for a, b in zip(results[0][0], results[1][0]):
        np.testing.assert_array_equal(a, b)


def test_update_kernel_matches_torch():
    rng = np.random.default_rng(18)
    flags = rng.choice([0.0, 0.0, 0.0, 1.0, np.nan], size=150)
    for growth, backoff, interval in ((2.0, 0.5, 3), (1.3, 0.7, 1), (65536.0, 0.125, 2)):
        seqs = []
        for lib in (t, torch):
            scale = lib.full((), 3.7, device="cuda")
            tracker = lib.zeros((), dtype=lib.int32, device="cuda")
            found = lib.zeros((), device="cuda")
            seq = []
            for f in flags:
                found.fill_(float(f))
                out = lib._amp_update_scale_(scale, tracker, found, growth, backoff, interval)
                assert out is scale
                seq.append((scale.item(), tracker.item()))
            seqs.append(seq)
        assert seqs[0] == seqs[1]


def _argument_error(lib, case: str) -> tuple[str, str]:
    """The exception type and first message line of one bad call on ``lib``."""
    g = [lib.ones(3, device="cuda")]
    fi, inv = lib.zeros((), device="cuda"), lib.ones((), device="cuda")
    gt = lib.zeros((), dtype=lib.int32, device="cuda")
    with pytest.raises((RuntimeError, NotImplementedError)) as info:
        if case == "found_inf_cpu":
            lib._amp_foreach_non_finite_check_and_unscale_(g, lib.zeros(()), inv)
        elif case == "inv_scale_cpu":
            lib._amp_foreach_non_finite_check_and_unscale_(g, fi, lib.ones(()))
        elif case == "scale_cpu":
            lib._amp_update_scale_(lib.ones(()), gt, fi, 2.0, 0.5, 1)
        else:
            lib._amp_foreach_non_finite_check_and_unscale_(
                [lib.ones(3, dtype=lib.bfloat16, device="cuda")], fi, inv)
    return type(info.value).__name__, str(info.value).split("\n")[0]


@pytest.mark.parametrize("case", ["found_inf_cpu", "inv_scale_cpu", "scale_cpu", "bf16"])
def test_cuda_argument_errors_match_torch(case):
    assert _argument_error(t, case) == _argument_error(torch, case)


def test_hundred_steps_with_injected_infs_match_torch():
    rng = np.random.default_rng(19)
    x0, y0, w0 = (rng.standard_normal(s).astype(np.float32) for s in ((64, 16), (64, 8), (16, 8)))
    runs = []
    for lib in (t, torch):
        x, y = lib.tensor(x0.tolist(), device="cuda"), lib.tensor(y0.tolist(), device="cuda")
        w = lib.tensor(w0.tolist(), device="cuda", requires_grad=True)
        opt = _SGD(lib, [w])
        scaler = lib.amp.GradScaler("cuda", init_scale=2.0**12, growth_interval=5)
        scales = []
        for i in range(100):
            w.grad = None
            scaler.scale(((x @ w - y) ** 2).mean()).backward()
            if i % 9 == 4 or i in (50, 51):
                with lib.no_grad():
                    w.grad[i % 16, i % 8] = float("inf") if i % 2 else float("nan")
            opt.iteration = i
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
        runs.append((opt.taken, scales, host(w.detach())))
    assert runs[0][0] == runs[1][0] and runs[0][1] == runs[1][1]
    injected = [i for i in range(100) if i % 9 == 4 or i in (50, 51)]
    assert runs[0][0] == [i for i in range(100) if i not in injected]
    np.testing.assert_allclose(runs[0][2], runs[1][2], rtol=1e-4, atol=1e-5)


class _SGD:
    """Plain SGD following torch's optimizer protocol; records the steps it took."""

    def __init__(self, lib, params) -> None:
        self.lib = lib
        self.param_groups = [{"params": list(params), "lr": 0.01}]
        self.state: dict = {}
        self.taken: list = []
        self.iteration = -1

    def step(self) -> None:
        self.taken.append(self.iteration)
        with self.lib.no_grad():
            for p in self.param_groups[0]["params"]:
                p.sub_(p.grad * self.param_groups[0]["lr"])
