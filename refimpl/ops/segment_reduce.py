"""``segment_reduce``: reductions over consecutive segments of one dimension.

``segment_reduce(data, reduce, lengths=..., axis=...)`` splits ``data`` along ``axis``
into consecutive segments of the given lengths (or between consecutive ``offsets``) and
reduces each with sum, prod, mean, max or min. ``lengths`` may carry leading batch
dimensions (``axis`` is then its last dimension): each row of ``data`` has its own
segmentation. Empty segments give ``initial`` when it is given, else the reduction's
identity (0, 1, -inf, inf; NaN for mean). With ``initial``, it joins every segment's
sum, product, max or min, and is added to a mean's numerator (not to its count).

The op is written once over refimpl's own ops (a segment id per position from
``searchsorted`` over the offsets, then ``scatter_reduce``), so the same code runs on
the CPU and, kernel by kernel, on the GPU. Its backward is torch's: the gradient of a
max or min is shared by the elements equal to the result; a product's gradient is the
product of the other elements (exact where an element is zero).
"""

from __future__ import annotations

from refimpl import _dtype as D
from refimpl._tensor import Tensor, wrap_dim
from refimpl.ops._registry import TensorSpec, defop

__all__ = ["_segment_reduce", "segment_reduce"]

_REDUCE = {"sum": "sum", "prod": "prod", "mean": "mean", "max": "amax", "amax": "amax",
           "min": "amin", "amin": "amin"}
_IDENTITY = {"sum": 0.0, "prod": 1.0, "mean": 0.0, "amax": float("-inf"),
             "amin": float("inf")}


def _kernel_name(data: Tensor, what: str) -> str:
    return f"_segment_reduce{what}_{data.device.type}"


def _check(data: Tensor, reduce: str, lengths, offsets, axis: int) -> tuple[str, int]:
    """torch's argument checks; the canonical reduction name and the wrapped axis."""
    if reduce not in _REDUCE:
        raise RuntimeError("reduce argument must be either sum, prod, mean, amax or amin, "
                           f"got {reduce}")
    if lengths is None and offsets is None:
        raise RuntimeError("segment_reduce(): Either lengths or offsets must be defined.")
    axis = wrap_dim(axis, data.dim())
    segments = lengths if lengths is not None else offsets
    if segments.dim() - 1 != axis:
        raise RuntimeError("segment_reduce(): Expected axis to be the last dimension of "
                           f"lengths but got {axis}.")
    if data.dtype not in (D.float16, D.bfloat16, D.float32, D.float64):
        raise NotImplementedError(
            f'"{_kernel_name(data, "")}" not implemented for \'{data.dtype._legacy}\'')
    if segments.dtype not in (D.int32, D.int64):
        what = "_lengths" if lengths is not None else "_offsets"
        raise NotImplementedError(
            f'"{_kernel_name(data, what)}_kernel1" not implemented for '
            f"'{segments.dtype._legacy}'")
    return _REDUCE[reduce], axis


def _meta(data: Tensor, reduce: str, *, lengths=None, indices=None, offsets=None,
          axis: int = 0, unsafe: bool = False, initial=None) -> TensorSpec:
    _, axis = _check(data, reduce, lengths, offsets, axis)
    segments = lengths.shape[-1] if lengths is not None else offsets.shape[-1] - 1
    shape = (*data.shape[:axis], segments, *data.shape[axis + 1:])
    return TensorSpec(shape, data.dtype, data.device)


def _offsets_of(lengths: Tensor, data: Tensor, axis: int, unsafe: bool) -> Tensor:
    """Offsets (a leading 0, then the running sums) of ``lengths``, checked as torch
    checks them unless ``unsafe``."""
    import refimpl as t

    if not unsafe:
        if bool((lengths < 0).any()):
            raise RuntimeError("lengths contains negative value!")
        if bool((lengths.sum(-1) != data.shape[axis]).any()):
            raise RuntimeError(
                "segment_reduce(): Expected all rows of lengths along axis to sum to "
                "data.size(lengths.dim()-1) when !unsafe.")
    zero = t.zeros((*lengths.shape[:-1], 1), dtype=D.int64, device=lengths.device)
    return t.cat([zero, lengths.to(D.int64).cumsum(-1)], -1)


def _segment_ids(offsets: Tensor, data: Tensor, axis: int) -> Tensor:
    """For each position of ``data``, 1 + its segment (0 before the first offset, S + 1
    from the last on), broadcast to ``data``'s shape."""
    import refimpl as t

    if offsets.shape[-1] > 1 and int((offsets[..., 1:] - offsets[..., :-1]).min()) < 0:
        raise RuntimeError(
            "Expected segment_length >= 0 to be true, but got false.  (Could this error "
            "message be improved?  If so, please report an enhancement request to PyTorch.)")
    n = data.shape[axis]
    lead = tuple(offsets.shape[:-1])
    positions = t.arange(n, device=data.device).expand(*lead, n).contiguous()
    ids = t.searchsorted(offsets.contiguous(), positions, right=True)
    trail = data.dim() - axis - 1
    return ids.reshape(*lead, n, *([1] * trail)).expand(*data.shape)


def _compute(data: Tensor, reduce: str, lengths, offsets, axis: int, unsafe: bool,
             initial) -> tuple[Tensor, Tensor, Tensor]:
    """The result (in ``data``'s dtype), the segment ids and the segment lengths."""
    import refimpl as t
    from refimpl.autograd.grad_mode import no_grad

    kind, axis = _check(data, reduce, lengths, offsets, axis)
    with no_grad():
        if lengths is not None:
            offsets = _offsets_of(lengths, data, axis, unsafe)
        else:
            offsets = offsets.to(D.int64)
        ids = _segment_ids(offsets, data, axis)
        segments = offsets.shape[-1] - 1
        work = data.float() if data.dtype in (D.float16, D.bfloat16) else data
        shape = (*data.shape[:axis], segments + 2, *data.shape[axis + 1:])
        start = _IDENTITY[kind] if initial is None else float(initial)
        acc = t.full(shape, start, dtype=work.dtype, device=data.device)
        acc = acc.scatter_reduce(axis, ids, work, "sum" if kind == "mean" else kind)
        out = acc.narrow(axis, 1, segments)
        counts = (offsets[..., 1:] - offsets[..., :-1])
        if kind == "mean":
            c = counts.reshape(*counts.shape, *([1] * (data.dim() - axis - 1))).to(work.dtype)
            if initial is None:
                out = out / c
            else:  # an empty segment keeps ``initial``
                out = t.where(c > 0, out / c.clamp(min=1), out)
        return out.to(data.dtype).contiguous(), ids, counts


def _kernel(data: Tensor, reduce: str, *, lengths=None, indices=None, offsets=None,
            axis: int = 0, unsafe: bool = False, initial=None) -> Tensor:
    if indices is not None:
        raise NotImplementedError("segment_reduce: the indices argument (unused by torch's "
                                  "kernels too) is not implemented")
    return _compute(data, reduce, lengths, offsets, axis, unsafe, initial)[0]


def _backward(ctx, grad):
    import refimpl as t

    data, reduce = ctx.args[0], ctx.args[1]
    kw = ctx.kwargs
    axis = wrap_dim(kw.get("axis", 0), data.dim())
    out, ids, counts = _compute(data.detach(), reduce, kw.get("lengths"), kw.get("offsets"),
                                kw.get("axis", 0), True, kw.get("initial"))
    kind = _REDUCE[reduce]
    pad = [0] * (2 * (data.dim() - axis - 1)) + [1, 1]
    # per-segment values padded with the "before" and "after" slots, gathered per element
    def spread(per_segment: Tensor) -> Tensor:
        padded = t.nn.functional.pad(per_segment, pad)
        return padded.gather(axis, ids)

    inside = (ids > 0) & (ids <= out.shape[axis])
    c = counts.reshape(*counts.shape, *([1] * (data.dim() - axis - 1))).to(grad.dtype)
    if kind == "sum":
        g = spread(grad)
    elif kind == "mean":
        g = spread(grad / c.clamp(min=1))
    elif kind in ("amax", "amin"):
        hit = (data == spread(out)) & inside
        ties = t.zeros_like(out).scatter_add(
            axis, ids.clamp(1, out.shape[axis]) - 1, hit.to(grad.dtype))
        g = t.where(hit, spread(grad / ties.clamp(min=1)), t.zeros_like(data))
    else:  # prod: the product of the other elements, exact where an element is zero
        zero = data == 0
        nonzero = _compute(t.where(zero, t.ones_like(data), data).detach(), reduce,
                           kw.get("lengths"), kw.get("offsets"), kw.get("axis", 0), True,
                           kw.get("initial"))[0]
        zeros = t.zeros_like(out).scatter_add(
            axis, ids.clamp(1, out.shape[axis]) - 1, (zero & inside).to(grad.dtype))
        others = t.where(zero, t.where(spread(zeros) == 1, spread(nonzero),
                                       t.zeros_like(data)),
                         spread(out) / t.where(zero, t.ones_like(data), data))
        g = spread(grad) * others
    return (t.where(inside, g, t.zeros_like(data)),)


segment_reduce = defop("segment_reduce", meta=_meta, cpu=_kernel, cuda=_kernel,
                       backward=_backward, saves=("inputs",))
_segment_reduce = segment_reduce
