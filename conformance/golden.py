"""Goldens: the normalised values real torch produced, stored per area.

``conformance/golden/<area>.json`` holds, for each recorded case id, the normalised
result of each ``value`` check in order (with its expression, so an edited case
does not compare against a stale golden), the torch version and the device.
Non-torch runs compare against these when present. Non-finite floats are stored
as ``{"$float": "nan" | "inf" | "-inf"}`` so that the files are strict JSON.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from conformance.model import Case, Result
from conformance.report import atomic_write

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
GOLDEN_FORMAT = 1


class GoldenError(Exception):
    """A golden file exists but cannot be used."""


def encode(value: Any) -> Any:
    """``value`` with non-finite floats made JSON-safe."""
    if isinstance(value, float) and not math.isfinite(value):
        return {"$float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    return value


def decode(value: Any) -> Any:
    """The inverse of :func:`encode`."""
    if isinstance(value, dict):
        if set(value) == {"$float"}:
            return float(value["$float"])
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def golden_path(directory: Path, area: str) -> Path:
    """The golden file of ``area``."""
    return Path(directory) / f"{area}.json"


def read_golden(path: Path) -> dict[str, Any]:
    """The ``cases`` mapping of one golden file ({} when the file does not exist)."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GoldenError(f"golden file {path} is unreadable: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cases"), dict):
        raise GoldenError(f"golden file {path} has no 'cases' mapping")
    return data["cases"]


class GoldenStore:
    """Read access to the goldens of a directory, one area file loaded on first use."""

    def __init__(self, directory: Path | str | None) -> None:
        self.directory = Path(directory) if directory is not None else None
        self._areas: dict[str, dict[str, Any] | GoldenError] = {}

    def entry(self, case: Case) -> tuple[list[dict[str, Any]], str] | None:
        """The stored values of ``case`` and a note naming torch version and device.

        Raises GoldenError when the area's golden file is corrupt.
        """
        if self.directory is None:
            return None
        area = self._areas.get(case.area)
        if area is None:
            try:
                area = read_golden(golden_path(self.directory, case.area))
            except GoldenError as exc:
                area = exc
            self._areas[case.area] = area
        if isinstance(area, GoldenError):
            raise area
        stored = area.get(case.id)
        if not isinstance(stored, dict) or not isinstance(stored.get("values"), list):
            return None
        note = f"torch {stored.get('torch_version', '?')}, {stored.get('device', '?')}"
        return decode(stored["values"]), note


def _render(area: str, cases: dict[str, Any]) -> str:
    # One case per line keeps diffs of re-recorded goldens readable.
    lines = [
        f"  {json.dumps(cid)}: {json.dumps(cases[cid], sort_keys=True, allow_nan=False)}"
        for cid in sorted(cases)
    ]
    head = f'{{\n "format": {GOLDEN_FORMAT},\n "area": {json.dumps(area)},\n "cases": {{\n'
    return head + ",\n".join(lines) + "\n }\n}\n"


def record(
    directory: Path | str, results: Iterable[tuple[Case, Result]], torch_version: str | None
) -> list[Path]:
    """Store the values of every passed case in its area's golden file; returns the files.

    Existing entries of cases not in ``results`` are kept. Each file is replaced
    atomically, so a reader never sees a half-written golden.
    """
    by_area: dict[str, dict[str, Any]] = defaultdict(dict)
    for case, result in results:
        if result.outcome == "passed" and result.values:
            by_area[case.area][case.id] = {
                "torch_version": torch_version,
                "device": case.device,
                "values": encode(result.values),
            }
    written = []
    for area, entries in sorted(by_area.items()):
        path = golden_path(Path(directory), area)
        try:
            cases = read_golden(path)
        except GoldenError:
            cases = {}  # a corrupt golden is rewritten from this run's results
        cases.update(entries)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, _render(area, cases))
        written.append(path)
    return written
