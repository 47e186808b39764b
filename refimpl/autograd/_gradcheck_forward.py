"""Forward-mode gradcheck (spec FWDAD-400): the Jacobian column by column with duals.

For every input that requires grad and every element of it, the inputs become duals of
their detached values (zero tangents, one element set to 1, or to 1j for the imaginary
direction of a complex input); the output tangents are the Jacobian's columns, compared
with finite differences along the same direction.
"""

from __future__ import annotations

import numpy as np

from refimpl.autograd.gradcheck import (
    GradcheckError,
    _as_tuple,
    _basis,
    _format,
    _is_float,
    _is_tensor,
    _numerical_column,
)


def _mismatch(a, n, out_idx: int, in_idx: int) -> str:
    return (f"Jacobian computed with forward mode mismatch for output {out_idx:d} with "
            f"respect to input {in_idx:d},\nnumerical:{_format(n)}\nanalytical:{_format(a)}\n")


def _forward_columns(func, inputs, which: int, k: int, direction, check_grad_dtypes: bool):
    """Output tangents (flattened numpy, None for a float output without one) when input
    ``which`` (an index among the inputs requiring grad) has tangent ``direction`` at
    flat index ``k`` and the others zero tangents."""
    from refimpl.autograd import forward_ad as fwAD
    from refimpl.ops.factories import zeros_like

    with fwAD.dual_level():
        duals = []
        pos = 0
        for x in inputs:
            if _is_tensor(x) and x.requires_grad:
                tangent = (_basis(x, k, direction) if pos == which
                           else zeros_like(x.detach()))
                x = fwAD.make_dual(x.detach(), tangent)
                pos += 1
            duals.append(x)
        outs = _as_tuple(func(*duals))
        cols = []
        for o in outs:
            if not _is_float(o):
                continue
            val, tg = fwAD.unpack_dual(o)
            if tg is None:
                cols.append(np.zeros(o.numel(), dtype=np.complex128 if o.is_complex()
                                     else np.float64))
                continue
            if check_grad_dtypes and val.dtype != tg.dtype:
                raise GradcheckError("Forward AD gradient has dtype mismatch.")
            cols.append(np.array(tg.detach()._np, copy=True).reshape(-1))
    return cols


def forward_check(func, inputs, eps: float, rtol: float, atol: float,
                  check_grad_dtypes: bool, check_undefined_grad: bool) -> None:
    """Raise GradcheckError when forward-mode derivatives disagree with finite differences."""
    inputs = _as_tuple(inputs)
    diff = [x for x in inputs if _is_tensor(x) and x.requires_grad]
    ref = _as_tuple(func(*inputs))
    float_outs = [o for o in ref if _is_float(o)]
    for i, x in enumerate(diff):
        directions = (1.0, 1j) if x.is_complex() else (1.0,)
        for direction in directions:
            n_in = x.numel()
            analytical = [np.zeros((n_in, o.numel()), dtype=np.complex128) for o in float_outs]
            numerical = [np.zeros((n_in, o.numel()), dtype=np.complex128) for o in float_outs]
            for k in range(n_in):
                a_cols = _forward_columns(func, inputs, i, k, direction, check_grad_dtypes)
                delta = np.zeros(x.shape, dtype=np.complex128 if x.is_complex() else np.float64)
                delta.reshape(-1)[k] = direction
                n_cols = [c for c in _numerical_column(func, inputs, x, None, delta, eps, ref)
                          if c is not None]
                for j, (a, n) in enumerate(zip(a_cols, n_cols)):
                    analytical[j][k] = a
                    numerical[j][k] = n
            for j, (a, n) in enumerate(zip(analytical, numerical)):
                if not np.allclose(a, n, rtol=rtol, atol=atol):
                    prefix = ("While considering the imaginary part of complex inputs only, "
                              if direction == 1j else "")
                    raise GradcheckError(prefix + _mismatch(a, n, j, i))
    if check_undefined_grad:
        _check_undefined_tangents(func, inputs)


def _check_undefined_tangents(func, inputs) -> None:
    """Each input requiring grad in turn gets no tangent (a plain tensor) and a zero
    tangent while the others have random ones: both runs must give the same output
    tangents."""
    from refimpl.autograd import forward_ad as fwAD
    from refimpl.ops.factories import tensor, zeros_like

    rng = np.random.default_rng(0)
    with fwAD.dual_level():
        duals = []
        for x in inputs:
            if _is_tensor(x) and x.requires_grad:
                u = rng.standard_normal(x.shape)
                if x.is_complex():
                    u = u + 1j * rng.standard_normal(x.shape)
                x = fwAD.make_dual(x.detach(), tensor(u, dtype=x.dtype))
            duals.append(x)
        for idx, x in enumerate(inputs):
            if not (_is_tensor(x) and x.requires_grad):
                continue
            saved = duals[idx]
            duals[idx] = fwAD.make_dual(x.detach(), zeros_like(x.detach()))
            outs1 = [o for o in _as_tuple(func(*duals)) if _is_float(o)]
            duals[idx] = x.detach()
            outs2 = [o for o in _as_tuple(func(*duals)) if _is_float(o)]
            duals[idx] = saved
            for index_o, (o1, o2) in enumerate(zip(outs1, outs2)):
                t1, t2 = fwAD.unpack_dual(o1).tangent, fwAD.unpack_dual(o2).tangent
                if t1 is not None and t2 is not None and not np.allclose(
                        np.asarray(t1.detach()._np), np.asarray(t2.detach()._np)):
                    raise GradcheckError(
                        f"Mismatch in tangent values for output with index: {index_o} when "
                        f"input: {x} has an undefined tangent value.  Got: {t1} but "
                        f"expected: {t2}")
