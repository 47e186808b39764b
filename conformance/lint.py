"""A lint of the suite: expectations that cannot fail.

A case only proves something when its checks can fail on a wrong target. This module
reads every case (its program and its checks, as Python ASTs) and reports the patterns
that make a check pass whatever the target does:

``self-comparison``
    a comparison whose two sides are the same expression once the program's simple
    aliases are resolved (``mirror = lambda: m.flag`` then ``mirror() == m.flag``); each
    branch of ``X if target == "torch" else Y`` is tried, since one target may take the
    branch that compares a value with itself.
``relative-only``
    a case whose expectations only compare results of the program with each other as
    tensors (``t.equal(a, b)``, ``allclose``: in a ``true`` check, or in the program
    with a ``value`` check of bools only, such as ``[True, True]``) and that has no
    other ``value`` check: a target that computes every result wrongly, but the same
    way, passes. One value check with a literal, a numpy expression, or no expectation
    (refimpl then compares it with the torch golden) anchors the case. Comparing inputs
    or tensors built from literals is not relative: the comparison function itself is
    then under test.
``raises-without-match``
    an expected exception with no message pattern: any error of that type passes,
    including one raised for an unrelated reason.
``vacuous-or``
    an ``or`` in a ``true`` / ``value`` expression with an operand that reads only the
    case's params, ``target`` or the environment, or an ``or`` in the program with an
    operand read from the environment (``os.environ``, ``os.getenv``): for some runs
    that operand is true and the expectation passes without looking at the target.
``isinstance-always``
    ``isinstance(x, T)`` for a builtin ``T`` where ``x`` always has that type
    (``json.dumps(...)`` is a ``str``, a list display is a ``list``).

Run it with ``tensorctl lint-cases`` (exit 1 when it finds something) or through
``tests/test_suite_lint.py``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from conformance.model import Case

RULES = {
    "self-comparison": "compares an expression with itself",
    "relative-only": "only compares the program's results with each other",
    "raises-without-match": "expects an exception without a message pattern",
    "vacuous-or": "has an 'or' that can make the expectation pass whatever the target does",
    "isinstance-always": "checks the type of a value that always has that type",
}

_COMPARE_FUNCS = {"equal", "allclose", "isclose", "assert_close", "assert_equal"}
_ALWAYS = {
    "str": ({"dumps", "str", "repr", "format", "join", "ascii", "hex", "oct", "bin"},
            (ast.JoinedStr,)),
    "list": ({"list", "sorted"}, (ast.List, ast.ListComp)),
    "dict": ({"dict"}, (ast.Dict, ast.DictComp)),
    "tuple": ({"tuple"}, (ast.Tuple,)),
    "set": ({"set"}, (ast.Set, ast.SetComp)),
    "int": ({"len", "int", "round", "hash", "id", "ord"}, ()),
    "bool": ({"bool", "callable", "isinstance", "hasattr"}, (ast.Compare,)),
    "float": ({"float"}, ()),
}


@dataclass(frozen=True, order=True)
class Finding:
    """One problem: where it is, which rule, and what the check says."""

    path: str
    line: int
    case: str
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.case}: [{self.rule}] {RULES[self.rule]}: {self.detail}"


def _parse(code: str, mode: str = "eval") -> ast.AST | None:
    try:
        return ast.parse(code, mode=mode)
    except SyntaxError:
        try:
            return ast.parse(code, mode="exec")
        except SyntaxError:  # the loader reports syntax errors; nothing to lint
            return None


class _Aliases:
    """Names the program assigns exactly once, to resolve ``x`` to what it stands for."""

    def __init__(self, program: ast.AST | None, inputs: tuple[str, ...] = ()) -> None:
        self.inputs = set(inputs)
        counts: dict[str, int] = {}
        values: dict[str, ast.expr] = {}
        self.environ: set[str] = set()
        if program is not None:
            for node in ast.walk(program):
                targets: list[ast.expr] = []
                if isinstance(node, ast.Assign):
                    targets, value = node.targets, node.value
                elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                    targets, value = [node.target], node.value
                for target in targets:
                    if isinstance(target, ast.Name):
                        counts[target.id] = counts.get(target.id, 0) + 1
                        values[target.id] = value
                        if _reads_environment(value):
                            self.environ.add(target.id)
                    else:
                        for name in ast.walk(target):
                            if isinstance(name, ast.Name):
                                counts[name.id] = counts.get(name.id, 0) + 2
        self.values = {k: v for k, v in values.items() if counts[k] == 1}

    def variants(self, node: ast.expr, depth: int = 0) -> list[str]:
        """Text forms of ``node`` per target branch, through names bound to a branch on
        ``target`` or to a lambda (a value snapshot ``before = x.v`` is not resolved: the
        program may compare it with ``x.v`` after a change)."""
        if depth > 6:
            return [ast.dump(node)]
        bound = self.values.get(node.id) if isinstance(node, ast.Name) else None
        if bound is not None and isinstance(bound, ast.IfExp) and _mentions_target(bound.test):
            return self.variants(bound, depth + 1)
        if (isinstance(node, ast.Call) and not node.args and not node.keywords
                and isinstance(node.func, ast.Name) and node.func.id in self.values):
            out = []
            for branch in _target_branches(self.values[node.func.id]):
                if isinstance(branch, ast.Lambda):
                    out.extend(self.variants(branch.body, depth + 1))
                else:
                    out.append(ast.dump(node))
            return out
        if isinstance(node, ast.IfExp) and _mentions_target(node.test):
            return [*self.variants(node.body, depth + 1), *self.variants(node.orelse, depth + 1)]
        if isinstance(node, ast.UnaryOp):
            inner = self.variants(node.operand, depth + 1)
            if inner != [ast.dump(node.operand)]:
                return [f"{type(node.op).__name__}({v})" for v in inner]
        return [ast.dump(node)]

    def computed(self, node: ast.expr) -> bool:
        """Whether ``node`` is a result the program computed: not a literal, not an input
        of the case, not a tensor built from literals (then the comparison function itself
        is what the check is about)."""
        node = self.resolve(node)
        if _is_literal(node):
            return False
        if isinstance(node, ast.Name):
            return node.id not in self.inputs
        if isinstance(node, ast.Call) and _func_name(node) in ("tensor", "as_tensor"):
            return not all(_is_literal(a) for a in node.args)
        return True

    def resolve(self, node: ast.expr, depth: int = 0) -> ast.expr:
        """``node`` with a single-assignment name replaced by its value."""
        while isinstance(node, ast.Name) and node.id in self.values and depth < 6:
            node, depth = self.values[node.id], depth + 1
        return node


def _mentions_target(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "target" for n in ast.walk(node))


def _target_branches(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.IfExp) and _mentions_target(node.test):
        return [*_target_branches(node.body), *_target_branches(node.orelse)]
    return [node]


def _reads_environment(node: ast.AST) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and n.attr in ("environ", "getenv"):
            return True
    return False


def _func_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _is_literal(node: ast.expr) -> bool:
    """A constant, or a display of constants (``[1, 2]``, ``{'a': None}``, ``-1``)."""
    if isinstance(node, ast.Constant):
        return True
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in
            ("float", "int", "complex") and all(isinstance(a, ast.Constant) for a in node.args)):
        return True  # float("nan"), float("inf")
    if isinstance(node, ast.UnaryOp):
        return _is_literal(node.operand)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(_is_literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _is_literal(k) for k in node.keys) and all(
            _is_literal(v) for v in node.values
        )
    return False


def _pairs(node: ast.AST) -> list[tuple[ast.expr, ast.expr]]:
    """The (left, right) operands of every equality-style comparison under ``node``."""
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Compare):
            left = n.left
            for op, right in zip(n.ops, n.comparators):
                if isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot, ast.LtE, ast.GtE)):
                    out.append((left, right))
                left = right
        elif isinstance(n, ast.Call) and _func_name(n) in _COMPARE_FUNCS and len(n.args) >= 2:
            out.append((n.args[0], n.args[1]))
    return out


def _self_comparisons(node: ast.AST) -> list[str]:
    """Comparisons whose two sides are written the same way (``a == a``)."""
    return [f"{ast.unparse(n.left)} vs {ast.unparse(right)}"
            for n in ast.walk(node) if isinstance(n, ast.Compare)
            for right in n.comparators[:1] if ast.dump(n.left) == ast.dump(right)]


def _target_duplicates(program: ast.AST, aliases: _Aliases) -> list[tuple[int, str]]:
    """Comparisons that, on one target's branch, are another comparison of the program:
    the "mirror" a check reads is then the very value it is compared with."""
    pairs = [(getattr(left, "lineno", 1), left, right) for left, right in _pairs(program)]
    plain = {(ast.dump(left), ast.dump(right)) for _, left, right in pairs}
    found = []
    for line, left, right in pairs:
        for lv in aliases.variants(left):
            for rv in aliases.variants(right):
                if (lv, rv) != (ast.dump(left), ast.dump(right)) and (
                    (lv, rv) in plain or lv == rv
                ):
                    found.append((line, f"{ast.unparse(left)} == {ast.unparse(right)}"))
    return sorted(set(found))


def _is_relative(node: ast.AST, aliases: _Aliases) -> bool:
    """Whether an expression compares two results of the program as tensors
    (``t.equal(a, b)``, ``allclose``) rather than with a literal."""
    if any(_is_literal(right) or _is_literal(left) for left, right in _pairs(node)
           if not isinstance(left, ast.Call) or _func_name(left) not in _COMPARE_FUNCS):
        return False  # the comparison function itself is under test: `t.equal(x, x) is False`
    calls = [n for n in ast.walk(node)
             if isinstance(n, ast.Call) and _func_name(n) in _COMPARE_FUNCS and len(n.args) >= 2]
    return bool(calls) and all(
        aliases.computed(c.args[0]) and aliases.computed(c.args[1]) for c in calls
    )


def _informative(value: object) -> bool:
    """Whether a literal says more than pass or fail (not only bools and None)."""
    if isinstance(value, (list, tuple)):
        return any(_informative(v) for v in value)
    if isinstance(value, dict):
        return any(_informative(v) for v in value.values())
    return not (isinstance(value, bool) or value is None)


def _always_type(node: ast.expr, aliases: _Aliases) -> str | None:
    node = aliases.resolve(node)
    for type_name, (funcs, nodes) in _ALWAYS.items():
        if isinstance(node, nodes):
            return type_name
        if isinstance(node, ast.Call) and _func_name(node) in funcs:
            return type_name
    return None


def _isinstance_always(node: ast.AST, aliases: _Aliases) -> list[str]:
    found = []
    for n in ast.walk(node):
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "isinstance"
                and len(n.args) == 2):
            kinds = n.args[1].elts if isinstance(n.args[1], ast.Tuple) else [n.args[1]]
            names = {k.id for k in kinds if isinstance(k, ast.Name)}
            always = _always_type(n.args[0], aliases)
            if always is not None and always in names:
                found.append(ast.unparse(n))
    return found


def _env_or(node: ast.AST, aliases: _Aliases) -> list[str]:
    found = []
    for n in ast.walk(node):
        if isinstance(n, ast.BoolOp) and isinstance(n.op, ast.Or):
            for operand in n.values:
                names = {x.id for x in ast.walk(operand) if isinstance(x, ast.Name)}
                if names & aliases.environ or _reads_environment(operand):
                    found.append(ast.unparse(n))
                    break
    return found


def _vacuous_or(node: ast.AST, fixed: set[str]) -> list[str]:
    """``or`` expressions with an operand that does not look at the target: it reads
    only ``fixed`` names (the case's params, ``target``, values from the environment)
    or constants, so for some runs it is true whatever the target computed."""
    found = []
    for n in ast.walk(node):
        if isinstance(n, ast.BoolOp) and isinstance(n.op, ast.Or):
            for operand in n.values:
                names = {x.id for x in ast.walk(operand) if isinstance(x, ast.Name)}
                if names <= fixed or _reads_environment(operand):
                    found.append(ast.unparse(n))
                    break
    return found


def lint_case(case: Case) -> list[Finding]:
    """The findings of one case."""
    found: list[Finding] = []

    def add(line: int, rule: str, detail: str) -> None:
        found.append(Finding(case.path, line, case.base_id, rule, detail))

    program = _parse(case.program, "exec")
    aliases = _Aliases(program, tuple(i.name for i in case.inputs))
    relative: list[tuple[int, str]] = []
    if program is not None:
        for line, detail in _target_duplicates(program, aliases):
            add(case.program_line + line - 1, "self-comparison", f"on one target, {detail}")
        for node in ast.walk(program):
            if isinstance(node, ast.BoolOp):
                for detail in _env_or(node, aliases):
                    add(case.program_line + node.lineno - 1, "vacuous-or", detail)
                    break
        for detail in _isinstance_always(program, aliases):
            add(case.program_line, "isinstance-always", detail)
    if case.raises is not None and not case.raises.match:
        add(case.line, "raises-without-match", f"raises {case.raises.type}")
    absolute = False
    fixed = {*case.params, "target", *aliases.environ}
    relative_calls = [] if program is None else [
        ast.unparse(n) for n in ast.walk(program)
        if isinstance(n, ast.Call) and _func_name(n) in _COMPARE_FUNCS and _is_relative(n, aliases)
    ]
    for check in case.expect:
        if check.kind == "raises" and not check.data["raises"].match:
            add(check.line, "raises-without-match", f"{check.data['raises'].type} from {check.label}")
        if check.kind == "value":
            if "equals" in check.data and not _informative(check.data["equals"]) and relative_calls:
                # [True, True] of t.equal(a, b) computed in the program: pass/fail only
                relative.append((check.line, f"{check.label} (from {relative_calls[0]})"))
            else:
                absolute = True  # a literal, numpy, or (no expectation) the torch golden
        if check.kind not in ("true", "value"):
            continue
        tree = _parse(check.data[check.kind])
        if tree is None:
            continue
        if check.kind == "true":
            for detail in _self_comparisons(tree):
                add(check.line, "self-comparison", detail)
            if _is_relative(tree, aliases):
                relative.append((check.line, check.label))
        for detail in _vacuous_or(tree, fixed):
            add(check.line, "vacuous-or", detail)
        for detail in _isinstance_always(tree, aliases):
            add(check.line, "isinstance-always", detail)
    if relative and not absolute:
        for line, detail in relative:
            add(line, "relative-only", detail)
    return found


def lint_cases(cases: list[Case]) -> list[Finding]:
    """Findings of every case, each reported once (parameter combinations share a line)."""
    seen: set[Finding] = set()
    for case in cases:
        seen.update(lint_case(case))
    return sorted(seen)
