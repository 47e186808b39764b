"""Schema of a case file: every rule of FORMAT.md, checked with the line it concerns.

The functions here take what :mod:`conformance.yamlio` loaded (LDict/LList with line
numbers) and either build :mod:`conformance.model` objects or raise a
:class:`~conformance.yamlio.CaseFileError` that says ``path:line: what is wrong``.
Nothing here imports a target: a case file is judged on its own.
"""

from __future__ import annotations

import builtins
import difflib
import re
from collections.abc import Iterable
from typing import Any

from conformance import versions
from conformance.model import (
    CHECK_KINDS,
    DTYPES,
    Case,
    Check,
    ExcSpec,
    InputSpec,
    Requires,
)
from conformance.yamlio import CaseFileError, LDict, LList, plain

FILE_KEYS = ("defaults", "cases")
CASE_KEYS = (
    "id", "spec", "source", "tags", "requires", "xfail", "params", "devices", "inputs",
    "program", "expect", "raises", "warns", "timeout", "exclusive",
)  # fmt: skip
DEFAULTS_KEYS = (
    "spec", "source", "tags", "requires", "xfail", "params", "devices", "inputs", "timeout",
)  # fmt: skip
#: The device types a device-generic case (``devices: all``) runs on.
DEVICE_TYPES = ("cpu", "cuda")
REQUIRES_KEYS = ("cuda", "gpus", "torch", "targets")
GENERATORS = ("randn", "rand", "randint", "value")
INPUT_KEYS = (*GENERATORS, "dtype", "requires_grad", "device", "seed")
CHECK_KEYS: dict[str, tuple[str, ...]] = {
    "value": ("equals", "equals_np", "dtype", "shape", "device", "rtol", "atol"),
    "true": (),
    "same_storage": (),
    "is": (),
    "raises": ("eval",),
    "warns": ("eval",),
    "no_warnings": (),
    "memory": ("eval",),
}
RAISES_KEYS = ("type", "match")
WARNS_KEYS = ("category", "match", "count")
MEMORY_KEYS = ("stat", "delta", "device")
#: Names every program sees; inputs and params may not shadow them.
RESERVED_NAMES = ("t", "np", "target", "fake", "capture")

ID_RE = re.compile(r"^[a-z0-9_.-]+$")
CLAUSE_RE = re.compile(r"^[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)*-[0-9]+$")
DEVICE_RE = re.compile(r"^(cpu|cuda|meta)(:[0-9]+)?$")
PARAM_REF_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class Where:
    """The file a value came from, to raise errors at the right line."""

    def __init__(self, path: str) -> None:
        self.path = path

    def error(self, line: int, message: str) -> CaseFileError:
        """A CaseFileError at ``line`` of this file."""
        return CaseFileError(self.path, line, message)


def suggest(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` when a close choice exists, else ``""``."""
    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_keys(where: Where, data: LDict, allowed: Iterable[str], what: str) -> None:
    """Refuse keys of ``data`` that are not in ``allowed``."""
    allowed = tuple(allowed)
    for key in data:
        if key not in allowed:
            raise where.error(
                data.key_line(key), f"unknown key {key!r} in {what}{suggest(key, allowed)}"
            )


def _type_name(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    return f"{type(value).__name__} {value!r}"


def need_mapping(where: Where, value: Any, line: int, what: str) -> LDict:
    """``value`` if it is a mapping, else an error."""
    if not isinstance(value, dict):
        raise where.error(line, f"{what} must be a mapping, got {_type_name(value)}")
    return value


def need_list(where: Where, value: Any, line: int, what: str) -> LList:
    """``value`` if it is a list, else an error."""
    if not isinstance(value, list):
        raise where.error(line, f"{what} must be a list, got {_type_name(value)}")
    return value


def need_str(where: Where, value: Any, line: int, what: str) -> str:
    """``value`` if it is a non-empty string, else an error."""
    if not isinstance(value, str) or not value.strip():
        raise where.error(line, f"{what} must be a non-empty string, got {_type_name(value)}")
    return value


def need_int(where: Where, value: Any, line: int, what: str, minimum: int | None = 0) -> int:
    """``value`` if it is an integer (>= ``minimum`` unless that is None), else an error."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise where.error(line, f"{what} must be an integer, got {_type_name(value)}")
    if minimum is not None and value < minimum:
        raise where.error(line, f"{what} must be an integer >= {minimum}, got {value}")
    return value


def need_number(where: Where, value: Any, line: int, what: str) -> float:
    """``value`` if it is a non-negative number, else an error."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise where.error(line, f"{what} must be a number >= 0, got {_type_name(value)}")
    return float(value)


def need_bool(where: Where, value: Any, line: int, what: str) -> bool:
    """``value`` if it is true or false, else an error."""
    if not isinstance(value, bool):
        raise where.error(line, f"{what} must be true or false, got {_type_name(value)}")
    return value


def need_str_list(where: Where, data: LDict, key: str, what: str) -> tuple[str, ...]:
    """``data[key]`` as a tuple of non-empty strings."""
    items = need_list(where, data[key], data.value_line(key), what)
    return tuple(
        need_str(where, item, items.item_line(i), f"item {i + 1} of {what}")
        for i, item in enumerate(items)
    )


def need_dtype(where: Where, value: Any, line: int, what: str) -> str:
    """``value`` if it names a dtype of FORMAT.md, else an error."""
    name = need_str(where, value, line, what)
    if name not in DTYPES:
        raise where.error(line, f"unknown dtype {name!r} in {what}{suggest(name, DTYPES)}")
    return name


def need_device(where: Where, value: Any, line: int, what: str) -> str:
    """``value`` if it is ``cpu``, ``cuda``, ``cuda:N`` or ``meta``, else an error."""
    name = need_str(where, value, line, what)
    if not DEVICE_RE.match(name):
        raise where.error(line, f"bad device {name!r} in {what} (expected cpu, cuda, cuda:N, meta)")
    return name


def need_regex(where: Where, value: Any, line: int, what: str) -> str:
    """``value`` if it is a valid Python regular expression, else an error."""
    if not isinstance(value, str):
        raise where.error(line, f"{what} must be a regex string, got {_type_name(value)}")
    try:
        re.compile(value)
    except re.error as exc:
        raise where.error(line, f"bad regex in {what}: {exc}") from None
    return value


def need_code(where: Where, value: Any, line: int, what: str, mode: str) -> str:
    """``value`` if it is Python source that compiles in ``mode`` (eval or exec)."""
    code = need_str(where, value, line, what)
    try:
        compile(code, f"<{what}>", mode)
    except SyntaxError as exc:
        if mode == "eval":
            # `eval:` blocks may be statements; anything else must be an expression.
            raise where.error(line, f"{what} is not a Python expression: {exc.msg}") from None
        offset = (exc.lineno or 1) - 1
        raise where.error(line + offset, f"syntax error in {what}: {exc.msg}") from None
    return code


def need_exc_name(where: Where, value: Any, line: int, what: str, base: type) -> str:
    """An exception or warning class name: a builtin, or ``t.``-path resolved on the target."""
    name = need_str(where, value, line, what)
    if name.startswith("t.") and all(part.isidentifier() for part in name.split(".")):
        return name
    found = getattr(builtins, name, None)
    if isinstance(found, type) and issubclass(found, base):
        return name
    known = [n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, base)]
    kind = "warning category" if base is Warning else "exception type"
    raise where.error(
        line,
        f"unknown {kind} {name!r} in {what}{suggest(name, known)}; "
        "use a builtin name or a path on the target such as 't.cuda.SomeError'",
    )


def exc_spec(where: Where, data: Any, line: int, what: str, warning: bool) -> ExcSpec:
    """Build the ``{type, match}`` of raises or the ``{category, match, count}`` of warns."""
    spec = need_mapping(where, data, line, what)
    check_keys(where, spec, WARNS_KEYS if warning else RAISES_KEYS, what)
    head = "category" if warning else "type"
    if head not in spec:
        raise where.error(spec.line, f"{what} needs '{head}'")
    name = need_exc_name(
        where, spec[head], spec.value_line(head), f"{what}.{head}",
        Warning if warning else BaseException,
    )  # fmt: skip
    match = None
    if "match" in spec:
        match = need_regex(where, spec["match"], spec.value_line("match"), f"{what}.match")
    count = None
    if "count" in spec:
        count = need_int(where, spec["count"], spec.value_line("count"), f"{what}.count")
    return ExcSpec(name, match, count)


def requires_spec(where: Where, data: Any, line: int) -> Requires:
    """Build :class:`Requires` from the ``requires`` mapping."""
    spec = need_mapping(where, data, line, "requires")
    check_keys(where, spec, REQUIRES_KEYS, "requires")
    cuda = need_bool(where, spec.get("cuda", False), spec.value_line("cuda"), "requires.cuda")
    gpus = need_int(where, spec.get("gpus", 0), spec.value_line("gpus"), "requires.gpus")
    torch_range = None
    if "torch" in spec:
        torch_range = need_str(where, spec["torch"], spec.value_line("torch"), "requires.torch")
        try:
            versions.parse_range(torch_range)
        except ValueError as exc:
            raise where.error(
                spec.value_line("torch"), f"bad requires.torch range: {exc}"
            ) from None
    targets = None
    if "targets" in spec:
        targets = need_str_list(where, spec, "targets", "requires.targets")
    return Requires(cuda=cuda or gpus > 0, gpus=gpus, torch=torch_range, targets=targets)


def _literal_dtype(where: Where, value: Any, line: int) -> str:
    """The dtype torch.tensor would infer for a literal: bool, int64 or float32."""
    flat: list[Any] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, (bool, int, float)):
            flat.append(item)
        else:
            raise where.error(
                line, f"input value must hold numbers or bools, got {_type_name(item)}"
            )
    if flat and all(isinstance(x, bool) for x in flat):
        return "bool"
    if all(isinstance(x, int) for x in flat) and flat:
        return "int64"
    return "float32"


def _shape(where: Where, value: Any, line: int, what: str) -> tuple[int, ...]:
    items = need_list(where, value, line, what)
    return tuple(
        need_int(where, n, items.item_line(i), f"{what} size") for i, n in enumerate(items)
    )


def input_spec(
    where: Where, name: Any, data: Any, line: int, default_device: str = "cpu"
) -> InputSpec:
    """Build one :class:`InputSpec` (its generator, dtype, device, grad flag and seed).

    ``default_device`` is where an input without ``device`` goes: the case's device for a
    device-generic case, else the CPU."""
    if not isinstance(name, str) or not name.isidentifier():
        raise where.error(line, f"input name {name!r} is not a Python identifier")
    if name in RESERVED_NAMES or name.startswith("np_"):
        raise where.error(line, f"input name {name!r} is reserved")
    spec = need_mapping(where, data, line, f"input {name!r}")
    for key in spec:
        if key not in INPUT_KEYS:
            raise where.error(
                spec.key_line(key),
                f"unknown input generator or key {key!r} in input {name!r}"
                f"{suggest(key, INPUT_KEYS)} (generators: {', '.join(GENERATORS)})",
            )
    kinds = [k for k in GENERATORS if k in spec]
    if len(kinds) != 1:
        raise where.error(
            spec.line,
            f"input {name!r} needs exactly one generator of {', '.join(GENERATORS)}",
        )
    kind = kinds[0]
    arg, arg_line = spec[kind], spec.value_line(kind)
    if kind in ("randn", "rand"):
        args: Any = _shape(where, arg, arg_line, f"input {name!r} {kind} shape")
        default_dtype = "float32"
    elif kind == "randint":
        items = need_list(where, arg, arg_line, f"input {name!r} randint")
        if len(items) != 3:
            raise where.error(arg_line, f"input {name!r} randint must be [low, high, shape]")
        low = items[0] if isinstance(items[0], int) and not isinstance(items[0], bool) else None
        high = items[1] if isinstance(items[1], int) and not isinstance(items[1], bool) else None
        if low is None or high is None or low >= high:
            raise where.error(arg_line, f"input {name!r} randint needs integers low < high")
        args = (low, high, _shape(where, items[2], arg_line, f"input {name!r} randint shape"))
        default_dtype = "int64"
    else:
        args = plain(arg)
        default_dtype = _literal_dtype(where, arg, arg_line)
    dtype = default_dtype
    if "dtype" in spec:
        dtype = need_dtype(where, spec["dtype"], spec.value_line("dtype"), f"input {name!r} dtype")
    grad = need_bool(
        where, spec.get("requires_grad", False), spec.value_line("requires_grad"),
        f"input {name!r} requires_grad",
    )  # fmt: skip
    device = need_device(
        where, spec.get("device", default_device), spec.value_line("device"),
        f"input {name!r} device",
    )
    seed = None
    if "seed" in spec:
        seed = need_int(where, spec["seed"], spec.value_line("seed"), f"input {name!r} seed")
    return InputSpec(name, kind, args, dtype, grad, device, seed)


def check_spec(where: Where, data: Any, line: int, index: int) -> Check:
    """Build one :class:`Check` of ``expect`` (exactly one kind, and its fields)."""
    what = f"check {index}"
    spec = need_mapping(where, data, line, what)
    kinds = [k for k in CHECK_KINDS if k in spec]
    if not kinds:
        for key in spec:
            hint = suggest(key, CHECK_KINDS)
            if hint:
                raise where.error(spec.key_line(key), f"unknown key {key!r} in {what}{hint}")
        raise where.error(spec.line, f"{what} has no check kind (one of {', '.join(CHECK_KINDS)})")
    if len(kinds) > 1:
        raise where.error(spec.line, f"{what} has several check kinds: {', '.join(kinds)}")
    kind = kinds[0]
    check_keys(where, spec, (kind, *CHECK_KEYS[kind]), f"{kind} check")
    vline = spec.value_line(kind)
    out: dict[str, Any] = {}
    if kind in ("value", "true"):
        out[kind] = need_code(where, spec[kind], vline, f"{kind} check", "eval")
    elif kind in ("same_storage", "is"):
        pair = need_list(where, spec[kind], vline, f"{kind} check")
        if len(pair) != 2:
            raise where.error(vline, f"{kind} check needs a list of two expressions")
        out[kind] = tuple(
            need_code(where, e, pair.item_line(i), f"{kind} check", "eval")
            for i, e in enumerate(pair)
        )
    elif kind in ("raises", "warns"):
        out[kind] = exc_spec(where, spec[kind], vline, f"{kind} check", kind == "warns")
        if "eval" not in spec:
            raise where.error(
                spec.line, f"{kind} check needs 'eval' (the code that must {kind[:-1]})"
            )
    elif kind == "no_warnings":
        if spec[kind] is not True:
            raise where.error(vline, "no_warnings must be true")
        out[kind] = True
    else:  # memory
        mem = need_mapping(where, spec[kind], vline, "memory check")
        check_keys(where, mem, MEMORY_KEYS, "memory check")
        if "stat" not in mem or "delta" not in mem:
            raise where.error(mem.line, "memory check needs 'stat' and 'delta'")
        out[kind] = {
            "stat": need_str(where, mem["stat"], mem.value_line("stat"), "memory.stat"),
            "delta": need_int(where, mem["delta"], mem.value_line("delta"), "memory.delta", None),
            "device": need_device(
                where, mem.get("device", "cuda"), mem.value_line("device"), "memory.device"
            ),
        }
    if "eval" in spec:
        out["eval"] = need_code(
            where, spec["eval"], spec.value_line("eval"), f"{kind} eval", "exec"
        )
    if kind == "value":
        if "equals" in spec and "equals_np" in spec:
            raise where.error(spec.line, "value check has both 'equals' and 'equals_np'")
        if "equals" in spec:
            out["equals"] = plain(spec["equals"])
        if "equals_np" in spec:
            out["equals_np"] = need_code(
                where, spec["equals_np"], spec.value_line("equals_np"), "equals_np", "eval"
            )
        if "dtype" in spec:
            out["dtype"] = need_dtype(where, spec["dtype"], spec.value_line("dtype"), "value dtype")
        if "shape" in spec:
            out["shape"] = list(
                _shape(where, spec["shape"], spec.value_line("shape"), "value shape")
            )
        if "device" in spec:
            out["device"] = need_device(
                where, spec["device"], spec.value_line("device"), "value device"
            )
        for tol in ("rtol", "atol"):
            if tol in spec:
                out[tol] = need_number(where, spec[tol], spec.value_line(tol), tol)
    return Check(kind, spec.line, out)


def _xfail(where: Where, data: LDict) -> str | dict[str, str] | None:
    if "xfail" not in data:
        return None
    value, line = data["xfail"], data.value_line("xfail")
    if isinstance(value, dict):
        return {
            need_str(where, k, value.key_line(k), "xfail target"): need_str(
                where, v, value.value_line(k), f"xfail reason for {k!r}"
            )
            for k, v in value.items()
        }
    return need_str(where, value, line, "xfail (a reason, or a mapping target: reason)")


def build_case(
    where: Where, data: LDict, case_id: str, base_id: str, area: str, params: dict[str, Any]
) -> Case:
    """Build a :class:`Case` from one merged, parameter-substituted case mapping."""
    if "program" not in data:
        raise where.error(data.line, f"case {base_id!r} has no 'program'")
    program_line = data.value_line("program")
    program = need_str(where, data["program"], program_line, "program")
    try:
        compile(program, f"<case {case_id}>", "exec")
    except SyntaxError as exc:
        raise where.error(
            program_line + (exc.lineno or 1) - 1, f"syntax error in program: {exc.msg}"
        ) from None
    if "source" not in data:
        raise where.error(data.line, f"case {base_id!r} has no 'source' (a seed test, or research)")
    source_value = data["source"]
    if isinstance(source_value, list):
        source: str | tuple[str, ...] = need_str_list(where, data, "source", "source")
    else:
        source = need_str(where, source_value, data.value_line("source"), "source")
    spec: tuple[str, ...] = ()
    if "spec" in data:
        spec = need_str_list(where, data, "spec", "spec")
        for i, clause in enumerate(spec):
            if not CLAUSE_RE.match(clause):
                raise where.error(
                    data["spec"].item_line(i),
                    f"bad spec clause id {clause!r} (expected e.g. TENSOR-VIEW-003)",
                )
    tags = need_str_list(where, data, "tags", "tags") if "tags" in data else ()
    requires = Requires()
    if "requires" in data:
        requires = requires_spec(where, data["requires"], data.value_line("requires"))
    if any(str(v).startswith("cuda") for k, v in params.items() if k == "device"):
        requires = Requires(True, requires.gpus, requires.torch, requires.targets)
    inputs: list[InputSpec] = []
    if "inputs" in data:
        mapping = need_mapping(where, data["inputs"], data.value_line("inputs"), "inputs")
        for name, value in mapping.items():
            default_device = str(params["device"]) if "devices" in data else "cpu"
            spec_in = input_spec(where, name, value, mapping.value_line(name), default_device)
            if name in params:
                raise where.error(mapping.key_line(name), f"input {name!r} has a param's name")
            inputs.append(spec_in)
            if spec_in.device.startswith("cuda") and not requires.cuda:
                requires = Requires(True, requires.gpus, requires.torch, requires.targets)
    expect: list[Check] = []
    if "expect" in data:
        items = need_list(where, data["expect"], data.value_line("expect"), "expect")
        expect = [check_spec(where, c, items.item_line(i), i + 1) for i, c in enumerate(items)]
    raises = warns = None
    if "raises" in data:
        raises = exc_spec(where, data["raises"], data.value_line("raises"), "raises", False)
    if "warns" in data:
        warns = exc_spec(where, data["warns"], data.value_line("warns"), "warns", True)
    timeout = None
    if "timeout" in data:
        timeout = need_number(where, data["timeout"], data.value_line("timeout"), "timeout")
        if timeout <= 0:
            raise where.error(data.value_line("timeout"), "timeout must be > 0 seconds")
    exclusive = False
    if "exclusive" in data:
        exclusive = data["exclusive"]
        if not isinstance(exclusive, bool):
            raise where.error(data.value_line("exclusive"),
                              f"exclusive must be true or false, got {exclusive!r}")
    return Case(
        id=case_id, base_id=base_id, area=area, path=where.path, line=data.key_line("id"),
        program=program, program_line=program_line, source=source, spec=spec, tags=tags,
        requires=requires, xfail=_xfail(where, data), params=dict(params), inputs=tuple(inputs),
        expect=tuple(expect), raises=raises, warns=warns, timeout=timeout, exclusive=exclusive,
    )  # fmt: skip
