"""Finding case files, validating them and expanding each case's parameter matrix.

``load_cases(path)`` is the one entry point: it returns every runnable
:class:`~conformance.model.Case` under ``path`` together with every problem found,
each a one-line :class:`~conformance.yamlio.CaseFileError`. Nothing is run before
all files are known to be valid. Parsed files are cached per process by
(path, mtime, size), so the CLI, the pytest plugin and the benchmark pay once.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.model import Case
from conformance.schema import (
    CASE_KEYS,
    DEFAULTS_KEYS,
    DEVICE_TYPES,
    FILE_KEYS,
    ID_RE,
    PARAM_REF_RE,
    RESERVED_NAMES,
    Where,
    build_case,
    check_keys,
    need_device,
    need_dtype,
    need_list,
    need_mapping,
    need_str,
)
from conformance.yamlio import CaseFileError, LDict, LList, load_yaml

#: The cases shipped with the package.
DEFAULT_CASES_DIR = Path(__file__).resolve().parent / "cases"
CASE_SUFFIXES = (".yaml", ".yml")
#: Keys whose strings may use ``${param}``.
SUBSTITUTED_KEYS = ("inputs", "program", "expect", "raises", "warns")


class CasesPathError(Exception):
    """The path given for the cases does not exist or holds no case file."""


@dataclass
class LoadResult:
    """Every case found, in file order, and every problem found."""

    cases: list[Case] = field(default_factory=list)
    errors: list[CaseFileError] = field(default_factory=list)


_FILE_CACHE: dict[str, tuple[tuple[int, int, str], list[Case], list[CaseFileError]]] = {}


def discover(path: str | Path) -> list[tuple[Path, str]]:
    """Case files under ``path`` (a file or a folder), each with its area name.

    The area is the first folder below ``path``; a file directly in ``path`` (or
    ``path`` itself when it is a file) takes the name of the folder that holds it.
    """
    root = Path(path)
    if not root.exists():
        raise CasesPathError(f"{path}: no such file or directory")
    if root.is_file():
        return [(root, root.resolve().parent.name)]
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.endswith(CASE_SUFFIXES) and not name.startswith("."):
                file = Path(dirpath) / name
                parts = file.relative_to(root).parts
                area = parts[0] if len(parts) > 1 else root.resolve().name
                found.append((file, area))
    if not found:
        raise CasesPathError(f"{path}: no case files (*.yaml) found")
    return found


def _merge(defaults: LDict | None, case: LDict) -> LDict:
    """The case with the file's defaults under it: tags add up, requires and inputs merge
    key by key, every other key of the case replaces the default."""
    if not defaults:
        return case
    merged = LDict()
    merged.line = case.line
    merged.key_lines, merged.value_lines = {}, {}

    def put(src: LDict, key: Any, value: Any) -> None:
        merged[key] = value
        merged.key_lines[key] = src.key_line(key)
        merged.value_lines[key] = src.value_line(key)

    for key, value in defaults.items():
        put(defaults, key, value)
    for key, value in case.items():
        base = defaults.get(key)
        if key == "tags" and isinstance(base, list) and isinstance(value, list):
            joined = LList(list(base) + [v for v in value if v not in base])
            joined.line = value.line
            joined.item_lines = base.item_lines + [
                ln for v, ln in zip(value, value.item_lines, strict=False) if v not in base
            ]
            put(case, key, joined)
        elif key in ("requires", "inputs") and isinstance(base, dict) and isinstance(value, dict):
            both = LDict({**base, **value})
            both.line = value.line
            both.key_lines = {**base.key_lines, **value.key_lines}
            both.value_lines = {**base.value_lines, **value.value_lines}
            put(case, key, both)
        else:
            put(case, key, value)
    return merged


def _substitute(where: Where, value: Any, params: dict[str, Any], line: int) -> Any:
    """``value`` with every ``${name}`` replaced by the param's value, lines kept."""
    if isinstance(value, str):
        if "${" not in value:
            return value
        whole = PARAM_REF_RE.fullmatch(value)
        if whole and whole.group(1) in params:
            return params[whole.group(1)]

        def repl(match: Any) -> str:
            name = match.group(1)
            if name not in params:
                raise where.error(line, f"unknown param ${{{name}}}" + (
                    f" (params: {', '.join(params)})" if params else " (the case has no params)"
                ))  # fmt: skip
            return str(params[name])

        return PARAM_REF_RE.sub(repl, value)
    if isinstance(value, LDict):
        out = LDict(
            (k, _substitute(where, v, params, value.value_line(k))) for k, v in value.items()
        )
        out.line, out.key_lines, out.value_lines = value.line, value.key_lines, value.value_lines
        return out
    if isinstance(value, LList):
        out_list = LList(
            _substitute(where, v, params, value.item_line(i)) for i, v in enumerate(value)
        )
        out_list.line, out_list.item_lines = value.line, value.item_lines
        return out_list
    return value


def _param_combos(where: Where, data: LDict) -> list[dict[str, Any]]:
    if "params" not in data and "devices" not in data:
        return [{}]
    params = LDict()
    if "params" in data:
        params = need_mapping(where, data["params"], data.value_line("params"), "params")
    axes = []
    for name, values in params.items():
        line = params.value_line(name)
        if not isinstance(name, str) or not name.isidentifier() or name in RESERVED_NAMES:
            raise where.error(params.key_line(name), f"bad param name {name!r}")
        values = need_list(where, values, line, f"param {name!r}")
        if not values:
            raise where.error(line, f"param {name!r} has no values")
        for i, value in enumerate(values):
            item_line = values.item_line(i)
            if not isinstance(value, (str, int, float, bool)):
                raise where.error(item_line, f"param {name!r} values must be scalars")
            if name == "device":
                need_device(where, value, item_line, "param 'device'")
            elif name == "dtype" or name.endswith("_dtype"):
                need_dtype(where, value, item_line, f"param {name!r}")
        axes.append([(name, v) for v in values])
    devices = _devices(where, data)
    if devices:
        if any(axis[0][0] == "device" for axis in axes):
            raise where.error(
                data.key_line("devices"), "a case with 'devices' cannot also have a 'device' param"
            )
        axes.append([("device", d) for d in devices])
    return [dict(combo) for combo in itertools.product(*axes)]


def _devices(where: Where, data: LDict) -> list[str]:
    """The devices of a device-generic case: ``devices: all`` or a list of device types."""
    if "devices" not in data:
        return []
    value, line = data["devices"], data.value_line("devices")
    if value == "all":
        return list(DEVICE_TYPES)
    items = need_list(where, value, line, "devices (a list of device types, or all)")
    if not items:
        raise where.error(line, "devices is empty")
    out = []
    for i, item in enumerate(items):
        if item not in DEVICE_TYPES:
            raise where.error(
                items.item_line(i),
                f"bad device {item!r} in devices (one of {', '.join(DEVICE_TYPES)}, or all)",
            )
        if item in out:
            raise where.error(items.item_line(i), f"device {item!r} listed twice in devices")
        out.append(item)
    return out


def _suffix(combo: dict[str, Any]) -> str:
    if not combo:
        return ""
    parts = [str(v).lower() if isinstance(v, bool) else str(v) for v in combo.values()]
    return "[" + "-".join(parts) + "]"


def expand_case(where: Where, raw: Any, line: int, defaults: LDict | None, area: str) -> list[Case]:
    """Validate one case entry and return one Case per combination of its params."""
    entry = need_mapping(where, raw, line, "a case")
    check_keys(where, entry, CASE_KEYS, "case")
    if "id" not in entry:
        raise where.error(entry.line, "case has no 'id'")
    base_id = need_str(where, entry["id"], entry.value_line("id"), "id")
    if not ID_RE.match(base_id):
        raise where.error(
            entry.value_line("id"), f"bad id {base_id!r}: use lowercase letters, digits and _.-"
        )
    data = _merge(defaults, entry)
    cases = []
    for combo in _param_combos(where, data):
        subst = LDict(data)
        subst.line, subst.key_lines, subst.value_lines = data.line, data.key_lines, data.value_lines
        for key in SUBSTITUTED_KEYS:
            if key in data:
                subst[key] = _substitute(where, data[key], combo, data.value_line(key))
        cases.append(build_case(where, subst, base_id + _suffix(combo), base_id, area, combo))
    return cases


def load_file(path: str | Path, area: str) -> tuple[list[Case], list[CaseFileError]]:
    """Cases and errors of one file (cached until the file changes)."""
    path = Path(path)
    key = str(path)
    try:
        stat = path.stat()
        stamp = (stat.st_mtime_ns, stat.st_size, area)
    except OSError:
        stamp = (0, 0, area)
    cached = _FILE_CACHE.get(key)
    if cached is not None and cached[0] == stamp:
        return cached[1], cached[2]
    where = Where(key)
    cases: list[Case] = []
    errors: list[CaseFileError] = []
    try:
        data = load_yaml(path)
        if not isinstance(data, dict):
            kind = "a list" if isinstance(data, list) else type(data).__name__
            raise where.error(1, f"top level must be a mapping with 'cases', got {kind}")
        check_keys(where, data, FILE_KEYS, "case file")
        defaults = None
        if "defaults" in data:
            defaults = need_mapping(
                where, data["defaults"], data.value_line("defaults"), "defaults"
            )
            check_keys(where, defaults, DEFAULTS_KEYS, "defaults")
        if "cases" not in data:
            raise where.error(data.line, "case file has no 'cases' list")
        entries = need_list(where, data["cases"], data.value_line("cases"), "cases")
        if not entries:
            raise where.error(data.value_line("cases"), "'cases' is empty")
        for i, entry in enumerate(entries):
            try:
                cases.extend(expand_case(where, entry, entries.item_line(i), defaults, area))
            except CaseFileError as exc:
                errors.append(exc)
    except CaseFileError as exc:
        errors.append(exc)
    _FILE_CACHE[key] = (stamp, cases, errors)
    return cases, errors


def load_cases(path: str | Path | None = None) -> LoadResult:
    """Load, validate and expand every case under ``path`` (default: the packaged cases).

    Raises CasesPathError when ``path`` is missing or holds no case file.
    """
    result = LoadResult()
    first: dict[str, Case] = {}
    for file, area in discover(path if path is not None else DEFAULT_CASES_DIR):
        cases, errors = load_file(file, area)
        result.errors.extend(errors)
        for case in cases:
            seen = first.get(case.base_id)
            if seen is None:
                first[case.base_id] = case
            elif (seen.path, seen.line) != (case.path, case.line):
                message = f"duplicate case id {case.base_id!r} (first defined at {seen.location})"
                result.errors.append(CaseFileError(case.path, case.line, message))
                continue
            result.cases.append(case)
    result.errors = _unique(result.errors)
    return result


def _unique(errors: list[CaseFileError]) -> list[CaseFileError]:
    seen: set[str] = set()
    out = []
    for error in errors:
        if str(error) not in seen:
            seen.add(str(error))
            out.append(error)
    return out
