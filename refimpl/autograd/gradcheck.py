"""gradcheck and gradgradcheck (spec: AUTOGRAD-800..808).

``gradcheck(func, inputs)`` compares, for every differentiable input and output, the
Jacobian from finite differences (``eps`` central differences on the input's values)
with the one autograd computes (one backward per output element, run twice to check
that backward is deterministic, "reentrant"). Fast mode compares ``v^T J u`` for random
vectors instead of whole Jacobians. ``gradgradcheck`` runs gradcheck on the function
that returns the first-order gradients (with ``create_graph``).

Finite differences write the perturbation straight into the input's storage: the
input's version counter is not bumped, as torch's gradcheck perturbs ``input.data``.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np

__all__ = [
    "GradcheckError",
    "get_analytical_jacobian",
    "get_numerical_jacobian",
    "gradcheck",
    "gradgradcheck",
]


class GradcheckError(RuntimeError):
    """Error raised by :func:`gradcheck` and :func:`gradgradcheck`."""


_NONDET_NOTE = """\n
NOTE: If your op relies on non-deterministic operations i.e., it is listed here:
https://pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html
this failure might be expected.

If you are adding a new operator, please file an issue and then use one of the
workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck.
If the test
- manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck
  with `nondet_tol=<tol>` as a keyword argument.
"""


def _is_tensor(x) -> bool:
    from refimpl._tensor import Tensor

    return isinstance(x, Tensor)


def _as_tuple(x) -> tuple:
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _is_float(t) -> bool:
    return _is_tensor(t) and (t.dtype.is_floating_point or t.dtype.is_complex)


def _diff_inputs(inputs) -> list:
    return [x for x in inputs if _is_tensor(x) and x.requires_grad]


def _differentiable_outputs(outputs) -> tuple:
    return tuple(o for o in _as_tuple(outputs) if _is_tensor(o) and o.requires_grad)


def _np(t) -> np.ndarray:
    return np.array(t.detach().cpu()._np, copy=True)


def _basis(output, j: int, value=1):
    """A tensor like ``output`` (its device too) that is ``value`` at flat index ``j``,
    else 0 (written on the host, then moved: a CUDA tensor has no host array)."""
    from refimpl.ops.factories import zeros

    host = zeros(output.shape, dtype=output.dtype)
    host._np.reshape(-1)[j] = value
    return host if output.device.type == "cpu" else host.to(output.device)


class _Perturbable:
    """The values of an input, writable in place: the input's own buffer on the CPU; on
    a device, a host copy written back (``copy_`` under no_grad) after each change."""

    def __init__(self, inp) -> None:
        self.inp = inp
        self.on_host = inp.device.type == "cpu"
        self.arr = inp._np if self.on_host else _np(inp)

    def commit(self) -> None:
        if not self.on_host:
            # a raw copy: like the CPU path, perturbing does not bump the version counter
            from refimpl._tensor import Tensor
            from refimpl.cuda import _tensor_ops

            _tensor_ops.copy_(self.inp, Tensor._from_array(np.ascontiguousarray(self.arr),
                                                           self.inp.dtype))


def _tensor(arr, like=None):
    from refimpl.ops.factories import tensor

    dtype = like.dtype if like is not None else None
    return tensor(arr, dtype=dtype)


def _check_inputs(inputs) -> None:
    any_requiring = False
    for idx, inp in enumerate(inputs):
        if _is_tensor(inp) and inp.requires_grad:
            if inp.dtype.name not in ("float64", "complex128"):
                warnings.warn(
                    f"Input #{idx} requires gradient and is not a double precision floating "
                    "point or complex. This check will likely fail if all the inputs are not of "
                    "double precision floating point or complex. ", stacklevel=3)
            if not all(st > 0 or sz <= 1 for st, sz in zip(inp.stride(), inp.size())):
                raise RuntimeError(
                    f"The {idx}th input has a dimension with stride 0. gradcheck only supports "
                    "inputs that are non-overlapping to be able to compute the numerical "
                    "gradients correctly. You should call .contiguous on the input before "
                    "passing it to gradcheck."
                )
            any_requiring = True
    if not any_requiring:
        raise ValueError(
            "gradcheck expects at least one input tensor to require gradient, but none of "
            "them have requires_grad=True."
        )


def _check_same_meta(out1, out2, eps, idx=None) -> None:
    on_index = f"on index {idx} " if idx is not None else ""
    if out1.shape != out2.shape:
        raise AssertionError(
            f"Expected `func` to return outputs with the same shape when inputs are perturbed "
            f"{on_index}by {eps}, but got: shapes {out1.shape} and {out2.shape}."
        )
    if out1.dtype != out2.dtype:
        raise AssertionError(
            f"Expected `func` to return outputs with the same dtype when inputs are perturbed "
            f"{on_index}by {eps}, but got: dtypes {out1.dtype} and {out2.dtype}."
        )


def _eval_outputs(func, inputs) -> tuple:
    return _as_tuple(func(*inputs))


def _snapshot(outputs) -> list:
    """(output, a copy of its values now): outputs may alias the perturbed input."""
    return [(o, _np(o) if _is_float(o) else None) for o in outputs]


def _numerical_column(func, inputs, inp, flat_idx, delta, eps, ref_outputs):
    """(f(x + delta) - f(x - delta)) / (2 eps) per float output (delta applied at one
    element, or along a direction for fast mode)."""
    values = _Perturbable(inp)
    arr = values.arr
    orig = np.array(arr, copy=True)
    if flat_idx is not None:
        idx = np.unravel_index(flat_idx, arr.shape) if arr.ndim else ()
        arr[idx] = orig[idx] - eps
        values.commit()
        outa = _snapshot(_eval_outputs(func, inputs))
        arr[idx] = orig[idx] + eps
        values.commit()
        outb = _snapshot(_eval_outputs(func, inputs))
        arr[idx] = orig[idx]
    else:
        arr[...] = orig - eps * delta
        values.commit()
        outa = _snapshot(_eval_outputs(func, inputs))
        arr[...] = orig + eps * delta
        values.commit()
        outb = _snapshot(_eval_outputs(func, inputs))
        arr[...] = orig
    values.commit()
    cols = []
    for ref, (a, a_np), (b, b_np) in zip(ref_outputs, outa, outb):
        if not _is_float(ref):
            cols.append(None)
            continue
        _check_same_meta(a, ref, eps, (flat_idx,) if flat_idx is not None else None)
        _check_same_meta(b, ref, eps, (flat_idx,) if flat_idx is not None else None)
        wide = np.complex128 if ref.dtype.is_complex else np.float64
        cols.append(((b_np.astype(wide) - a_np) / (2 * eps)).reshape(-1))
    return cols


def _numerical_jacobians(func, inputs, ref_outputs, eps) -> list:
    """jac[i][j]: (numel of input i, numel of output j) for each input requiring grad."""
    jacs = []
    for inp in _diff_inputs(inputs):
        n = inp.numel()
        per_out = [np.zeros((n, o.numel())) if _is_float(o) else None for o in ref_outputs]
        for k in range(n):
            cols = _numerical_column(func, inputs, inp, k, None, eps, ref_outputs)
            for j, c in enumerate(cols):
                if c is not None:
                    per_out[j] = per_out[j].astype(c.dtype) if c.dtype.kind == "c" else per_out[j]
                    per_out[j][k] = c
        jacs.append(per_out)
    return jacs


def _vjp(output, inputs, v):
    from refimpl.autograd.engine import grad

    return grad(output, inputs, v, retain_graph=True, allow_unused=True)


def _analytical_jacobian(inputs, output, nondet_tol, check_grad_dtypes):
    """(jacobians per input, reentrant, sizes_ok, types_ok) of one output."""

    diff = _diff_inputs(inputs)
    n_out = output.numel()
    rows = [[np.zeros((x.numel(), n_out)) for x in diff] for _ in range(2)]
    sizes_ok = types_ok = True
    for rep in range(2):
        for j in range(n_out):
            grads = _vjp(output, diff, _basis(output, j))
            for i, (d, x) in enumerate(zip(grads, diff)):
                if d is None:
                    continue
                if d.numel() != x.numel():
                    sizes_ok = False
                    continue
                if d.dtype != x.dtype:
                    types_ok = False
                col = _np(d).reshape(-1)
                if col.dtype.kind == "c":
                    rows[rep][i] = rows[rep][i].astype(np.complex128)
                rows[rep][i][:, j] = col
    reentrant = all(np.abs(a - b).max(initial=0.0) <= nondet_tol
                    for a, b in zip(rows[0], rows[1]))
    if not types_ok and check_grad_dtypes:
        raise GradcheckError("Gradient has dtype mismatch")
    if not sizes_ok:
        raise GradcheckError("Analytical gradient has incorrect size")
    if not reentrant:
        raise GradcheckError(
            "Backward is not reentrant, i.e., running backward with same input and grad_output "
            "multiple times gives different values, although analytical gradient matches "
            f"numerical gradient.The tolerance for nondeterminism was {nondet_tol}."
            + _NONDET_NOTE)
    return rows[0]


def _format(arr: np.ndarray) -> str:
    import refimpl
    from refimpl.ops.factories import tensor

    return repr(tensor(np.asarray(arr).real if np.iscomplexobj(arr) else arr,
                       dtype=refimpl.float64))


def _mismatch(a, n, out_idx: int, in_idx: int, fast: bool) -> str:
    msg = (f"Jacobian mismatch for output {out_idx:d} with respect to input {in_idx:d},\n"
           f"numerical:{_format(n)}\nanalytical:{_format(a)}\n")
    if fast:
        msg += ("\nThe above quantities relating the numerical and analytical jacobians are "
                "computed \nin fast mode. See: https://github.com/pytorch/pytorch/issues/53876 "
                "\nfor more background about fast mode.")
    return msg


def _check_no_differentiable_outputs(func, inputs, func_out, eps) -> bool:
    for per_out in _numerical_jacobians(func, inputs, func_out, eps):
        for jac in per_out:
            if jac is not None and np.any(jac != 0):
                raise GradcheckError("Numerical gradient for function expected to be zero")
    return True


def _test_undefined_backward(func, inputs) -> bool:
    from refimpl.autograd._functions import UndefinedGrad
    from refimpl.autograd.engine import grad
    from refimpl.ops.factories import zeros

    diff = _diff_inputs(inputs)

    def warn_bc() -> None:
        warnings.warn(
            "Backwards compatibility: New undefined gradient support checking feature is "
            "enabled by default, but it may break existing callers of this function. If this "
            "is true for you, you can call this function with \"check_undefined_grad=False\" to "
            "disable the feature", stacklevel=4)

    def check(outs) -> None:
        zs = [zeros(o.shape, dtype=o.dtype, device=o.device) for o in outs]
        try:
            gis = grad(outs, diff, zs, allow_unused=True)
        except RuntimeError as e:
            warn_bc()
            raise GradcheckError(
                "Expected backward function to handle undefined output grads. Please look at "
                "\"Notes about undefined output gradients\" in \"tools/autograd/derivatives.yaml\""
            ) from e
        for gi in gis:
            if gi is not None and not bool((gi == 0).all()):
                warn_bc()
                raise GradcheckError(
                    "Expected all input grads to be undefined or zero when all output grads are "
                    "undefined or zero. Please look at \"Notes about undefined output gradients\" "
                    "in \"tools/autograd/derivatives.yaml\""
                )

    outs = _differentiable_outputs(func(*inputs))
    check([UndefinedGrad()(o) for o in outs])
    if len(outs) > 1:
        for k in range(len(outs)):
            outs = _differentiable_outputs(func(*inputs))
            check([UndefinedGrad()(o) if i == k else o for i, o in enumerate(outs)])
    return True


def _test_backward_mul_by_grad_output(outputs, inputs) -> bool:
    from refimpl.autograd.engine import grad
    from refimpl.ops.factories import zeros

    diff = _diff_inputs(inputs)
    gis = grad(outputs, diff, [zeros(o.shape, dtype=o.dtype, device=o.device) for o in outputs],
               allow_unused=True)
    for gi, di in zip(gis, diff):
        if gi is None:
            continue
        if not bool((gi == 0).all()):
            raise GradcheckError("backward not multiplied by grad_output")
        if gi.dtype != di.dtype:
            raise GradcheckError("grad is incorrect type")
        if gi.device != di.device:
            raise GradcheckError("grad is incorrect device")
        if gi.size() != di.size():
            raise GradcheckError("grad is incorrect size")
    return True


def _allclose(a, n, rtol, atol) -> bool:
    return bool(np.allclose(a, n, rtol=rtol, atol=atol, equal_nan=False))


def _slow_check(func, inputs, func_out, outputs, eps, rtol, atol, nondet_tol,
                check_grad_dtypes) -> None:
    numerical = _numerical_jacobians(func, inputs, func_out, eps)
    diff_out_idx = [j for j, o in enumerate(func_out) if _is_tensor(o) and o.requires_grad]
    for i, o in enumerate(outputs):
        analytical = _analytical_jacobian(inputs, o, nondet_tol, check_grad_dtypes)
        for j, a in enumerate(analytical):
            n = numerical[j][diff_out_idx[i]]
            if not _allclose(a, n, rtol, atol):
                raise GradcheckError(_mismatch(a, n, i, j, False))


def _fast_check(func, inputs, func_out, outputs, eps, rtol, atol, nondet_tol,
                check_grad_dtypes) -> None:
    rng = np.random.default_rng(0)
    diff = _diff_inputs(inputs)
    us = [rng.standard_normal(x.shape) for x in diff]
    us = [u / max(np.linalg.norm(u), 1e-12) for u in us]
    diff_out_idx = [j for j, o in enumerate(func_out) if _is_tensor(o) and o.requires_grad]
    vs = [rng.standard_normal(o.shape) for o in outputs]
    # numerical J u for each input, per output
    ju = [_numerical_column(func, inputs, x, None, u, eps, func_out) for x, u in zip(diff, us)]
    for i, (o, v) in enumerate(zip(outputs, vs)):
        vt = _tensor(v, o)
        results = []
        for _ in range(2):
            gs = _vjp(o, diff, vt)
            results.append([None if g is None else _np(g) for g in gs])
        for k in range(len(diff)):
            a1, a2 = results[0][k], results[1][k]
            if a1 is not None and a2 is not None and np.abs(a1 - a2).max(initial=0) > nondet_tol:
                raise GradcheckError(
                    "Backward is not reentrant, i.e., running backward with same input and "
                    "grad_output multiple times gives different values, although analytical "
                    "gradient matches numerical gradient.The tolerance for nondeterminism was "
                    f"{nondet_tol}." + _NONDET_NOTE)
        for j, (x, u) in enumerate(zip(diff, us)):
            g = results[0][j]
            analytical = 0.0 if g is None else float(np.sum(g.reshape(-1) * u.reshape(-1)))
            col = ju[j][diff_out_idx[i]]
            numerical = float(np.sum(col * v.reshape(-1))) if col is not None else 0.0
            if not _allclose(np.array(analytical), np.array(numerical), rtol, atol):
                raise GradcheckError(_mismatch(np.array(analytical), np.array(numerical), i, j,
                                               True))


def _gradcheck(func, inputs, eps, atol, rtol, nondet_tol, check_undefined_grad,
               check_grad_dtypes, check_backward_ad, fast_mode) -> bool:
    _check_inputs(inputs)
    func_out = _as_tuple(func(*inputs))
    outputs = _differentiable_outputs(func_out)
    if not outputs:
        if fast_mode:
            diff = _diff_inputs(inputs)
            for x in diff:
                rng = np.random.default_rng(0)
                u = rng.standard_normal(x.shape)
                for col in _numerical_column(func, inputs, x, None, u, eps, func_out):
                    if col is not None and col.size and np.abs(col).max() > nondet_tol:
                        raise GradcheckError(
                            "Numerical gradient for function expected to be zero")
            return True
        return _check_no_differentiable_outputs(func, inputs, func_out, eps)
    if check_backward_ad:
        if any(x.is_complex() for x in _diff_inputs(inputs)) or any(
                o.is_complex() for o in outputs):
            # complex functions: the real/imaginary split, on whole Jacobians (also in
            # fast mode, which only changes how much work the check does)
            from refimpl.autograd._gradcheck_complex import complex_slow_check

            complex_slow_check(func, inputs, func_out, outputs, eps, rtol, atol, nondet_tol)
        else:
            check = _fast_check if fast_mode else _slow_check
            check(func, inputs, func_out, outputs, eps, rtol, atol, nondet_tol,
                  check_grad_dtypes)
        _test_backward_mul_by_grad_output(outputs, inputs)
        if check_undefined_grad:
            _test_undefined_backward(func, inputs)
    return True


def gradcheck(func, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, nondet_tol: float = 0.0,
              check_undefined_grad: bool = True, check_grad_dtypes: bool = False,
              check_batched_grad: bool = False, check_batched_forward_grad: bool = False,
              check_forward_ad: bool = False, check_backward_ad: bool = True,
              fast_mode: bool = False, masked=None) -> bool:
    """Check autograd's gradients of ``func`` at ``inputs`` against finite differences.

    Returns True; on a mismatch raises ``GradcheckError`` (or returns False when
    ``raise_exception=False``)."""
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError(
            "Expected at least one of check_forward_ad or check_backward_ad to be True")
    if check_batched_grad and not check_backward_ad:
        raise AssertionError(
            "Setting check_batched_grad=True requires check_backward_ad to be True")
    if check_batched_forward_grad and not check_forward_ad:
        raise AssertionError(
            "Setting check_batched_forward_grad=True requires check_forward_ad to be True")
    if check_batched_forward_grad:
        raise NotImplementedError(
            "refimpl's gradcheck has no vmap: check_batched_forward_grad is not supported")
    inputs = _as_tuple(inputs)
    try:
        if check_backward_ad:
            _gradcheck(func, inputs, eps, atol, rtol, nondet_tol, check_undefined_grad,
                       check_grad_dtypes, check_backward_ad, fast_mode)
        if check_forward_ad:
            from refimpl.autograd._gradcheck_forward import forward_check

            forward_check(func, inputs, eps, rtol, atol, check_grad_dtypes,
                          check_undefined_grad)
        return True
    except GradcheckError:
        if raise_exception:
            raise
        return False


def gradgradcheck(func, inputs, grad_outputs=None, *, eps: float = 1e-6, atol: float = 1e-5,
                  rtol: float = 1e-3, gen_non_contig_grad_outputs: bool = False,
                  raise_exception: bool = True, nondet_tol: float = 0.0,
                  check_undefined_grad: bool = True, check_grad_dtypes: bool = False,
                  check_batched_grad: bool = False, check_fwd_over_rev: bool = False,
                  check_rev_over_rev: bool = True, fast_mode: bool = False,
                  masked: bool = False) -> bool:
    """gradcheck of the function that returns ``func``'s first-order gradients."""
    from refimpl.autograd.engine import grad

    inputs = _as_tuple(inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(1)
        outs = _differentiable_outputs(func(*inputs))
        grad_outs = tuple(_tensor(rng.uniform(-1, 1, o.shape), o).requires_grad_()
                          for o in outs)
    else:
        grad_outs = _as_tuple(grad_outputs)
    n_out = len(grad_outs)
    diff_in = {i for i, x in enumerate(inputs) if _is_tensor(x) and x.requires_grad}
    diff_go = {i for i, x in enumerate(grad_outs) if x.requires_grad}

    def new_func(*args):
        in_args = tuple(x.requires_grad_() if i in diff_in else x
                        for i, x in enumerate(args[:-n_out]))
        outs = _differentiable_outputs(func(*in_args))
        gos = tuple(x.requires_grad_() if i in diff_go else x
                    for i, x in enumerate(args[-n_out:]))
        diff_args = tuple(x for i, x in enumerate(in_args) if i in diff_in)
        gis = grad(outs, diff_args, gos, create_graph=True, allow_unused=True)
        return tuple(g for g in gis if g is not None)

    return gradcheck(new_func, inputs + grad_outs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_undefined_grad=check_undefined_grad,
                     check_grad_dtypes=check_grad_dtypes, check_batched_grad=check_batched_grad,
                     fast_mode=fast_mode, check_forward_ad=check_fwd_over_rev,
                     check_backward_ad=check_rev_over_rev, masked=masked)


def _deprecated(name: str):
    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            warnings.warn(
                f"`{name}` was part of PyTorch's private API and not meant to be exposed. We are "
                "deprecating it and it will be removed in a future version of PyTorch. If you "
                "have a specific use for this or feature request for this to be a stable API, "
                "please file us an issue at https://github.com/pytorch/pytorch/issues/new",
                FutureWarning, stacklevel=2)
            return fn(*args, **kwargs)

        return inner

    return wrap


@_deprecated("get_numerical_jacobian")
def get_numerical_jacobian(fn, inputs, target=None, eps: float = 1e-3, grad_out: float = 1.0):
    """Numerical Jacobians of output 0 of ``fn(inputs)`` w.r.t. each input requiring grad."""
    if grad_out != 1.0:
        raise ValueError("Expected grad_out to be 1.0. get_numerical_jacobian no longer "
                         "supports values of grad_out != 1.0.")
    inputs = _as_tuple(inputs)

    def f(*xs):
        return fn(xs)

    outs = _eval_outputs(f, inputs)
    jacs = _numerical_jacobians(f, inputs, outs, eps)
    return tuple(_tensor(per_out[0], inp) for per_out, inp in zip(jacs, _diff_inputs(inputs)))


@_deprecated("get_analytical_jacobian")
def get_analytical_jacobian(inputs, output, nondet_tol: float = 0.0, grad_out: float = 1.0):
    """(Jacobians, reentrant, sizes_ok, types_ok) of ``output`` w.r.t. ``inputs``."""
    if grad_out != 1.0:
        raise ValueError("Expected grad_out to be 1.0. get_analytical_jacobian no longer "
                         "supports values of grad_out != 1.0.")
    inputs = _as_tuple(inputs)
    diff = _diff_inputs(inputs)
    reps = []

    for _ in range(2):
        rows = [np.zeros((x.numel(), output.numel())) for x in diff]
        for j in range(output.numel()):
            for i, d in enumerate(_vjp(output, diff, _basis(output, j))):
                if d is not None:
                    rows[i][:, j] = _np(d).reshape(-1)
        reps.append(rows)
    reentrant = all(np.abs(a - b).max(initial=0) <= nondet_tol for a, b in zip(*reps))
    jacs = tuple(_tensor(r, x) for r, x in zip(reps[0], diff))
    return jacs, reentrant, True, True
