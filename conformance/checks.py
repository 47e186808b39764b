"""The expectations of a case: one function per check kind of FORMAT.md.

Each check function returns None when the expectation holds and a readable
message when it does not. A problem of the case itself (its numpy expression
fails, say) raises :class:`CaseError`, which the runner reports as an error rather
than a failure of the target.
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

from conformance import values
from conformance.model import Case, Check, ExcSpec

#: Every case program and expression is compiled under this file name.
CODE_FILENAME = "<case>"
_CODE_CACHE: dict[tuple[str, str], Any] = {}


class CaseError(Exception):
    """The case is broken (not the target): reported with outcome ``error``."""


class CaseTimeout(BaseException):
    """Raised inside a running case when its time is up (a BaseException, so that a
    program's ``except Exception`` cannot swallow it)."""


def compiled(source: str, mode: str) -> Any:
    """``compile(source)`` in ``mode``, cached (parametrised cases share programs)."""
    key = (source, mode)
    code = _CODE_CACHE.get(key)
    if code is None:
        if mode == "eval":
            try:
                code = compile(source, CODE_FILENAME, "eval")
            except SyntaxError:
                code = compile(source, CODE_FILENAME, "exec")
        else:
            code = compile(source, CODE_FILENAME, mode)
        if len(_CODE_CACHE) > 4096:
            _CODE_CACHE.clear()
        _CODE_CACHE[key] = code
    return code


def describe_exception(exc: BaseException) -> str:
    """``Type: message`` on one line."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass
class Context:
    """What checks may read: the namespace, the program's warnings, goldens, etc."""

    case: Case
    adapter: Any
    ns: dict[str, Any]
    np_ns: dict[str, Any]
    program_warnings: list[warnings.WarningMessage] = field(default_factory=list)
    memory_before: dict[tuple[str, str], int] = field(default_factory=dict)
    golden: list[dict[str, Any]] | None = None
    golden_note: str = ""
    values: list[dict[str, Any]] = field(default_factory=list)

    def evaluate(self, source: str) -> Any:
        """Evaluate an expression (or run statements) in the case's namespace."""
        return eval(compiled(source, "eval"), self.ns)


def match_exception(adapter: Any, spec: ExcSpec, exc: BaseException | None) -> str | None:
    """None when ``exc`` is a ``spec.type`` whose message matches ``spec.match``; else why not."""
    try:
        expected = adapter.resolve_class(spec.type)
    except (AttributeError, TypeError) as err:
        return f"cannot resolve exception type {spec.type!r} on the target: {err}"
    if exc is None:
        return f"did not raise {spec.type}"
    if not isinstance(exc, expected):
        return f"raised {describe_exception(exc)}, expected {spec.type}"
    if spec.match is not None and not re.search(spec.match, str(exc)):
        return f"raised {type(exc).__name__} with message {str(exc)!r}, which does not match {spec.match!r}"
    return None


def match_warnings(
    adapter: Any, spec: ExcSpec, caught: list[warnings.WarningMessage]
) -> str | None:
    """None when ``caught`` holds one (or exactly ``count``) expected warnings; else why not."""
    try:
        category = adapter.resolve_class(spec.type)
    except (AttributeError, TypeError) as err:
        return f"cannot resolve warning category {spec.type!r} on the target: {err}"
    hits = [
        w for w in caught
        if issubclass(w.category, category)
        and (spec.match is None or re.search(spec.match, str(w.message)))
    ]  # fmt: skip
    if (spec.count is None and hits) or (spec.count is not None and len(hits) == spec.count):
        return None
    seen = "; ".join(f"{w.category.__name__}: {w.message}" for w in caught) or "none"
    want = f"{spec.type}" + (f" matching {spec.match!r}" if spec.match else "")
    if spec.count is not None:
        return f"expected {spec.count} warning(s) {want}, got {len(hits)} (warnings seen: {seen})"
    return f"expected a warning {want} (warnings seen: {seen})"


def _explain_falsy(ctx: Context, source: str, result: Any) -> str:
    """For ``a == b`` style expressions, show both sides."""
    try:
        tree = ast.parse(source, mode="eval").body
    except SyntaxError:
        tree = None
    if isinstance(tree, ast.Compare) and len(tree.ops) == 1:
        try:
            left = ctx.evaluate(ast.unparse(tree.left))
            right = ctx.evaluate(ast.unparse(tree.comparators[0]))
            return (
                f"`{source}` is false: left side {values.short(values.normalise(left, ctx.adapter))}, "
                f"right side {values.short(values.normalise(right, ctx.adapter))}"
            )
        except Exception:  # noqa: BLE001, S110 - the explanation is best effort
            pass
    return f"`{source}` is not true (it evaluated to {values.short(values.normalise(result, ctx.adapter))})"


def check_value(ctx: Context, check: Check, index: int) -> str | None:
    """``value``: normalise, check facts, compare with equals/equals_np and the golden."""
    data = check.data
    slot: dict[str, Any] = {"expr": data["value"], "value": None}
    ctx.values.append(slot)
    position = len(ctx.values) - 1
    norm = slot["value"] = values.normalise(ctx.evaluate(data["value"]), ctx.adapter)
    facts = {k: data[k] for k in ("dtype", "shape", "device") if k in data}
    problems = []
    if facts:
        problem = values.check_facts(norm, facts)
        if problem:
            problems.append(problem)
    rtol, atol = data.get("rtol"), data.get("atol")
    if "equals" in data:
        diff = values.compare(norm, data["equals"], rtol, atol)
        if diff:
            problems.append(diff)
    elif "equals_np" in data:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                expected = eval(compiled(data["equals_np"], "eval"), ctx.np_ns)
        except Exception as exc:  # noqa: BLE001 - the case's own numpy side is broken
            raise CaseError(
                f"equals_np `{data['equals_np']}` raised {describe_exception(exc)}"
            ) from None
        diff = values.compare(norm, expected, rtol, atol)
        if diff:
            problems.append(diff)
    if ctx.golden is not None and position < len(ctx.golden):
        stored = ctx.golden[position]
        if stored.get("expr") == data["value"]:
            diff = values.compare(norm, stored.get("value"), rtol, atol)
            if diff:
                problems.append(f"differs from the torch golden ({ctx.golden_note}): {diff}")
    return "\n".join(problems) or None


def check_true(ctx: Context, check: Check, index: int) -> str | None:
    """``true``: the expression is truthy."""
    result = ctx.evaluate(check.data["true"])
    return None if result else _explain_falsy(ctx, check.data["true"], result)


def check_same_storage(ctx: Context, check: Check, index: int) -> str | None:
    """``same_storage``: both tensors view one storage."""
    a_src, b_src = check.data["same_storage"]
    a, b = ctx.evaluate(a_src), ctx.evaluate(b_src)
    pa, pb = ctx.adapter.storage_ptr(a), ctx.adapter.storage_ptr(b)
    return (
        None
        if pa == pb
        else f"`{a_src}` and `{b_src}` have different storages ({pa:#x} vs {pb:#x})"
    )


def check_is(ctx: Context, check: Check, index: int) -> str | None:
    """``is``: both expressions give the same object."""
    a_src, b_src = check.data["is"]
    a, b = ctx.evaluate(a_src), ctx.evaluate(b_src)
    if a is b:
        return None
    na, nb = values.normalise(a, ctx.adapter), values.normalise(b, ctx.adapter)
    return f"`{a_src}` is not `{b_src}` ({values.short(na)} vs {values.short(nb)})"


def check_raises(ctx: Context, check: Check, index: int) -> str | None:
    """``raises`` + ``eval``: running ``eval`` raises the expected exception."""
    raised = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ctx.evaluate(check.data["eval"])
        except (Exception, SystemExit) as exc:  # noqa: BLE001
            raised = exc
    problem = match_exception(ctx.adapter, check.data["raises"], raised)
    return None if problem is None else f"`{check.data['eval']}` {problem}"


def check_warns(ctx: Context, check: Check, index: int) -> str | None:
    """``warns`` + ``eval``: running ``eval`` emits the expected warning."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            ctx.evaluate(check.data["eval"])
        except Exception as exc:  # noqa: BLE001
            return f"`{check.data['eval']}` raised {describe_exception(exc)}"
    problem = match_warnings(ctx.adapter, check.data["warns"], caught)
    return None if problem is None else f"`{check.data['eval']}`: {problem}"


def check_no_warnings(ctx: Context, check: Check, index: int) -> str | None:
    """``no_warnings``: the program emitted no warning."""
    if not ctx.program_warnings:
        return None
    seen = "; ".join(f"{w.category.__name__}: {w.message}" for w in ctx.program_warnings)
    return f"the program warned: {seen}"


def check_memory(ctx: Context, check: Check, index: int) -> str | None:
    """``memory``: a ``cuda.memory_stats`` entry changed by exactly ``delta``."""
    spec = check.data["memory"]
    stat, device = spec["stat"], spec["device"]
    if "eval" in check.data:
        before = ctx.adapter.memory_stat(stat, device)
        ctx.evaluate(check.data["eval"])
    else:
        before = ctx.memory_before[(stat, device)]
    delta = ctx.adapter.memory_stat(stat, device) - before
    if delta == spec["delta"]:
        return None
    return f"{stat} changed by {delta}, expected {spec['delta']}"


CHECKS = {
    "value": check_value,
    "true": check_true,
    "same_storage": check_same_storage,
    "is": check_is,
    "raises": check_raises,
    "warns": check_warns,
    "no_warnings": check_no_warnings,
    "memory": check_memory,
}


def run_checks(ctx: Context) -> list[str]:
    """Run every check of the case; one message per failing check."""
    failures = []
    for index, check in enumerate(ctx.case.expect, start=1):
        try:
            problem = CHECKS[check.kind](ctx, check, index)
        except (CaseError, CaseTimeout):
            raise
        except Exception as exc:  # noqa: BLE001 - a target failure inside the check
            problem = f"raised {describe_exception(exc)}"
        if problem:
            failures.append(f"check {index} ({check.label}, line {check.line}): {problem}")
    return failures
