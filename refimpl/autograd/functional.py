"""Higher-level differentiation built on ``grad`` (spec: AUTOGRAD-112):
``vjp``, ``jvp``, ``jacobian``, ``hessian``, ``vhp``, ``hvp``.

Every function takes ``func`` and ``inputs`` (a tensor or a tuple of tensors) and
returns results with the same nesting as torch: a tuple when ``inputs`` (or the
outputs) were a tuple, a tensor otherwise. ``jvp`` uses the double-backward trick
(the vjp is linear in its vector, so differentiating it again gives J v). With
``create_graph=False`` results are detached; ``strict=True`` raises when an output does
not depend on an input.
"""

from __future__ import annotations

from refimpl.autograd.engine import grad as _grad
from refimpl.autograd.grad_mode import enable_grad

__all__ = ["hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]


def _is_tensor(x) -> bool:
    from refimpl._tensor import Tensor

    return isinstance(x, Tensor)


def _as_tuple(x, arg_name: str, fn_name: str):
    is_tuple = isinstance(x, tuple)
    xs = x if is_tuple else (x,)
    for i, v in enumerate(xs):
        if not _is_tensor(v):
            if is_tuple:
                raise TypeError(
                    f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of "
                    f"Tensors but the value at index {i} has type {type(v)}."
                )
            raise TypeError(
                f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors "
                f"but the given {arg_name} has type {type(v)}."
            )
    return is_tuple, xs


def _prepare_inputs(inputs, create_graph: bool) -> tuple:
    out = []
    for x in inputs:
        if create_graph and x.requires_grad:
            out.append(x.view_as(x))
        else:
            out.append(x.detach().requires_grad_(True))
    return tuple(out)


def _zeros_like(x):
    from refimpl.ops.factories import zeros

    return zeros(x._shape, dtype=x.dtype, device=x.device)


def _autograd_grad(outputs, inputs, grad_outputs, create_graph: bool, retain_graph=None):
    diff = [(o, g) for o, g in zip(outputs, grad_outputs) if o is not None and o.requires_grad]
    if not diff:
        return (None,) * len(inputs)
    return _grad([o for o, _ in diff], inputs, [g for _, g in diff], allow_unused=True,
                 create_graph=create_graph,
                 retain_graph=create_graph if retain_graph is None else retain_graph)


def _fill_in_zeros(grads, refs, strict: bool, create_graph: bool, stage: str):
    res = []
    for i, (g, r) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                if stage == "back":
                    raise RuntimeError(
                        f"The output of the user-provided function is independent of input {i}. "
                        "This is not allowed in strict mode."
                    )
                raise RuntimeError(
                    f"The gradient with respect to input {i} is independent of the inputs of "
                    "the user-provided function. This is not allowed in strict mode."
                )
            g = _zeros_like(r)
        res.append(g)
    return tuple(res)


def _check_outputs_differentiable(outs, strict: bool) -> None:
    if not strict:
        return
    for i, o in enumerate(outs):
        if not o.requires_grad:
            raise RuntimeError(
                f"Output {i} of the user-provided function does not require gradients. The "
                "outputs must be computed in a differentiable manner from the input when "
                "running in strict mode."
            )


def _finish(xs, create_graph: bool):
    return tuple(x if create_graph else (x.detach() if x is not None else None) for x in xs)


def _validate_v(v, other, is_other_tuple: bool) -> None:
    if len(v) != len(other):
        raise RuntimeError(
            f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}."
        )
    for i, (a, b) in enumerate(zip(v, other)):
        if a._shape != b._shape:
            prefix = f"Entry {i} in " if is_other_tuple else ""
            raise RuntimeError(
                f"{prefix}v has invalid size: should be {b.size()!r} but got {a.size()!r}."
            )


def _inputs_and_v(inputs, v, create_graph: bool, fn_name: str):
    """(is_tuple, prepared inputs, v as a tuple or None) for the input-side products
    (jvp, vhp, hvp): ``v`` must match the inputs, and may be omitted only for a single
    one-element input."""
    is_in_tuple, ins = _as_tuple(inputs, "inputs", fn_name)
    ins = _prepare_inputs(ins, create_graph)
    if v is not None:
        _, vs = _as_tuple(v, "v", fn_name)
        _validate_v(vs, ins, is_in_tuple)
        return is_in_tuple, ins, vs
    if len(ins) != 1 or ins[0].numel() != 1:
        raise RuntimeError(
            "The vector v can only be None if the input to the user-provided function "
            "is a single Tensor with a single element."
        )
    return is_in_tuple, ins, None


def vjp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), v^T J): the vector-Jacobian product at ``inputs``."""
    with enable_grad():
        is_in_tuple, ins = _as_tuple(inputs, "inputs", "vjp")
        ins = _prepare_inputs(ins, create_graph)
        outputs = func(*ins)
        is_out_tuple, outs = _as_tuple(outputs, "outputs of the user-provided function", "vjp")
        _check_outputs_differentiable(outs, strict)
        if v is not None:
            _, vs = _as_tuple(v, "v", "vjp")
            _validate_v(vs, outs, is_out_tuple)
        else:
            if len(outs) != 1 or outs[0].numel() != 1:
                raise RuntimeError(
                    "The vector v can only be None if the user-provided function returns a "
                    "single Tensor with a single element."
                )
            vs = (None,)
        grads = _autograd_grad(outs, ins, vs, create_graph)
        res = _fill_in_zeros(grads, ins, strict, create_graph, "back")
    outs = _finish(outs, create_graph)
    res = _finish(res, create_graph)
    return (outs if is_out_tuple else outs[0]), (res if is_in_tuple else res[0])


def jvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), J v): the Jacobian-vector product, by the double-backward trick."""
    with enable_grad():
        _, ins, vs = _inputs_and_v(inputs, v, create_graph, "jvp")
        outputs = func(*ins)
        is_out_tuple, outs = _as_tuple(outputs, "outputs of the user-provided function", "jvp")
        _check_outputs_differentiable(outs, strict)
        grad_outs = tuple(_zeros_like(o).requires_grad_(True) for o in outs)
        grad_inputs = _autograd_grad(outs, ins, grad_outs, create_graph=True)
        _fill_in_zeros(grad_inputs, ins, strict, create_graph, "back")
        pairs = [(g, w) for g, w in zip(grad_inputs, vs if vs is not None else (None,))
                 if g is not None]
        if pairs:
            res = _grad([g for g, _ in pairs], grad_outs, [w for _, w in pairs],
                        create_graph=create_graph, allow_unused=True)
        else:
            res = (None,) * len(grad_outs)
        res = _fill_in_zeros(res, outs, strict, create_graph, "back_trick")
    outs = _finish(outs, create_graph)
    res = _finish(res, create_graph)
    return (outs if is_out_tuple else outs[0]), (res if is_out_tuple else res[0])


def jacobian(func, inputs, create_graph: bool = False, strict: bool = False,
             vectorize: bool = False, strategy: str = "reverse-mode"):
    """The Jacobian of ``func`` at ``inputs`` (one backward per output element)."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode".')
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError(
                "torch.autograd.functional.jacobian: `create_graph=True` and "
                '`strategy="forward-mode"` are not supported together (yet). Please either '
                'set `create_graph=False` or `strategy="reverse-mode"`.')
        if strict:
            raise RuntimeError(
                "torch.autograd.functional.jacobian: `strict=True` and "
                '`strategy="forward-mode"` are not supported together (yet). Please either '
                'set `strict=False` or `strategy="reverse-mode"`.')
        if not vectorize:
            raise NotImplementedError(
                "Computing Jacobian using forward-AD or forward-over-reverse Hessian is"
                "only implemented for `vectorize=True`.")
        from refimpl.autograd._functional_forward import jacobian_forward

        return jacobian_forward(func, inputs)
    with enable_grad():
        is_in_tuple, ins = _as_tuple(inputs, "inputs", "jacobian")
        ins = _prepare_inputs(ins, create_graph)
        outputs = func(*ins)
        is_out_tuple, outs = _as_tuple(outputs, "outputs of the user-provided function",
                                       "jacobian")
        _check_outputs_differentiable(outs, strict)
        jac = []
        for i, out in enumerate(outs):
            rows = [[] for _ in ins]
            flat = out.reshape(-1)
            for j in range(flat.numel()):
                gs = _autograd_grad((flat[j],), ins, (None,), create_graph, retain_graph=True)
                for k, (g, x) in enumerate(zip(gs, ins)):
                    if g is None:
                        if strict:
                            raise RuntimeError(
                                f"Output {i} of the user-provided function is independent of "
                                f"input {k}. This is not allowed in strict mode."
                            )
                        g = _zeros_like(x)
                    rows[k].append(g)
            per_input = []
            for k, x in enumerate(ins):
                import refimpl

                if rows[k]:
                    stacked = refimpl.stack(rows[k]).reshape(out._shape + x._shape)
                else:
                    stacked = refimpl.zeros(out._shape + x._shape, dtype=x.dtype)
                per_input.append(stacked if create_graph else stacked.detach())
            jac.append(tuple(per_input))
    if is_out_tuple:
        return tuple(j if is_in_tuple else j[0] for j in jac)
    return jac[0] if is_in_tuple else jac[0][0]


def hessian(func, inputs, create_graph: bool = False, strict: bool = False,
            vectorize: bool = False, outer_jacobian_strategy: str = "reverse-mode"):
    """The Hessian of a scalar-valued ``func`` at ``inputs``."""
    is_in_tuple, ins = _as_tuple(inputs, "inputs", "hessian")

    def ensure_single_output(*xs):
        out = func(*xs)
        is_tuple, _ = _as_tuple(out, "outputs of the user-provided function", "hessian")
        if is_tuple or not _is_tensor(out):
            raise RuntimeError(
                "The function given to hessian should return a single Tensor"
            )
        if out.numel() != 1:
            raise RuntimeError(
                "The Tensor returned by the function given to hessian should contain a single "
                "element"
            )
        return out.squeeze()

    def jac_func(*xs):
        return jacobian(ensure_single_output, xs, create_graph=True)

    if outer_jacobian_strategy == "forward-mode":
        # forward over reverse: the duals require grad so that the inner reverse-mode
        # jacobian keeps them (as views) and its backward ops carry their tangents
        ins = tuple(x.detach().requires_grad_(True) for x in ins)
    res = jacobian(jac_func, ins, create_graph=create_graph, strict=strict,
                   vectorize=vectorize, strategy=outer_jacobian_strategy)
    # res[i][j]: d^2 f / d input_i d input_j (jac_func returns one entry per input).
    if is_in_tuple:
        return res
    return res[0][0]


def vhp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), v^T H) for a scalar-valued ``func``."""
    with enable_grad():
        is_in_tuple, ins, vs = _inputs_and_v(inputs, v, create_graph, "vhp")
        outputs = func(*ins)
        is_out_tuple, outs = _as_tuple(outputs, "outputs of the user-provided function", "vhp")
        _check_outputs_differentiable(outs, strict)
        if is_out_tuple or outs[0].numel() != 1:
            raise RuntimeError(
                "The function given to vhp should return a single Tensor with a single element."
            )
        jac = _autograd_grad(outs, ins, (None,), create_graph=True)
        jac = _fill_in_zeros(jac, ins, strict, create_graph, "back")
        pairs = [(g, w) for g, w in zip(jac, vs if vs is not None else (None,))]
        res = _autograd_grad([g for g, _ in pairs], ins, [w for _, w in pairs], create_graph)
        res = _fill_in_zeros(res, ins, strict, create_graph, "double_back")
    outs = _finish(outs, create_graph)
    res = _finish(res, create_graph)
    return outs[0], (res if is_in_tuple else res[0])


def hvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """(func(inputs), H v); equal to ``vhp`` since the Hessian is symmetric."""
    return vhp(func, inputs, v, create_graph=create_graph, strict=strict)
