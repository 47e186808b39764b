"""How the op_db walk (``bench/opdb_report.py``) compares refimpl's results with torch's.

Values agree within a tolerance per dtype (exact for integers and bools); ops whose
values are not meaningful to compare (uninitialised memory, random draws under torch's
fixed seed, the index among ties) are compared by what is meaningful; a mismatch is
explained (how many values differ and by how much) for the walk's failure reasons.
"""

from __future__ import annotations

import numpy as np

_TOL = {"float16": (1e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2), "float32": (1.3e-6, 1e-5),
        "float64": (1e-7, 1e-7), "complex64": (1.3e-6, 1e-5), "complex128": (1e-7, 1e-7)}


def same(r, T) -> bool:
    """Whether refimpl's result ``r`` agrees with torch's ``T``."""
    import torch

    import refimpl as t

    if isinstance(T, torch.Tensor):
        if not isinstance(r, t.Tensor) or tuple(r.shape) != tuple(T.shape):
            return False
        if str(r.dtype) != str(T.dtype):
            return False
        r = r.detach().cpu().resolve_conj().resolve_neg()  # lazy bits: values as read
        a = np.asarray(r.to(t.float64)._np if r.dtype in (t.float16, t.bfloat16) else r._np)
        b = T.detach().cpu()
        b = (b.double() if b.dtype in (torch.float16, torch.bfloat16) else b).resolve_conj()
        b = b.resolve_neg().numpy(force=True)  # force: a ZeroTensor gradient (sgn) too
        name = str(T.dtype).removeprefix("torch.")
        if name in _TOL:
            rt, at = _TOL[name]
            return bool(np.allclose(a, b, rtol=rt, atol=at, equal_nan=True))
        return bool(np.array_equal(a, b))
    if isinstance(T, (list, tuple)):
        return isinstance(r, (list, tuple)) and len(r) == len(T) and all(
            same(a, b) for a, b in zip(r, T))
    if isinstance(T, torch.dtype):
        return str(r) == str(T)
    if isinstance(T, float) and isinstance(r, (int, float)):
        return bool(np.isclose(r, T, equal_nan=True))
    return r == T


def explain(r, T) -> str:
    """A short account of how refimpl's ``r`` differs from torch's ``T``."""
    import torch

    import refimpl as t

    if isinstance(T, (list, tuple)):
        if not isinstance(r, (list, tuple)) or len(r) != len(T):
            return f"got {type(r).__name__}, torch gives {type(T).__name__} of {len(T)}"
        return "; ".join(f"[{i}] {explain(a, b)}" for i, (a, b) in enumerate(zip(r, T))
                         if not same(a, b))
    if not isinstance(T, torch.Tensor):
        return f"got {r!r:.40}, torch gives {T!r:.40}"
    if not isinstance(r, t.Tensor):
        return f"got {type(r).__name__}, torch gives a tensor"
    if tuple(r.shape) != tuple(T.shape) or str(r.dtype) != str(T.dtype):
        return f"got {tuple(r.shape)} {r.dtype}, torch gives {tuple(T.shape)} {T.dtype}"
    a = np.asarray(r.detach().cpu().resolve_conj().resolve_neg().to(
        t.float64 if not r.dtype.is_complex else t.complex128)._np, dtype=np.complex128)
    b = T.detach().cpu().resolve_conj().resolve_neg()
    b = (b.double() if b.dtype in (torch.float16, torch.bfloat16) else b).numpy(
        force=True).astype(np.complex128)
    bad = ~np.isclose(a, b, equal_nan=True) if a.size else np.zeros(0, bool)
    if not bad.any():
        return "values within float error of torch's, outside the dtype's tolerance"
    err = np.abs(a - b)[bad]
    return (f"{int(bad.sum())} of {a.size} values differ, max abs error "
            f"{float(np.nanmax(err)) if np.isfinite(err).any() else float('nan'):.3g}")


def describe_args(args, kwargs) -> str:
    """The shapes and plain values of a sample's arguments, briefly."""
    def one(x):
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            return "T" + str(list(x.shape)).replace(" ", "")
        if isinstance(x, (list, tuple)):
            return "(" + ",".join(one(e) for e in x[:4]) + (",..." if len(x) > 4 else "") + ")"
        return repr(x)[:20]
    parts = [one(a) for a in args] + [f"{k}={one(v)}" for k, v in kwargs.items()]
    return ", ".join(parts)[:160]


# Ops whose values are not meaningful to compare: uninitialised memory (compared by shape,
# dtype and strides), and random ops whose OpInfo fixes torch's seed (``wrapper_set_seed``)
# so that two torch runs agree although another generator's bits cannot (compared by
# shape, dtype and the properties that hold for every draw: ``_RANDOM_CHECKS``).
_UNINITIALISED = {"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty",
                  "new_empty_strided"}
_RANDOM_CHECKS = {
    "rand_like": lambda r, args: bool(((r >= 0) & (r < 1)).all()) if r.numel() else True,
    "randint_like": lambda r, args: True,
    "randn_like": lambda r, args: bool(r.isfinite().all()) if r.numel() else True,
    "bernoulli": lambda r, args: bool((r == r.round()).all() & (
        (args[0] * (1 - args[0]) != 0) | (r == args[0])).all()) if r.numel() else True,
    "multinomial": lambda r, args: True,
    "normal": lambda r, args: bool(r.isfinite().all()) if r.numel() else True,
    "nn.functional.fractional_max_pool2d": lambda r, args: _pooled_from(r, args[0], 2),
    "nn.functional.fractional_max_pool3d": lambda r, args: _pooled_from(r, args[0], 3),
}


# random ops whose gradients depend on the draws (the other random ops' do not: bernoulli's
# gradient is zero whatever it draws)
_DRAWN_GRADS = {"nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d"}


def _pooled_from(r, x, nd: int) -> bool:
    """A random pooling's ``(values, indices)`` (or values): values are the input's at the
    indices (within each plane of the last ``nd`` dims)."""
    if not isinstance(r, (tuple, list)):
        return True
    values, indices = r
    if not values.numel():
        return True
    plane = x.reshape(*x.shape[:-nd], -1)
    picked = plane.gather(-1, indices.reshape(*indices.shape[:-nd], -1))
    return bool((picked.reshape(values.shape) == values).all())


# Ops whose index among equal values torch leaves unspecified (unstable sorts, selection):
# (position of dim, position of keepdim or None). Their indices agree when they point at
# equal values of the input.
_TIES = {"sort": (1, None), "argsort": (1, None), "topk": (2, None), "kthvalue": (2, 3),
         "mode": (1, 2)}


def same_up_to_ties(name: str, args: list, kwargs: dict, r, T) -> bool:
    """Whether refimpl's ``r`` agrees with torch's ``T`` for an op of ``_TIES``: the same
    values, and indices that select equal input values."""
    import torch

    x = args[0]
    dpos, kpos = _TIES[name]
    dim = args[dpos] if len(args) > dpos else kwargs.get("dim", -1)
    keep = (args[kpos] if len(args) > kpos else kwargs.get("keepdim", False)) if kpos else True
    if name == "argsort":
        got, want = r, T
    elif not (isinstance(r, (tuple, list)) and len(r) == 2 and same(r[0], T[0])):
        return False
    else:
        got, want = r[1], T[1]
    if not same_layout_shape(got, want):
        return False
    got = torch.from_numpy(np.array(got.detach().cpu()._np)).to(want.device)
    if x.dim() == 0:
        return torch.equal(got, want)
    if not keep:
        got, want = got.unsqueeze(dim), want.unsqueeze(dim)
    a, b = x.detach().gather(dim, got), x.detach().gather(dim, want)
    return bool(((a == b) | (a.isnan() & b.isnan()) if a.is_floating_point() else a == b).all())


def same_layout_shape(r, T) -> bool:
    """Whether refimpl's tensor ``r`` has torch's ``T``'s shape and dtype."""
    import refimpl as t

    return isinstance(r, t.Tensor) and tuple(r.shape) == tuple(T.shape) and str(
        r.dtype) == str(T.dtype)


def same_layout(r, T) -> bool:
    """Whether refimpl's ``r`` has torch's ``T``'s shape, dtype and strides (element by
    element for tuples)."""
    if isinstance(T, (tuple, list)):
        return isinstance(r, (tuple, list)) and len(r) == len(T) and all(
            same_layout(a, b) for a, b in zip(r, T))
    return same_layout_shape(r, T) and tuple(r.stride()) == tuple(T.stride())
