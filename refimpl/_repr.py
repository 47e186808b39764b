"""Tensor printing in torch's exact format (spec: TENSOR-804).

``repr(t)`` and ``str(t)`` read ``tensor(<data>, <suffixes>)``:

* data: nested brackets, elements right-aligned to one common width per tensor
  (per real and imaginary part for complex tensors). Floating tensors print in one of
  three modes chosen from their non-zero finite values: *integer* mode (all values
  whole: ``1.``, ``-3.``), *fixed* (``precision`` decimals) or *scientific* (when
  max/min > 1000, max > 1e8, or, outside integer mode, min < 1e-4). Lines wrap at
  ``linewidth``; tensors with more than ``threshold`` elements are summarised with
  ``...`` keeping ``edgeitems`` at each end of every dimension.
* suffixes, in order: ``device='cuda:0'`` (devices other than the CPU), ``size=``
  (empty tensors other than 1-d, meta tensors), ``dtype=`` (dtypes other than the
  default float dtype, its complex counterpart, int64 and bool; for empty and meta
  tensors anything but the default float dtype), ``grad_fn=<AddBackward0>`` or
  ``requires_grad=True``. A suffix that would run past ``linewidth`` goes on a new
  line indented under the data.

``set_printoptions`` changes the options for every later print.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from refimpl import _dtype as D


@dataclass
class _PrintOptions:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: bool | None = None


PRINT_OPTS = _PrintOptions()
_PROFILES = {
    "default": {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80},
    "short": {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80},
    "full": {"precision": 4, "threshold": math.inf, "edgeitems": 3, "linewidth": 80},
}


def set_printoptions(precision: int | None = None, threshold: float | None = None,
                     edgeitems: int | None = None, linewidth: int | None = None,
                     profile: str | None = None, sci_mode: bool | None = None) -> None:
    """Set the options of tensor printing (torch's ``set_printoptions``).

    ``profile`` ("default", "short", "full") sets all four numeric options first; the
    other arguments then override. ``sci_mode`` is always set: True or False forces
    scientific notation on or off, None (also when omitted) lets each tensor choose.
    """
    if profile is not None:
        for key, value in _PROFILES[profile].items():
            setattr(PRINT_OPTS, key, value)
    for key, value in (("precision", precision), ("threshold", threshold),
                       ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if value is not None:
            setattr(PRINT_OPTS, key, value)
    PRINT_OPTS.sci_mode = sci_mode


def get_printoptions() -> dict:
    """The current print options as a dict."""
    return dict(PRINT_OPTS.__dict__)


class _Formatter:
    """Chooses the format and the common width of the values of one (real) array."""

    def __init__(self, values: np.ndarray, floating: bool) -> None:
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        flat = values.reshape(-1)
        precision = PRINT_OPTS.precision
        if not floating:
            for v in flat.tolist():
                self.max_width = max(self.max_width, len(str(v)))
        else:
            finite = flat[np.isfinite(flat) & (flat != 0)]
            if finite.size:
                magnitude = np.abs(finite).astype(np.float64)
                lo, hi = float(magnitude.min()), float(magnitude.max())
                self.int_mode = bool(np.all(finite == np.ceil(finite)))
                self.sci_mode = hi / lo > 1000.0 or hi > 1.0e8 or (
                    not self.int_mode and lo < 1.0e-4)
                if PRINT_OPTS.sci_mode is not None:  # forced: the widths follow it too
                    self.sci_mode = PRINT_OPTS.sci_mode
                items = finite.astype(np.float64).tolist()
                if self.sci_mode:
                    widths = [len(f"{v:.{precision}e}") for v in items]
                elif self.int_mode:
                    widths = [len(f"{v:.0f}") + 1 for v in items]
                else:
                    widths = [len(f"{v:.{precision}f}") for v in items]
                self.max_width = max(widths)
        # (an array without non-zero finite values keeps integer mode, even when
        # sci_mode is forced: torch prints its zeros as "0.")

    def width(self) -> int:
        return self.max_width

    def format(self, value) -> str:
        if self.floating:
            if self.sci_mode:
                text = f"{value:{self.max_width}.{PRINT_OPTS.precision}e}"
            elif self.int_mode:
                text = f"{value:.0f}"
                if not (math.isinf(value) or math.isnan(value)):
                    text += "."
            else:
                text = f"{value:.{PRINT_OPTS.precision}f}"
        else:
            text = f"{value}"
        return (self.max_width - len(text)) * " " + text


def _summarized(a: np.ndarray) -> np.ndarray:
    """The elements a summarised print shows (edgeitems at both ends of every dim)."""
    if a.ndim == 0:
        return a
    e = PRINT_OPTS.edgeitems
    if a.ndim == 1:
        return np.concatenate((a[:e], a[-e:])) if a.shape[0] > 2 * e else a
    if not e:
        return np.empty((0,) * a.ndim, a.dtype)
    rows = list(range(e)) + list(range(a.shape[0] - e, a.shape[0])) \
        if a.shape[0] > 2 * e else range(a.shape[0])
    return np.stack([_summarized(a[i]) for i in rows])


def _element(value, f1: _Formatter, f2: _Formatter | None) -> str:
    if f2 is None:
        return f1.format(value)
    real = f1.format(value.real)
    imag = (f2.format(value.imag) + "j").lstrip()
    return real + imag if imag[0] in "+-" else real + "+" + imag


def _vector(a: np.ndarray, indent: int, summarize: bool, f1, f2) -> str:
    length = f1.width() + 2
    if f2 is not None:
        length += f2.width() + 1
    per_line = max(1, math.floor((PRINT_OPTS.linewidth - indent) / length))
    e = PRINT_OPTS.edgeitems
    if summarize and not e:
        data = ["..."]
    elif summarize and a.shape[0] > 2 * e:
        data = ([_element(v, f1, f2) for v in a[:e].tolist()] + [" ..."]
                + [_element(v, f1, f2) for v in a[-e:].tolist()])
    else:
        data = [_element(v, f1, f2) for v in a.tolist()]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(a: np.ndarray, indent: int, summarize: bool, f1, f2) -> str:
    if a.ndim == 0:
        return _element(a.item(), f1, f2)
    if a.ndim == 1:
        return _vector(a, indent, summarize, f1, f2)
    e = PRINT_OPTS.edgeitems
    if summarize and a.shape[0] > 2 * e:
        parts = ([_nested(a[i], indent + 1, summarize, f1, f2) for i in range(e)] + ["..."]
                 + [_nested(a[i], indent + 1, summarize, f1, f2)
                    for i in range(a.shape[0] - e, a.shape[0])])
    else:
        parts = [_nested(a[i], indent + 1, summarize, f1, f2) for i in range(a.shape[0])]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(parts) + "]"


def _data_str(a: np.ndarray, dtype: D.dtype, indent: int) -> str:
    if a.size == 0:
        return "[]"
    if a.dtype.kind == "V" or dtype in (D.float16, D.bfloat16):
        a = a.astype(np.float32)  # exact: every float16/bfloat16 value is a float32
    summarize = a.size > PRINT_OPTS.threshold
    sample = _summarized(a) if summarize else a
    if dtype.is_complex:
        f1 = _Formatter(sample.real, True)
        f2 = _Formatter(sample.imag, True)
        return _nested(a, indent, summarize, f1, f2)
    return _nested(a, indent, summarize, _Formatter(sample, dtype.is_floating_point), None)


def _with_suffixes(text: str, suffixes: list, indent: int) -> str:
    parts = [text]
    last_line = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last_line + len(suffix) + 2 > PRINT_OPTS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            last_line = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def _default_device_type() -> str:
    from refimpl import _device

    getter = getattr(_device, "get_default_device", None)
    return getter().type if getter is not None else "cpu"


def tensor_repr(t) -> str:
    """``tensor([...], <suffixes>)`` exactly as torch prints ``t``."""
    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    dev = t.device
    if dev.type != _default_device_type():
        suffixes.append(f"device='{dev}'")
    default = D.get_default_dtype()
    plain = (default, D.default_complex_dtype(), D.int64, D.bool_)
    if dev.type == "meta":
        suffixes.append(f"size={tuple(t.shape)}")
        if t.dtype is not default:
            suffixes.append(f"dtype={t.dtype!r}")
        body = "..."
    elif t.numel() == 0:
        if t.dim() != 1:
            suffixes.append(f"size={tuple(t.shape)}")
        if t.dtype is not default:
            suffixes.append(f"dtype={t.dtype!r}")
        body = "[]"
    else:
        if not PRINT_OPTS.edgeitems:
            suffixes.append(f"size={tuple(t.shape)}")
        if t.dtype not in plain:
            suffixes.append(f"dtype={t.dtype!r}")
        data = t.detach()
        if dev.type != "cpu":
            data = data.cpu()
        from refimpl._math_views import resolved

        body = _data_str(np.asarray(resolved(data)._np), t.dtype, indent)
    try:
        grad_fn = t.grad_fn
        name = None if grad_fn is None else type(grad_fn).__name__
    except RuntimeError:  # a view whose history cannot be rebased (torch prints this too)
        name = "Invalid"
    if name is not None:
        suffixes.append(f"grad_fn=<{name}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    from refimpl._state import FW

    if FW.active:
        from refimpl.autograd.forward_ad import tangent_of

        tangent = tangent_of(t)
        if tangent is not None:
            suffixes.append(f"tangent={tensor_repr(tangent)}")
    return _with_suffixes(prefix + body, suffixes, indent)
