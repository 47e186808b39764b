"""Reading case files: YAML with line numbers kept, and one-line file errors.

Every mapping and sequence read from a case file remembers where it came from, so
that schema errors can name ``path:line``. The loader is PyYAML's safe loader (the
C parser when available) with three changes:

- mappings load as :class:`LDict` and sequences as :class:`LList`, which carry the
  1-based line of the node, of each key and of each value;
- a key written twice in one mapping is an error (PyYAML silently keeps the last);
- ``1e-6`` (an exponent without a dot) is a float, as in YAML 1.2, not a string.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

_BaseLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class CaseFileError(Exception):
    """A problem in a case (or seed-map) file, reported as ``path:line: message``."""

    def __init__(self, path: str | Path, line: int, message: str) -> None:
        super().__init__(message)
        self.path = str(path)
        self.line = max(int(line), 1)
        self.message = message

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"

    def __reduce__(self) -> tuple:
        return (CaseFileError, (self.path, self.line, self.message))


class LDict(dict):
    """A dict read from YAML that knows the lines of itself, its keys and its values."""

    line: int = 1
    key_lines: dict[Any, int]
    value_lines: dict[Any, int]

    def key_line(self, key: Any) -> int:
        """Line of ``key`` in the file (the mapping's own line when absent)."""
        return getattr(self, "key_lines", {}).get(key, self.line)

    def value_line(self, key: Any) -> int:
        """Line where the value of ``key`` starts (for block scalars: its first text line)."""
        return getattr(self, "value_lines", {}).get(key, self.key_line(key))


class LList(list):
    """A list read from YAML that knows the lines of itself and of each item."""

    line: int = 1
    item_lines: list[int]

    def item_line(self, index: int) -> int:
        """Line of item ``index`` (the list's own line when unknown)."""
        lines = getattr(self, "item_lines", [])
        return lines[index] if 0 <= index < len(lines) else self.line


def _node_line(node: yaml.Node) -> int:
    line = node.start_mark.line + 1
    # A block scalar's text starts on the line after its `|` or `>` indicator.
    if isinstance(node, yaml.ScalarNode) and node.style in ("|", ">"):
        line += 1
    return line


class _Loader(_BaseLoader):  # type: ignore[misc, valid-type]
    """Safe loader producing LDict/LList and refusing duplicate keys."""


def _construct_mapping(loader: _Loader, node: yaml.MappingNode):  # type: ignore[no-untyped-def]
    data = LDict()
    data.line = node.start_mark.line + 1
    data.key_lines = {}
    data.value_lines = {}
    yield data
    loader.flatten_mapping(node)
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key_node, yaml.ScalarNode) and (key is None or isinstance(key, bool)):
            # Keys are names: `true:` (the check kind) must stay the string "true".
            key = key_node.value
        try:
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, "a mapping key must be a plain value", key_node.start_mark
            ) from None
        if key in data:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        data[key] = loader.construct_object(value_node, deep=True)
        data.key_lines[key] = key_node.start_mark.line + 1
        data.value_lines[key] = _node_line(value_node)


def _construct_sequence(loader: _Loader, node: yaml.SequenceNode):  # type: ignore[no-untyped-def]
    data = LList()
    data.line = node.start_mark.line + 1
    data.item_lines = [_node_line(item) for item in node.value]
    yield data
    data.extend(loader.construct_object(item, deep=True) for item in node.value)


_Loader.add_constructor("tag:yaml.org,2002:map", _construct_mapping)
_Loader.add_constructor("tag:yaml.org,2002:seq", _construct_sequence)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _decode(path: Path, raw: bytes) -> str:
    """Bytes to text, or a CaseFileError naming the line of the first bad byte."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        bad = raw[exc.start : exc.start + 1].hex()
        raise CaseFileError(
            path, line, f"not a UTF-8 text file (byte 0x{bad} at offset {exc.start})"
        ) from None
    nul = text.find("\x00")
    if nul >= 0:
        raise CaseFileError(path, text.count("\n", 0, nul) + 1, "binary file (contains NUL bytes)")
    return text


def load_yaml(path: str | Path) -> Any:
    """Read and parse one YAML file; every failure becomes a one-line CaseFileError."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CaseFileError(path, 1, f"cannot read file: {exc.strerror or exc}") from None
    text = _decode(path, raw)
    if not text.strip():
        raise CaseFileError(path, 1, "empty file")
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        problem = " ".join((exc.problem or exc.context or "syntax error").split())
        if exc.context and exc.problem:
            context = " ".join(exc.context.split())
            started = exc.context_mark.line + 1 if exc.context_mark is not None else None
            if started is not None and started != line:
                context = f"{context} that starts at line {started}"
            problem = f"{problem} ({context})"
        raise CaseFileError(path, line, f"invalid YAML: {problem}") from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        raise CaseFileError(
            path, line, f"not a text file (control character #x{exc.character:02x})"
        ) from None
    except yaml.YAMLError as exc:
        raise CaseFileError(path, 1, f"invalid YAML: {' '.join(str(exc).split())}") from None


def plain(value: Any) -> Any:
    """A copy of a loaded value with LDict/LList turned back into dict/list."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
