"""Forward-mode AD of custom Functions (spec FWDAD-300..304): ``Function.apply`` on duals
runs the Function's ``jvp`` and attaches its tangents, with torch's checks on what a jvp
returns for non-differentiable, in-place (``mark_dirty``) and view outputs."""

from __future__ import annotations

from refimpl._state import FW
from refimpl.autograd.forward_ad import attach, laid_out_like, same_layout, tangent_of


def function_jvp(cls, ctx, args: tuple, outs: list, raw_outs: list) -> None:
    """Run ``cls.jvp`` for a Function applied to duals and attach the output tangents.

    ``args``: the forward arguments; ``outs``: the outputs as returned to the user;
    ``raw_outs``: what forward returned (an input returned as-is is the input itself).
    """
    from refimpl._tensor import Tensor

    tangents = [tangent_of(a) if isinstance(a, Tensor) else None for a in args]
    if not any(tg is not None for tg in tangents):
        return
    if getattr(ctx, "materialize_grads", True):
        # float inputs without a tangent get zeros (as gradients do in backward)
        from refimpl.ops.factories import zeros_like

        prev, FW.active = FW.active, False
        try:
            tangents = [zeros_like(a) if tg is None and isinstance(a, Tensor)
                        and a.dtype.category >= 2 else tg for a, tg in zip(args, tangents)]
        finally:
            FW.active = prev
    versions = [tg._version_counter.version if tg is not None else None for tg in tangents]
    ctx._in_jvp = True
    prev, FW.active = FW.active, False
    try:
        res = cls.jvp(ctx, *tangents)
    finally:
        FW.active = prev
        ctx._in_jvp = False
        ctx.saved_for_forward = None
    res = list(res) if isinstance(res, tuple) else [res]
    if len(res) != len(outs):
        raise RuntimeError(
            "Function's jvp returned an invalid number of forward gradients (expected "
            f"{len(outs)} but got {len(res)})"
        )
    dirty = {id(t) for t in (ctx.dirty_tensors or ())}
    non_diff = {id(t) for t in (ctx.non_differentiable or ())}
    inputs = [(a, tg) for a, tg in zip(args, tangents) if isinstance(a, Tensor)]
    for i, (out, raw, tg) in enumerate(zip(outs, raw_outs, res)):
        if tg is None:
            continue
        if not isinstance(out, Tensor) or id(raw) in non_diff or out.dtype.category < 2:
            raise RuntimeError(
                f"Function's jvp returned a gradient at position {i}, but  the corresponding "
                "forward output is not a differentiable Tensor.You should return None at that "
                "position instead."
            )
        if out._shape != tg._shape:
            raise RuntimeError(
                "Trying to set a forward gradient that has a different size than that of the "
                f"original Tensor, this is not supported. Tensor is of size {list(out._shape)} "
                f"while the given forward gradient is of size {list(tg._shape)}."
            )
        if id(raw) in dirty:
            k = next((k for k, a in enumerate(args) if a is raw), None)
            in_tangent = None if k is None else tangents[k]
            if in_tangent is None or tg is not in_tangent or \
                    in_tangent._version_counter.version == versions[k]:
                raise RuntimeError(
                    "An inplace custom Function is not modifying the forward mode gradients "
                    "inplace. If the forward is modifying an input inplace, then the jvp "
                    "function must modify the corresponding gradient inplace."
                )
            continue
        if out._base is not None:
            src = next(((a, itg) for a, itg in inputs
                        if (a._base if a._base is not None else a) is out._base), None)
            if src is not None:
                _check_view_tangent(src[0], src[1], tg)
        attach(out, tg if same_layout(out, tg) or out._base is not None
               else laid_out_like(out, tg))


def _check_view_tangent(inp, in_tangent, tg) -> None:
    if tg._base is None:
        raise RuntimeError(
            "A custom Function's forward is returning a view (or an input as-is) but the jvp "
            "is not returning a view."
        )
    if in_tangent is None:
        return
    if in_tangent._base is not None:
        if tg._base is not in_tangent._base:
            raise RuntimeError(
                "A custom Function is returning a view but the jvp is not returning a view of "
                "the same base as the given grad input."
            )
    elif tg._base is not in_tangent:
        raise RuntimeError(
            "A custom Function is returning a view but the jvp is not returning a view of the "
            "given grad input."
        )
