"""gradcheck's slow check for complex inputs or outputs (torch's convention, AUTOGRAD-800).

A complex output is checked as two real functions, its real part and its imaginary part
(backward seeded with 1 and with 1j); a complex input ``z = a + ib`` is perturbed along
``a`` and along ``b``, and autograd's gradient of a real function ``L`` must equal
``dL/da + i dL/db`` (the conjugate Wirtinger derivative times 2).
"""

from __future__ import annotations

import numpy as np

from refimpl.autograd.gradcheck import (
    _NONDET_NOTE,
    GradcheckError,
    _basis,
    _diff_inputs,
    _is_tensor,
    _mismatch,
    _np,
    _numerical_column,
    _vjp,
)


def _directional(func, inputs, x, func_out, diff_out_idx, eps, scale) -> list:
    """Per differentiable output: (numel of x, numel of output) finite differences along
    ``scale`` (1 or 1j) at each element of ``x``."""
    n = x.numel()
    dtype = np.complex128 if x.is_complex() else np.float64
    cols = [np.zeros((n, func_out[j].numel()), dtype=np.complex128) for j in diff_out_idx]
    for k in range(n):
        delta = np.zeros(x.shape, dtype=dtype)
        delta.reshape(-1)[k] = scale
        got = _numerical_column(func, inputs, x, None, delta, eps, func_out)
        for c, j in zip(cols, diff_out_idx):
            c[k] = got[j]
    return cols


def complex_slow_check(func, inputs, func_out, outputs, eps, rtol, atol, nondet_tol) -> None:
    """Raise GradcheckError where autograd disagrees with finite differences."""
    diff = _diff_inputs(inputs)
    diff_out_idx = [j for j, o in enumerate(func_out) if _is_tensor(o) and o.requires_grad]
    along_re = [_directional(func, inputs, x, func_out, diff_out_idx, eps, 1.0) for x in diff]
    along_im = [_directional(func, inputs, x, func_out, diff_out_idx, eps, 1j)
                if x.is_complex() else None for x in diff]
    for oi, o in enumerate(outputs):
        parts = (("imaginary", 1j), ("real", 1.0)) if o.is_complex() else (("real", 1.0),)
        for part, seed in parts:
            reps = []
            for _ in range(2):
                rows = [np.zeros((x.numel(), o.numel()), dtype=np.complex128) for x in diff]
                for j in range(o.numel()):
                    g = _basis(o, j, seed)
                    for i, d in enumerate(_vjp(o, diff, g)):
                        if d is not None:
                            rows[i][:, j] = _np(d).reshape(-1)
                reps.append(rows)
            for a, b in zip(*reps):
                if np.abs(a - b).max(initial=0.0) > nondet_tol:
                    raise GradcheckError(
                        "Backward is not reentrant, i.e., running backward with same input and "
                        "grad_output multiple times gives different values, although "
                        "analytical gradient matches numerical gradient.The tolerance for "
                        f"nondeterminism was {nondet_tol}." + _NONDET_NOTE)
            for i, x in enumerate(diff):
                re = along_re[i][oi]
                numerical = (re.real if part == "real" else re.imag).astype(np.complex128)
                if along_im[i] is not None:
                    im = along_im[i][oi]
                    numerical = numerical + 1j * (im.real if part == "real" else im.imag)
                analytical = reps[0][i]
                if not np.allclose(analytical, numerical, rtol=rtol, atol=atol):
                    prefix = (f"While considering the {part} part of complex outputs only, "
                              if o.is_complex() else "")
                    raise GradcheckError(prefix + _mismatch(analytical, numerical, oi, i,
                                                            False))
