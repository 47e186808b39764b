"""Coverage: the seed map (which seed tests are ported) and the spec clauses' cases.

``conformance/seed-map/<document>.yaml`` lists every test of one seed document with
its status (FORMAT.md, "Seed map"). Spec clauses are read from ``spec/*.md``: a
clause is defined by a line that starts with its id in bold (``**TENSOR-012**``,
optionally after a list marker) or by a Markdown heading whose text starts with
the id (``### TENSOR-012 Title``, the id optionally in bold or backticks). Ids
mentioned anywhere else are references, not definitions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.model import NON_SEED_SOURCES, Case
from conformance.schema import Where, check_keys, need_list, need_mapping, need_str, suggest
from conformance.yamlio import CaseFileError, LDict, load_yaml

SEED_MAP_DIR = Path(__file__).resolve().parent / "seed-map"
SPEC_DIR = Path(__file__).resolve().parent.parent / "spec"
STATUSES = ("ported", "out-of-scope", "pending")
SEED_MAP_KEYS = ("document", "tests")
TEST_KEYS = ("test", "status", "cases", "tests", "reason", "note", "area", "spec")
ROOT = Path(__file__).resolve().parent.parent

_ID = r"[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)*-[0-9]+"
_BOLD_CLAUSE = re.compile(rf"^\s*(?:[-*+]\s+)?\*\*\s*({_ID})\s*[.:]?\s*\*\*\s*(.*)$")
_HEADING_CLAUSE = re.compile(rf"^#{{1,6}}\s+(?:\*\*|`)?({_ID})(?:\*\*|`)?(?=[\s.:]|$)[\s.:]*(.*)$")


@dataclass
class SeedTest:
    """One test of a seed document and what became of it."""

    document: str
    test: str
    status: str
    cases: tuple[str, ...] = ()
    reason: str | None = None
    path: str = ""
    line: int = 1
    spec: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()

    @property
    def source(self) -> str:
        """The spelling a case's ``source`` uses: ``document::Class::test``."""
        return f"{self.document}::{self.test}"


@dataclass
class SeedDocument:
    """The seed map of one document."""

    document: str
    path: str
    tests: list[SeedTest] = field(default_factory=list)


@dataclass
class Clause:
    """One spec clause: its id, title and where it is defined."""

    id: str
    title: str
    path: str
    line: int


def _seed_test(where: Where, document: str, raw: Any, line: int) -> SeedTest:
    entry = need_mapping(where, raw, line, "a seed-map test")
    check_keys(where, entry, TEST_KEYS, "seed-map test")
    for key in ("test", "status"):
        if key not in entry:
            raise where.error(entry.line, f"seed-map test has no {key!r}")
    test = need_str(where, entry["test"], entry.value_line("test"), "test")
    status = need_str(where, entry["status"], entry.value_line("status"), "status")
    if status not in STATUSES:
        raise where.error(
            entry.value_line("status"),
            f"bad status {status!r} (one of {', '.join(STATUSES)}){suggest(status, STATUSES)}",
        )
    cases: tuple[str, ...] = ()
    if "cases" in entry:
        items = need_list(where, entry["cases"], entry.value_line("cases"), "cases")
        cases = tuple(
            need_str(where, c, items.item_line(i), "case id") for i, c in enumerate(items)
        )
    tests: tuple[str, ...] = ()
    if "tests" in entry:
        items = need_list(where, entry["tests"], entry.value_line("tests"), "tests")
        tests = tuple(
            need_str(where, c, items.item_line(i), "test path") for i, c in enumerate(items)
        )
    if status == "ported" and not cases and not tests:
        raise where.error(entry.line, f"ported test {test!r} lists no cases")
    for key in ("note", "area"):
        if key in entry:
            need_str(where, entry[key], entry.value_line(key), key)
    spec: tuple[str, ...] = ()
    if "spec" in entry:
        items = need_list(where, entry["spec"], entry.value_line("spec"), "spec")
        spec = tuple(
            need_str(where, c, items.item_line(i), "clause id") for i, c in enumerate(items)
        )
    reason = None
    if "reason" in entry:
        reason = need_str(where, entry["reason"], entry.value_line("reason"), "reason")
    if status in ("out-of-scope", "pending") and reason is None:
        raise where.error(entry.line, f"{status} test {test!r} gives no 'reason'")
    return SeedTest(document, test, status, cases, reason, where.path, entry.line, spec, tests)


def load_seed_map(directory: str | Path) -> tuple[list[SeedDocument], list[CaseFileError]]:
    """Every seed-map file of ``directory`` (sorted), and the problems in them."""
    documents: list[SeedDocument] = []
    errors: list[CaseFileError] = []
    directory = Path(directory)
    files = sorted(directory.glob("*.yaml")) + sorted(directory.glob("*.yml"))
    for file in files:
        where = Where(str(file))
        try:
            data = load_yaml(file)
            if not isinstance(data, LDict):
                raise where.error(1, "top level must be a mapping with 'document' and 'tests'")
            check_keys(where, data, SEED_MAP_KEYS, "seed map")
            if "document" not in data or "tests" not in data:
                raise where.error(data.line, "seed map needs 'document' and 'tests'")
            name = need_str(where, data["document"], data.value_line("document"), "document")
            items = need_list(where, data["tests"], data.value_line("tests"), "tests")
            doc = SeedDocument(name, str(file))
            seen: dict[str, int] = {}
            for i, raw in enumerate(items):
                try:
                    test = _seed_test(where, name, raw, items.item_line(i))
                except CaseFileError as exc:
                    errors.append(exc)
                    continue
                if test.test in seen:
                    errors.append(
                        where.error(
                            test.line,
                            f"test {test.test!r} listed twice (first at line {seen[test.test]})",
                        )
                    )
                    continue
                seen[test.test] = test.line
                doc.tests.append(test)
            documents.append(doc)
        except CaseFileError as exc:
            errors.append(exc)
    return documents, errors


def parse_spec(directory: str | Path) -> tuple[dict[str, Clause], list[str]]:
    """Clause definitions of every ``*.md`` in ``directory``, and duplicate-id problems."""
    clauses: dict[str, Clause] = {}
    problems: list[str] = []
    for file in sorted(Path(directory).glob("*.md")):
        in_code = False
        for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
            if line.lstrip().startswith("```"):
                in_code = not in_code  # examples of the format inside fences are not clauses
                continue
            if in_code:
                continue
            match = _BOLD_CLAUSE.match(line) or _HEADING_CLAUSE.match(line)
            if match is None:
                continue
            clause_id, title = match.group(1), match.group(2).strip().strip("*").strip()
            if clause_id in clauses:
                first = clauses[clause_id]
                problems.append(
                    f"{file}:{number}: clause {clause_id} defined twice "
                    f"(first at {first.path}:{first.line})"
                )
                continue
            clauses[clause_id] = Clause(clause_id, title, str(file), number)
    return clauses, problems


def coverage(
    cases: list[Case], documents: list[SeedDocument], clauses: dict[str, Clause]
) -> dict[str, Any]:
    """Ported / out-of-scope / pending tests per document, cases per clause, and problems."""
    known_ids = {c.id for c in cases} | {c.base_id for c in cases}
    problems: list[str] = []
    listed = {t.source: t for doc in documents for t in doc.tests}
    # A test counts as ported only when the map says so: a case may cite a seed test whose
    # asserts it checks only in part, and that must not turn the test into a port. A
    # pending test that cases cite is listed with them as partly covered.
    by_source: dict[str, list[str]] = {}
    for case in cases:
        for source in case.sources:
            ids = by_source.setdefault(source, [])
            if case.base_id not in ids:
                ids.append(case.base_id)
    docs_out = []
    for doc in documents:
        entry: dict[str, Any] = {
            "document": doc.document,
            "path": doc.path,
            "tests": len(doc.tests),
        }
        ported, pending, partial = [], [], []
        for t in doc.tests:
            cited = by_source.get(t.source, [])
            if t.status == "ported":
                extra = [c for c in cited if c not in t.cases]
                ported.append({"test": t.test, "cases": [*t.cases, *extra], "tests": list(t.tests)})
            elif t.status == "pending":
                pending.append(t.test)
                if cited:
                    partial.append({"test": t.test, "cases": cited, "reason": t.reason})
        entry["ported"] = ported
        entry["partial"] = partial
        entry["pending_reasons"] = {t.test: t.reason for t in doc.tests if t.status == "pending"}
        entry["out_of_scope"] = [
            {"test": t.test, "reason": t.reason} for t in doc.tests if t.status == "out-of-scope"
        ]
        entry["pending"] = pending
        docs_out.append(entry)
        for test in doc.tests:
            for clause in test.spec:
                if clauses and clause not in clauses:
                    problems.append(
                        f"{test.path}:{test.line}: {test.test} cites unknown clause {clause}"
                    )
            for test_path in test.tests:
                if not (ROOT / test_path.split("::")[0]).is_file():
                    problems.append(
                        f"{test.path}:{test.line}: {test.test} names missing test file "
                        f"{test_path!r}"
                    )
            for case_id in test.cases:
                if case_id not in known_ids:
                    problems.append(
                        f"{test.path}:{test.line}: {test.test} names unknown case id {case_id!r}"
                        f"{suggest(case_id, sorted(known_ids))}"
                    )
    seen_base: set[str] = set()
    by_clause: dict[str, list[str]] = {cid: [] for cid in clauses}
    for case in cases:
        if case.base_id in seen_base:
            continue
        seen_base.add(case.base_id)
        for source in case.sources:
            if source in NON_SEED_SOURCES or source in listed:
                continue
            problems.append(
                f"{case.location}: case {case.base_id!r} cites source {source!r}, "
                "which no seed map lists"
            )
        for clause in case.spec:
            if clause in by_clause:
                by_clause[clause].append(case.base_id)
            elif clauses:
                problems.append(
                    f"{case.location}: case {case.base_id!r} cites unknown clause {clause}"
                )
    clauses_out = [
        {"id": c.id, "title": c.title, "path": c.path, "line": c.line, "cases": by_clause[c.id]}
        for c in sorted(clauses.values(), key=lambda c: (c.path, c.line))
    ]
    return {"documents": docs_out, "clauses": clauses_out, "problems": problems}
