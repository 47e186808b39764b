"""Random factories and in-place samplers, drawn from refimpl's Philox generator.

Values come from ``refimpl._random`` (counter-based Philox4x32-10); torch draws
different numbers, so cases compare distributions and shapes, never values.
"""

from __future__ import annotations

import numpy as np

from refimpl import _dtype as D
from refimpl import _random as R
from refimpl._tensor import Tensor
from refimpl.ops.factories import _finish, _shape_args, empty


def _gen(generator) -> R.Generator:
    return generator if generator is not None else R.default_generator


def _floating(dtype, name: str) -> D.dtype:
    dt = D.dtype_from_any(dtype) if dtype is not None else D.get_default_dtype()
    if not (dt.is_floating_point or dt.is_complex):
        raise RuntimeError(f'"{name}" not implemented for \'{D.type_name(dt)}\'')
    return dt


def _fill_from(t: Tensor, values: np.ndarray) -> Tensor:
    """Write host-drawn values into ``t`` (any device) and bump its version."""
    src = Tensor._from_array(values.reshape(t.shape).astype(t.dtype.np), t.dtype)
    if t.device.type == "cpu":
        np.copyto(t._np, src._np)
        t._version_counter.bump()
    else:
        t.copy_(src)
    return t


def _uniform_values(n: int, dt: D.dtype, gen: R.Generator) -> np.ndarray:
    if dt.is_complex:
        return (gen.uniform(2 * n, dt.to_real() is D.float64).reshape(n, 2)
                @ np.array([1, 1j]))
    return gen.uniform(n, dt is D.float64)


def _normal_values(n: int, dt: D.dtype, gen: R.Generator) -> np.ndarray:
    if dt.is_complex:
        z = gen.normal(2 * n, True).reshape(n, 2) * np.sqrt(0.5)
        return z @ np.array([1, 1j])
    return gen.normal(n, dt is D.float64)


def _sample(size, dt: D.dtype, device, values, requires_grad: bool, out) -> Tensor:
    """A fresh tensor (or ``out``) of ``size`` filled by ``values(n)`` (a host draw)."""
    shape = _shape_args(size)
    if out is not None:
        out.resize_(shape)
        return _fill_from(out, values(out.numel()))
    t = empty(*shape, dtype=dt, device=device)
    if t._storage.device.type != "meta":  # meta and fake tensors have no data to draw
        _fill_from(t, values(t.numel()))
    t._version_counter.version = 0  # a fresh tensor starts at version 0
    return t.requires_grad_(True) if requires_grad else t


def rand(*size, generator=None, dtype=None, device=None, requires_grad: bool = False,
         out=None) -> Tensor:
    """Uniform values in [0, 1)."""
    dt = _floating(dtype if out is None else out.dtype, "check_uniform_bounds")
    return _sample(size, dt, device, lambda n: _uniform_values(n, dt, _gen(generator)),
                   requires_grad, out)


def randn(*size, generator=None, dtype=None, device=None, requires_grad: bool = False,
          out=None) -> Tensor:
    """Standard normal values."""
    dt = _floating(dtype if out is None else out.dtype, "normal_kernel_cpu")
    return _sample(size, dt, device, lambda n: _normal_values(n, dt, _gen(generator)),
                   requires_grad, out)


def randint(*args, generator=None, dtype=None, device=None, requires_grad: bool = False,
            size=None) -> Tensor:
    """Integers uniform in [low, high): ``randint(high, size)`` or ``randint(low, high, size)``."""
    if size is not None:
        args = (*args, size)
    if len(args) == 2:
        low, (high, shape) = 0, args
    elif len(args) == 3:
        low, high, shape = args
    else:
        raise TypeError("randint() expects (high, size) or (low, high, size)")
    if low >= high:
        raise RuntimeError(
            f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}"
        )
    dt = D.dtype_from_any(dtype) if dtype is not None else D.int64
    return _sample((shape,), dt, device,
                   lambda n: _gen(generator).integers(n, int(low), int(high)),
                   requires_grad, None)


def randperm(n: int, *, generator=None, dtype=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """A random permutation of 0..n-1."""
    if n < 0:
        raise RuntimeError(f"n must be non-negative, got{n}")
    keys = _gen(generator).integers(n, 0, 1 << 62)
    perm = np.argsort(keys, kind="stable")
    dt = D.dtype_from_any(dtype) if dtype is not None else D.int64
    return _finish(Tensor._from_array(perm.astype(dt.np), dt), device, requires_grad)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad: bool = False, out=None) -> Tensor:
    """Normal values with the given mean and std (scalars or tensors, broadcast)."""
    for s in (std,):
        if not isinstance(s, Tensor) and s < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {s}")
    if isinstance(std, Tensor) and bool((std < 0).any()):
        raise RuntimeError("normal expects all elements of std >= 0.0")
    if size is None:
        shapes = [x.shape for x in (mean, std) if isinstance(x, Tensor)]
        from refimpl.ops._helpers import broadcast_shapes

        size = broadcast_shapes(*shapes) if shapes else ()
        like = next(x for x in (mean, std) if isinstance(x, Tensor)) if shapes else None
        dtype = dtype or (like.dtype if like is not None else None)
        device = device or (like.device if like is not None else None)
    z = randn(*_shape_args((size,)), generator=generator, dtype=dtype, device=device)
    out_t = z * std + mean
    return out_t.requires_grad_(True) if requires_grad else out_t


def bernoulli(input: Tensor, p=None, *, generator=None, out=None) -> Tensor:
    """1 with probability ``input`` (or ``p``), else 0, in input's dtype."""
    probs = input._np if p is None else np.full(input.shape, p)
    probs = np.asarray(probs, dtype=np.float64)
    if ((probs < 0) | (probs > 1)).any():
        raise RuntimeError(
            "Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error "
            "message be improved?  If so, please report an enhancement request to PyTorch.)"
        )
    u = _gen(generator).uniform(probs.size, True).reshape(probs.shape)
    return Tensor._from_array((u < probs).astype(input.dtype.np), input.dtype)


def uniform_(self: Tensor, from_: float = 0.0, to: float = 1.0, *, generator=None) -> Tensor:
    """Fill in place with uniform values in [from_, to)."""
    u = _uniform_values(self.numel(), self.dtype, _gen(generator))
    return _fill_from(self, from_ + u * (to - from_))


def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
    """Fill in place with normal values."""
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    return _fill_from(self, mean + std * _normal_values(self.numel(), self.dtype,
                                                        _gen(generator)))


def random_(self: Tensor, from_: int = 0, to: int | None = None, *, generator=None) -> Tensor:
    """Fill in place with integers in [from_, to) (to defaults to the dtype's range)."""
    if to is None:
        to = 2 ** 24 + 1 if self.dtype is D.float32 else 2 ** 53 + 1 \
            if self.dtype is D.float64 else int(np.iinfo(self.dtype.np).max) + 1 \
            if self.dtype.category == 1 else 2
    return _fill_from(self, _gen(generator).integers(self.numel(), int(from_), int(to)))


def bernoulli_(self: Tensor, p=0.5, *, generator=None) -> Tensor:
    """Fill in place with 0/1 draws of probability ``p``."""
    probs = p._np if isinstance(p, Tensor) else p
    u = _gen(generator).uniform(self.numel(), True).reshape(self.shape)
    return _fill_from(self, (u < probs).astype(np.float64))


def rand_like(input: Tensor, *, dtype=None, device=None, requires_grad=False, **_) -> Tensor:
    """``rand`` shaped like ``input``."""
    return rand(input.shape, dtype=dtype or input.dtype, device=device or input.device,
                requires_grad=requires_grad)


def randn_like(input: Tensor, *, dtype=None, device=None, requires_grad=False, **_) -> Tensor:
    """``randn`` shaped like ``input``."""
    return randn(input.shape, dtype=dtype or input.dtype, device=device or input.device,
                 requires_grad=requires_grad)


def randint_like(input: Tensor, low, high=None, *, dtype=None, device=None, **_) -> Tensor:
    """``randint`` shaped like ``input``."""
    if high is None:
        low, high = 0, low
    return randint(low, high, input.shape, dtype=dtype or input.dtype,
                   device=device or input.device)


Generator = R.Generator
default_generator = R.default_generator
manual_seed, seed, initial_seed = R.manual_seed, R.seed, R.initial_seed
get_rng_state, set_rng_state = R.get_rng_state, R.set_rng_state

__all__ = [
    "Generator",
    "bernoulli",
    "default_generator",
    "get_rng_state",
    "initial_seed",
    "manual_seed",
    "normal",
    "rand",
    "rand_like",
    "randint",
    "randint_like",
    "randn",
    "randn_like",
    "randperm",
    "seed",
    "set_rng_state",
]
TENSOR_METHODS = ("uniform_", "normal_", "random_", "bernoulli_", "bernoulli")
