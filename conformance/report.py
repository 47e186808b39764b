"""Summaries and machine-readable reports (JSON, JUnit XML) of a conformance run.

Every file is written atomically (a temporary file in the same folder, then
``os.replace``), so a report or golden is never seen half-written.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from conformance.model import ERROR, FAILED, PASSED, SKIPPED, XFAILED, XPASSED, Case, Result

SUMMARY_KEYS = ("total", "passed", "failed", "skipped", "xfailed", "errors")
#: Characters XML 1.0 cannot carry (control characters other than tab and newlines).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_text(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def atomic_write(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never a mix."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp makes the file private; a report is an ordinary readable file
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def summarize(results: Iterable[Result]) -> dict[str, int]:
    """Counts per outcome. An xpassed case counts as failed (and is also counted alone)."""
    counts = dict.fromkeys((*SUMMARY_KEYS, "xpassed"), 0)
    for result in results:
        counts["total"] += 1
        key = {
            PASSED: "passed", FAILED: "failed", SKIPPED: "skipped", XFAILED: "xfailed",
            XPASSED: "failed", ERROR: "errors",
        }[result.outcome]  # fmt: skip
        counts[key] += 1
        if result.outcome == XPASSED:
            counts["xpassed"] += 1
    return counts


def by_area(pairs: Sequence[tuple[Case, Result]]) -> dict[str, dict[str, int]]:
    """Summary counts per area, areas sorted by name."""
    areas: dict[str, list[Result]] = {}
    for case, result in pairs:
        areas.setdefault(case.area, []).append(result)
    return {area: summarize(areas[area]) for area in sorted(areas)}


def is_bad(result: Result) -> bool:
    """Whether the result makes the run fail (failed, xpassed or error)."""
    return result.outcome in (FAILED, XPASSED, ERROR)


def json_report(
    pairs: Sequence[tuple[Case, Result]], *, target: str, torch_version: str | None,
    device: str, extra: dict[str, Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The JSON report of issue 3 (plus area, source and spec of each case)."""
    return {
        "target": target,
        "torch_version": torch_version,
        "device": device,
        **(extra or {}),
        "summary": summarize(r for _, r in pairs),
        "cases": [
            {
                "id": case.id,
                "outcome": result.outcome,
                "duration": round(result.duration, 6),
                "message": result.message,
                "area": case.area,
                "source": case.source_text,
                "spec": list(case.spec),
            }
            for case, result in pairs
        ],
    }


def write_json(path: str | Path, report: dict[str, Any]) -> None:
    """Write a JSON report atomically."""
    atomic_write(path, json.dumps(report, indent=2, allow_nan=False) + "\n")


def junit_xml(pairs: Sequence[tuple[Case, Result]], *, target: str) -> str:
    """A JUnit XML document: one testsuite per area, one testcase per case.

    xfailed cases are ``skipped`` with type ``xfail``; xpassed cases are failures.
    """
    root = ET.Element("testsuites", name=f"tensorctl conformance ({target})")
    totals = summarize(r for _, r in pairs)
    groups: dict[str, list[tuple[Case, Result]]] = {}
    for case, result in pairs:
        groups.setdefault(case.area, []).append((case, result))
    for area in sorted(groups):
        members = groups[area]
        counts = summarize(r for _, r in members)
        suite = ET.SubElement(
            root, "testsuite", name=area, tests=str(counts["total"]),
            failures=str(counts["failed"]), errors=str(counts["errors"]),
            skipped=str(counts["skipped"] + counts["xfailed"]),
            time=f"{sum(r.duration for _, r in members):.6f}",
        )  # fmt: skip
        for case, result in members:
            item = ET.SubElement(
                suite, "testcase", classname=f"conformance.{area}", name=case.id,
                file=case.path, line=str(case.line), time=f"{result.duration:.6f}",
            )  # fmt: skip
            message = _xml_text(result.message)
            first_line = message.splitlines()[0] if message else ""
            if result.outcome in (FAILED, XPASSED):
                node = ET.SubElement(item, "failure", message=first_line, type=result.outcome)
                node.text = f"{message}\nsource: {case.source_text}"
            elif result.outcome == ERROR:
                node = ET.SubElement(item, "error", message=first_line)
                node.text = message
            elif result.outcome == SKIPPED:
                ET.SubElement(item, "skipped", message=message)
            elif result.outcome == XFAILED:
                ET.SubElement(item, "skipped", message=first_line, type="xfail")
    root.set("tests", str(totals["total"]))
    root.set("failures", str(totals["failed"]))
    root.set("errors", str(totals["errors"]))
    root.set("skipped", str(totals["skipped"] + totals["xfailed"]))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(path: str | Path, pairs: Sequence[tuple[Case, Result]], *, target: str) -> None:
    """Write a JUnit XML report atomically."""
    atomic_write(path, junit_xml(pairs, target=target))
