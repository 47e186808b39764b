"""Version ranges for ``requires.torch``: a small subset of PEP 440 specifiers.

A range is one or more comma-separated clauses ``OP VERSION`` where OP is one of
``>=``, ``<=``, ``>``, ``<``, ``==``, ``!=`` and VERSION is dotted integers, e.g.
``">=2.4, <2.12"``. ``==2.11.*`` matches every 2.11 release. Local labels
(``+cpu``) and pre-release suffixes of the installed version are ignored, so
``2.13.0+cpu`` compares as ``2.13.0``.
"""

from __future__ import annotations

import re

_CLAUSE = re.compile(r"^\s*(>=|<=|==|!=|>|<)\s*(\d+(?:\.\d+)*)(\.\*)?\s*$")


def parse_range(spec: str) -> list[tuple[str, tuple[int, ...], bool]]:
    """Parse ``spec`` into ``(op, version, wildcard)`` clauses; ValueError if malformed."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError("empty version range")
    clauses = []
    for part in spec.split(","):
        match = _CLAUSE.match(part)
        if match is None:
            raise ValueError(f"bad version clause {part.strip()!r} (expected e.g. '>=2.4')")
        op, version, star = match.groups()
        if star and op not in ("==", "!="):
            raise ValueError(f"'.*' is only allowed with == or != (in {part.strip()!r})")
        clauses.append((op, tuple(int(x) for x in version.split(".")), bool(star)))
    return clauses


def release(version: str) -> tuple[int, ...]:
    """The release numbers of a version string: ``"2.13.0+cpu"`` -> ``(2, 13, 0)``."""
    numbers = re.match(r"\s*v?(\d+(?:\.\d+)*)", version)
    if numbers is None:
        raise ValueError(f"not a version: {version!r}")
    return tuple(int(x) for x in numbers.group(1).split("."))


def _pad(a: tuple[int, ...], n: int) -> tuple[int, ...]:
    return a + (0,) * (n - len(a))


def in_range(version: str, spec: str) -> bool:
    """Whether ``version`` satisfies every clause of ``spec``."""
    have = release(version)
    for op, want, star in parse_range(spec):
        if star:
            equal = have[: len(want)] == want
            ok = equal if op == "==" else not equal
        else:
            n = max(len(have), len(want))
            a, b = _pad(have, n), _pad(want, n)
            ok = {
                ">=": a >= b,
                "<=": a <= b,
                ">": a > b,
                "<": a < b,
                "==": a == b,
                "!=": a != b,
            }[op]
        if not ok:
            return False
    return True
