"""Choosing which cases run: area, tag, device and ``-k`` keyword expressions.

A keyword expression is a case-insensitive substring of the case id, or words
combined with ``and``, ``or``, ``not`` and parentheses, as in pytest:
``-k "views and not cuda"``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from conformance.model import Case

_TOKEN = re.compile(r"\s*(\(|\)|[^\s()]+)")


class KeywordError(ValueError):
    """A ``-k`` expression that cannot be parsed."""


def parse_keyword(expression: str) -> Callable[[str], bool]:
    """Compile ``-k`` ``expression`` into a predicate over case ids."""
    tokens = _TOKEN.findall(expression)
    if not tokens or "".join(tokens).strip() == "":
        raise KeywordError("empty -k expression")
    position = 0

    def peek() -> str | None:
        return tokens[position] if position < len(tokens) else None

    def take() -> str:
        nonlocal position
        token = peek()
        if token is None:
            raise KeywordError(f"-k {expression!r}: expression ends too early")
        position += 1
        return token

    def parse_or() -> Callable[[str], bool]:
        terms = [parse_and()]
        while peek() == "or":
            take()
            terms.append(parse_and())
        return terms[0] if len(terms) == 1 else lambda s: any(term(s) for term in terms)

    def parse_and() -> Callable[[str], bool]:
        terms = [parse_not()]
        while peek() == "and":
            take()
            terms.append(parse_not())
        return terms[0] if len(terms) == 1 else lambda s: all(term(s) for term in terms)

    def parse_not() -> Callable[[str], bool]:
        if peek() == "not":
            take()
            inner = parse_not()
            return lambda s: not inner(s)
        token = take()
        if token == "(":
            inner = parse_or()
            if take() != ")":
                raise KeywordError(f"-k {expression!r}: missing ')'")
            return inner
        if token in (")", "and", "or"):
            raise KeywordError(f"-k {expression!r}: unexpected {token!r}")
        word = token.lower()
        return lambda s: word in s.lower()

    predicate = parse_or()
    if position != len(tokens):
        raise KeywordError(f"-k {expression!r}: unexpected {tokens[position]!r}")
    return predicate


def select(
    cases: Iterable[Case],
    *,
    areas: Sequence[str] = (),
    tags: Sequence[str] = (),
    keyword: str | None = None,
    devices: Sequence[str] = (),
) -> list[Case]:
    """The cases in any of ``areas``, with any of ``tags``, matching ``keyword`` and
    running on one of ``devices`` (each filter is skipped when empty)."""
    match = parse_keyword(keyword) if keyword else None
    chosen = []
    for case in cases:
        if areas and case.area not in areas:
            continue
        if tags and not set(tags) & set(case.tags):
            continue
        if devices and case.device not in devices:
            continue
        if match is not None and not match(case.id):
            continue
        chosen.append(case)
    return chosen
