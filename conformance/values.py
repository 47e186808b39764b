"""Normalising observed values and comparing them, as FORMAT.md "Values and comparison" says.

A value seen on a target is first *normalised* into plain JSON-like data that no
longer depends on the target (so it can be stored as a golden and compared across
targets); :func:`compare` then checks it against a literal, a numpy value or
another normalised value and returns a readable description of the first
difference, or None when they agree.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: atol scales with rtol: float32's (1.3e-6, 1e-5) sets the ratio.
_ATOL_PER_RTOL = 1e-5 / 1.3e-6
_RTOL = {"float16": 1e-3, "bfloat16": 1e-2, "float32": 1.3e-6, "float64": 1e-7}
_RTOL["complex64"] = _RTOL["float32"]
_RTOL["complex128"] = _RTOL["float64"]
#: Default (rtol, atol) of each floating dtype; Python floats use float64's.
TOLERANCES = {name: (rtol, rtol * _ATOL_PER_RTOL) for name, rtol in _RTOL.items()}
_SHOWN_ELEMENTS = 24
#: numpy dtype used to print values of a dtype (so float32 prints as float32).
_DISPLAY = {"float16": np.float16, "bfloat16": np.float32, "float32": np.float32}


def tolerance(dtype: str | None, rtol: float | None = None, atol: float | None = None) -> tuple:
    """``(rtol, atol)`` for values of ``dtype``, with explicit overrides; (0, 0) is exact."""
    base = TOLERANCES.get(dtype or "", (0.0, 0.0))
    return (base[0] if rtol is None else rtol, base[1] if atol is None else atol)


def _pairs(data: Any) -> Any:
    """Complex numbers in nested lists as ``[re, im]`` pairs."""
    if isinstance(data, list):
        return [_pairs(x) for x in data]
    if isinstance(data, complex):
        return [data.real, data.imag]
    return data


def normalise(value: Any, adapter: Any) -> Any:
    """The target-independent form of ``value`` (see FORMAT.md)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, complex):
        return {"complex": [value.real, value.imag]}
    if adapter.is_tensor(value):
        dtype = adapter.dtype_name(value.dtype)
        return {
            "tensor": _pairs(adapter.tensor_data(value)),
            "dtype": dtype,
            "shape": [int(n) for n in value.shape],
            "device": str(value.device),
        }
    if adapter.is_dtype(value):
        return "dtype:" + adapter.dtype_name(value)
    if adapter.is_device(value):
        return "device:" + str(value)
    if isinstance(value, np.ndarray):
        data = value.astype(np.float64) if value.dtype.kind not in "biufc" else value
        return {
            "ndarray": _pairs(data.tolist()),
            "dtype": str(value.dtype),
            "shape": list(value.shape),
        }
    if isinstance(value, np.generic):
        return normalise(value.item(), adapter)
    if isinstance(value, (list, tuple)):
        return [normalise(v, adapter) for v in value]
    if isinstance(value, dict):
        return {str(k): normalise(v, adapter) for k, v in value.items()}
    return {"object": type(value).__name__, "repr": repr(value)[:200]}


def is_array(value: Any) -> bool:
    """Whether ``value`` is a normalised tensor or numpy array."""
    return isinstance(value, dict) and ("tensor" in value or "ndarray" in value)


def short(value: Any) -> str:
    """A one-line description of a (normalised or literal) value."""
    if is_array(value):
        kind = "tensor" if "tensor" in value else "ndarray"
        device = f", {value['device']}" if "device" in value else ""
        data = value.get(kind)
        if data is not None and len(repr(data)) <= 80:
            return f"{kind}({data!r}, {value['dtype']}{device})"
        return f"{kind}({value['dtype']}, shape {value['shape']}{device})"
    if isinstance(value, np.ndarray):
        return f"ndarray({value.dtype}, shape {list(value.shape)})"
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


def _as_numbers(data: Any, complex_valued: bool) -> np.ndarray:
    array = np.asarray(data)
    if complex_valued and array.ndim and array.shape[-1] == 2:
        array = array[..., 0] + 1j * array[..., 1]
    if array.dtype.kind not in "biufc":
        array = array.astype(np.float64)
    return array


def _index(flat_index: int, shape: tuple[int, ...]) -> list[int]:
    return [int(i) for i in np.unravel_index(flat_index, shape)] if shape else []


def _fmt(array: np.ndarray) -> str:
    return np.array2string(
        array, threshold=_SHOWN_ELEMENTS, edgeitems=3, separator=", ", max_line_width=10**6
    )


def compare_arrays(
    actual: Any, dtype: str, shape: list[int], expected: Any, rtol: float, atol: float
) -> str | None:
    """Compare nested-list data of ``dtype``/``shape`` with an array-like expectation."""
    try:
        want = _as_numbers(expected, False)
    except (ValueError, TypeError) as exc:
        return f"expected value is not an array: {exc}"
    if tuple(want.shape) != tuple(shape):
        return f"shape {list(shape)} != expected shape {list(want.shape)}"
    have = _as_numbers(actual, dtype.startswith("complex")).reshape(shape)
    exact = rtol == 0 and atol == 0
    with np.errstate(invalid="ignore", over="ignore"):
        if exact or have.dtype.kind in "biu" and want.dtype.kind in "biu":
            bad = ~((have == want) | (_isnan(have) & _isnan(want)))
        else:
            bad = ~np.isclose(have, want, rtol=rtol, atol=atol, equal_nan=True)
    bad = np.asarray(bad, dtype=bool)
    count = int(bad.sum())
    if not count:
        return None
    total = int(np.prod(shape)) if shape else 1
    first = int(np.flatnonzero(bad.ravel())[0])
    tol_text = "exact" if exact else f"rtol={rtol:g}, atol={atol:g}"
    lines = [f"{count} of {total} elements differ ({dtype}, {tol_text})"]
    shown = have.astype(_DISPLAY.get(dtype, have.dtype))
    a_first, e_first = shown.ravel()[first], want.ravel()[first]
    lines.append(
        f"first mismatch at index {_index(first, tuple(shape))}: "
        f"actual {a_first}, expected {e_first}"
    )
    if have.dtype.kind in "fciu" and want.dtype.kind in "fciub":
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            diff = np.abs(have.astype(np.complex128) - want.astype(np.complex128))
            # NaN differences: infinite where they mismatch, zero where both sides agree.
            diff = np.where(np.isnan(diff), np.where(bad, np.inf, 0.0), diff)
            rel = diff / np.abs(want.astype(np.complex128))
            rel = np.where(np.isnan(rel), 0.0, rel)
        at_abs, at_rel = int(np.argmax(diff.ravel())), int(np.argmax(rel.ravel()))
        lines.append(
            f"max abs error {float(diff.ravel()[at_abs]):.6g} at {_index(at_abs, tuple(shape))}, "
            f"max rel error {float(rel.ravel()[at_rel]):.6g} at {_index(at_rel, tuple(shape))}"
        )
    if total <= _SHOWN_ELEMENTS:
        lines.append(f"actual:   {_fmt(shown)}")
        lines.append(f"expected: {_fmt(want)}")
    return "\n".join(lines)


def _isnan(array: np.ndarray) -> np.ndarray:
    if array.dtype.kind in "fc":
        return np.isnan(array)
    return np.zeros(array.shape, dtype=bool)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def compare(
    actual: Any, expected: Any, rtol: float | None = None, atol: float | None = None,
    path: str = "",
) -> str | None:  # fmt: skip
    """Compare a normalised ``actual`` with ``expected``; a description of the first
    difference, or None. ``expected`` is a YAML literal, a numpy value, or a
    normalised value (a golden)."""
    where = f"at {path}: " if path else ""
    if isinstance(expected, np.generic):
        expected = expected.item()
    if is_array(actual):
        data = actual.get("tensor", actual.get("ndarray"))
        if is_array(expected):
            for fact in ("dtype", "shape", "device"):
                if fact in expected and actual.get(fact) != expected[fact]:
                    return f"{where}{fact} {actual.get(fact)} != expected {expected[fact]}"
            want = expected.get("tensor", expected.get("ndarray"))
            if want is None or data is None:
                return None if want is None and data is None else f"{where}one side has no data"
            want = _as_numbers(want, str(expected["dtype"]).startswith("complex"))
        else:
            want = expected
        if data is None:
            return (
                f"{where}tensor has no data (device {actual.get('device')}); cannot compare values"
            )
        if isinstance(want, (dict, str)) or want is None:
            return f"{where}actual is {short(actual)}, expected {short(want)}"
        r, a = tolerance(str(actual["dtype"]), rtol, atol)
        diff = compare_arrays(data, str(actual["dtype"]), actual["shape"], want, r, a)
        return None if diff is None else where + diff
    if isinstance(expected, np.ndarray):
        expected = expected.tolist()
    if isinstance(actual, list):
        if not isinstance(expected, (list, tuple)):
            return f"{where}actual is a list {short(actual)}, expected {short(expected)}"
        if len(actual) != len(expected):
            return (
                f"{where}length {len(actual)} != expected {len(expected)}: actual {short(actual)}"
            )
        for i, (a_item, e_item) in enumerate(zip(actual, expected, strict=True)):
            diff = compare(a_item, e_item, rtol, atol, f"{path}[{i}]")
            if diff is not None:
                return diff
        return None
    if isinstance(actual, dict) and isinstance(expected, dict):
        if set(actual) != set(expected):
            return f"{where}keys {sorted(actual)} != expected {sorted(expected)}"
        for key in actual:
            diff = compare(actual[key], expected[key], rtol, atol, f"{path}.{key}")
            if diff is not None:
                return diff
        return None
    if _number(actual) and _number(expected):
        if isinstance(actual, float) or isinstance(expected, float):
            r, a = tolerance("float64", rtol, atol)
            if math.isnan(actual) and math.isnan(expected):
                return None
            if math.isclose(actual, expected, rel_tol=r, abs_tol=a) or actual == expected:
                return None
            return f"{where}actual {actual!r} != expected {expected!r} (rtol={r:g}, atol={a:g})"
        return None if actual == expected else f"{where}actual {actual!r} != expected {expected!r}"
    if type(actual) is type(expected) and actual == expected:
        return None
    return f"{where}actual {short(actual)} != expected {short(expected)}"


def check_facts(actual: Any, facts: dict[str, Any]) -> str | None:
    """Check the optional ``dtype``/``shape``/``device`` facts of a value check."""
    problems = []
    if isinstance(actual, str) and actual.startswith("dtype:") and set(facts) <= {"dtype"}:
        if "dtype" in facts and actual != "dtype:" + facts["dtype"]:
            return f"dtype is {actual[6:]}, expected {facts['dtype']}"
        return None
    if not is_array(actual):
        return f"expected a tensor (to check {', '.join(facts)}), got {short(actual)}"
    if "dtype" in facts and actual["dtype"] != facts["dtype"]:
        problems.append(f"dtype is {actual['dtype']}, expected {facts['dtype']}")
    if "shape" in facts and list(actual["shape"]) != list(facts["shape"]):
        problems.append(f"shape is {actual['shape']}, expected {facts['shape']}")
    if "device" in facts:
        device, want = str(actual.get("device")), str(facts["device"])
        if device != want and not (":" not in want and device.split(":")[0] == want):
            problems.append(f"device is {device}, expected {want}")
    return "; ".join(problems) or None
