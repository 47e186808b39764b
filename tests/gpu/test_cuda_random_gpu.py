"""Random numbers drawn on the GPU from the CUDA generators (spec CUDADEV-700..703).

refimpl's numbers are its own (Philox4x32-10 in its own layout, not curand's), so the
tests check reproducibility, the generator state's offsets, the distributions' moments
and ranges, agreement with the CPU generator from the same state, and the structure of
masks, permutations and multinomial draws. Skipped where no GPU is present.
"""

from __future__ import annotations

import numpy as np
import pytest

import refimpl as t

pytestmark = pytest.mark.skipif(not t.cuda.is_available(), reason="needs a CUDA device")

N = 1 << 20


def host(x) -> np.ndarray:
    """A refimpl tensor's values on the host, as float64 (or complex128) numpy."""
    x = x.cpu()
    wide = t.complex128 if x.dtype.is_complex else (
        t.float64 if x.dtype.is_floating_point else t.int64)
    return np.asarray(x.to(wide).tolist())


def offset() -> int:
    return int.from_bytes(bytes(t.cuda.get_rng_state().tolist())[8:], "little")


DRAWS = {
    "rand": lambda: t.rand(1000, device="cuda"),
    "rand64": lambda: t.rand(999, dtype=t.float64, device="cuda"),
    "randn": lambda: t.randn(33, 7, device="cuda"),
    "randn_half": lambda: t.randn(100, dtype=t.float16, device="cuda"),
    "randint": lambda: t.randint(-5, 17, (501,), device="cuda"),
    "bernoulli": lambda: t.bernoulli(t.full((300,), 0.3, device="cuda")),
    "randperm": lambda: t.randperm(1000, device="cuda"),
    "multinomial": lambda: t.multinomial(t.ones(4, 50, device="cuda"), 20),
    "normal": lambda: t.normal(3.0, 2.0, (100,), device="cuda"),
    "rand_like": lambda: t.rand_like(t.empty(3, 5, device="cuda")),
}


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_manual_seed_reproduces_every_draw(name):
    draw = DRAWS[name]
    t.manual_seed(1234)
    first = host(draw())
    again = host(draw())
    t.manual_seed(1234)
    np.testing.assert_array_equal(host(draw()), first)
    np.testing.assert_array_equal(host(draw()), again)
    assert not np.array_equal(first, again) or name == "multinomial"


def test_get_set_rng_state_round_trip_and_offsets():
    t.cuda.manual_seed(99)
    assert offset() == 0
    state = t.cuda.get_rng_state()
    assert state.dtype is t.uint8 and state.device.type == "cpu" and state.numel() == 16
    a = host(t.rand(1000, device="cuda"))
    # 1000 float32 uniforms are 250 Philox blocks: reserved in a multiple of 4
    assert offset() == 252
    b = host(t.randn(10, device="cuda"))  # 5 blocks -> 8
    assert offset() == 260
    t.cuda.set_rng_state(state)
    np.testing.assert_array_equal(host(t.rand(1000, device="cuda")), a)
    np.testing.assert_array_equal(host(t.randn(10, device="cuda")), b)
    # the default CPU generator is a separate stream: drawing on it moves no CUDA offset
    before = offset()
    t.rand(100)
    assert offset() == before


def test_cuda_generator_objects_and_cpu_generator_rejected():
    g = t.Generator(device="cuda")
    g.manual_seed(5)
    a = host(t.rand(64, device="cuda", generator=g))
    g.manual_seed(5)
    np.testing.assert_array_equal(host(t.rand(64, device="cuda", generator=g)), a)
    with pytest.raises(RuntimeError, match="Expected a 'cuda' device type for generator but "
                                           "found 'cpu'"):
        t.rand(3, device="cuda", generator=t.Generator())


def test_same_state_same_values_as_the_cpu_generator():
    t.manual_seed(2024)
    cpu = t.default_generator
    t.cuda.set_rng_state(cpu.get_state())
    np.testing.assert_array_equal(host(t.rand(4097, device="cuda")), host(t.rand(4097)))
    t.cuda.set_rng_state(cpu.get_state())
    np.testing.assert_array_equal(host(t.rand(513, dtype=t.float64, device="cuda")),
                                  host(t.rand(513, dtype=t.float64)))
    t.cuda.set_rng_state(cpu.get_state())
    np.testing.assert_array_equal(host(t.randint(0, 1000, (777,), device="cuda")),
                                  host(t.randint(0, 1000, (777,))))
    t.cuda.set_rng_state(cpu.get_state())
    np.testing.assert_allclose(host(t.randn(1001, dtype=t.float64, device="cuda")),
                               host(t.randn(1001, dtype=t.float64)), rtol=1e-12, atol=1e-12)
    t.cuda.set_rng_state(cpu.get_state())
    np.testing.assert_array_equal(host(t.randperm(3000, device="cuda")),
                                  host(t.randperm(3000)))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_uniform_moments_and_range(dtype):
    t.manual_seed(0)
    x = host(t.rand(N, dtype=getattr(t, dtype), device="cuda"))
    assert x.min() >= 0.0 and x.max() < 1.0
    assert abs(x.mean() - 0.5) < 3e-3 and abs(x.var() - 1 / 12) < 3e-3
    y = t.empty(N, dtype=getattr(t, dtype), device="cuda").uniform_(-3, 5)
    y = host(y)
    assert y.min() >= -3 and y.max() < 5 and abs(y.mean() - 1) < 0.03


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_normal_moments(dtype):
    t.manual_seed(1)
    z = host(t.randn(N, dtype=getattr(t, dtype), device="cuda"))
    assert abs(z.mean()) < 5e-3 and abs(z.std() - 1) < 5e-3
    assert abs(((z - z.mean()) ** 3).mean()) < 0.02  # symmetric
    assert abs(((z - z.mean()) ** 4).mean() / z.var() ** 2 - 3) < 0.05  # kurtosis 3
    w = host(t.empty(N, dtype=getattr(t, dtype), device="cuda").normal_(2.0, 0.5))
    assert abs(w.mean() - 2) < 5e-3 and abs(w.std() - 0.5) < 5e-3
    v = host(t.normal(-1.0, 3.0, (N,), dtype=getattr(t, dtype), device="cuda"))
    assert abs(v.mean() + 1) < 0.02 and abs(v.std() - 3) < 0.02


def test_complex_draws():
    t.manual_seed(2)
    z = host(t.randn(N, dtype=t.complex64, device="cuda"))
    assert abs((np.abs(z) ** 2).mean() - 1) < 0.01 and abs(z.real.var() - 0.5) < 0.01
    u = host(t.rand(N, dtype=t.complex128, device="cuda"))
    for part in (u.real, u.imag):
        assert part.min() >= 0 and part.max() < 1 and abs(part.mean() - 0.5) < 3e-3


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "uint8"])
def test_integers_range_and_uniformity(dtype):
    t.manual_seed(3)
    x = host(t.randint(3, 13, (N,), dtype=getattr(t, dtype), device="cuda")).astype(int)
    assert x.min() == 3 and x.max() == 12
    counts = np.bincount(x - 3, minlength=10)
    expected = N / 10
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 40  # 9 degrees of freedom: p < 1e-5 beyond this
    r = host(t.zeros(N, dtype=getattr(t, dtype), device="cuda").random_(0, 7))
    assert r.min() == 0 and r.max() == 6
    like = t.randint_like(t.empty(100, device="cuda"), 2, 4)
    assert like.dtype is t.float32 and set(host(like).tolist()) <= {2.0, 3.0}


def test_bernoulli_masks():
    t.manual_seed(4)
    b = host(t.bernoulli(t.full((N,), 0.25, device="cuda")))
    assert set(np.unique(b).tolist()) <= {0.0, 1.0} and abs(b.mean() - 0.25) < 3e-3
    p = t.tensor([0.0, 1.0] * 512, device="cuda")
    np.testing.assert_array_equal(host(t.bernoulli(p)), host(p))
    x = t.empty(1024, device="cuda").bernoulli_(p)
    np.testing.assert_array_equal(host(x), host(p))
    y = host(t.empty(N, dtype=t.float16, device="cuda").bernoulli_(0.7))
    assert abs(y.mean() - 0.7) < 3e-3
    m = host(t.empty(N, dtype=t.bool, device="cuda").bernoulli_(0.5))
    assert abs(m.mean() - 0.5) < 3e-3
    with pytest.raises(RuntimeError, match=r"bernoulli_ expects p to be in \[0, 1\]"):
        t.empty(3, device="cuda").bernoulli_(1.5)


def test_exponential():
    t.manual_seed(5)
    x = host(t.empty(N, device="cuda").exponential_(4.0))
    assert x.min() >= 0 and abs(x.mean() - 0.25) < 2e-3 and abs(x.std() - 0.25) < 3e-3


def test_inplace_draw_into_a_strided_view_touches_only_the_view():
    x = t.zeros(64, 64, device="cuda")
    x[:, ::2].uniform_(1, 2)
    h = host(x)
    assert (h[:, 1::2] == 0).all() and (h[:, ::2] >= 1).all() and (h[:, ::2] < 2).all()


@pytest.mark.parametrize("n", [0, 1, 2, 1000, (1 << 16) + 3])
def test_randperm_is_a_permutation(n):
    p = host(t.randperm(n, device="cuda")).astype(int)
    assert sorted(p.tolist()) == list(range(n))
    if n >= 1000:
        assert (p != np.arange(n)).mean() > 0.99
    q = t.randperm(300, dtype=t.int32, device="cuda")
    assert q.dtype is t.int32 and sorted(host(q).astype(int).tolist()) == list(range(300))


def test_multinomial_with_and_without_replacement():
    t.manual_seed(6)
    probs = t.tensor([0.1, 0.2, 0.0, 0.7], device="cuda")
    draws = host(t.multinomial(probs, 200000, replacement=True)).astype(int)
    freq = np.bincount(draws, minlength=4) / draws.size
    np.testing.assert_allclose(freq, [0.1, 0.2, 0.0, 0.7], atol=5e-3)
    rows = t.rand(64, 30, device="cuda")
    picked = host(t.multinomial(rows, 30)).astype(int)
    assert picked.shape == (64, 30)
    assert all(sorted(r.tolist()) == list(range(30)) for r in picked)
    # without replacement, heavy categories come first far more often
    w = t.tensor([[1.0, 100.0, 1.0, 1.0]] * 2000, device="cuda")
    first = host(t.multinomial(w, 2))[:, 0]
    assert (first == 1).mean() > 0.9
    sparse = host(t.multinomial(t.tensor([0.0, 3.0, 0.0, 1.0], device="cuda"), 2))
    assert sorted(sparse.tolist()) == [1.0, 3.0]
    with pytest.raises(RuntimeError, match="probability tensor contains either `inf`, `nan` "
                                           "or element < 0"):
        t.multinomial(t.tensor([1.0, float("nan")], device="cuda"), 1)
    with pytest.raises(RuntimeError, match=r"invalid multinomial distribution \(sum of "
                                           r"probabilities <= 0\)"):
        t.multinomial(t.zeros(3, device="cuda"), 1)
    with pytest.raises(RuntimeError, match="cannot sample n_sample > prob_dist.size"):
        t.multinomial(probs, 5)
