"""pytest plugin: every case under ``conformance/cases`` is a test item named by its id.

The target is ``--target NAME`` on the pytest command line, else the environment
variable ``TENSORCTL_TARGET``, else ``refimpl,torch`` (torch items skip with one
reason when torch is not installed). A comma-separated list
(``--target refimpl,torch``) runs every case once per target; the items of each
target are then grouped under a collector named after it
(``values.yaml::torch::selftest.values.add_randn``).

Cases run in the pytest process; a case's ``timeout`` becomes a
``pytest.mark.timeout`` when pytest-timeout is installed. Requirements that the
target does not meet skip the item with the reason; ``xfail`` cases are reported
as xfailed (or fail when they pass). A malformed case file is a collection error
of one line per problem.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from conformance import execute
from conformance.golden import GOLDEN_DIR, GoldenStore
from conformance.loader import DEFAULT_CASES_DIR, load_file
from conformance.model import ERROR, FAILED, PASSED, SKIPPED, XFAILED, XPASSED, Case
from conformance.targets import TargetImportError, load_target, target_missing

_TARGETS = pytest.StashKey[dict[str, tuple[Any, Any, Any, str | None]]]()
_IDS = pytest.StashKey[dict[str, tuple[str, int]]]()
DEFAULT_TIMEOUT = 60.0


class CaseFileProblem(Exception):
    """A case file that does not validate (its message is the one-line problems)."""


class CaseFailure(Exception):
    """A case that failed on the target (its message is the engine's report)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--target``: the module the conformance cases run against."""
    group = parser.getgroup("tensorctl conformance")
    group.addoption(
        "--target",
        dest="tensorctl_target",
        default=None,
        help="Target of the conformance cases: refimpl (default), torch, or a module name. "
        "Also read from TENSORCTL_TARGET.",
    )


def _target_names(config: pytest.Config) -> list[str]:
    try:
        option = config.getoption("tensorctl_target")
    except ValueError:
        option = None
    text = option or os.environ.get("TENSORCTL_TARGET") or "refimpl,torch"
    return [name.strip() for name in text.split(",") if name.strip()] or ["refimpl"]


def _target(config: pytest.Config, name: str) -> tuple[Any, Any, Any, str | None]:
    """(adapter, info, goldens, problem) of target ``name``, imported once per session."""
    targets = config.stash.setdefault(_TARGETS, {})
    if name not in targets:
        if name == "torch" and target_missing("torch"):
            targets[name] = (None, None, None, "skip: torch is not installed")
        else:
            try:
                adapter = load_target(name)
                targets[name] = (adapter, adapter.info(), GoldenStore(GOLDEN_DIR), None)
            except TargetImportError as exc:
                targets[name] = (None, None, None, str(exc))
    return targets[name]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """Collect case files under the packaged cases folder."""
    root = DEFAULT_CASES_DIR
    if file_path.suffix not in (".yaml", ".yml") or root not in file_path.resolve().parents:
        return None
    return CaseFile.from_parent(parent, path=file_path)


class CaseFile(pytest.File):
    """One case file; its items are its cases (after parameter expansion)."""

    def collect(self) -> Any:
        """Validate the file and yield one CaseItem per case."""
        path = self.path.resolve()
        parts = path.relative_to(DEFAULT_CASES_DIR).parts
        area = parts[0] if len(parts) > 1 else DEFAULT_CASES_DIR.name
        cases, errors = load_file(self.path, area)
        if errors:
            raise CaseFileProblem("\n".join(str(e) for e in errors))
        seen = self.config.stash.setdefault(_IDS, {})
        for case in cases:
            first = seen.setdefault(case.base_id, (case.path, case.line))
            if first != (case.path, case.line):
                raise CaseFileProblem(
                    f"{case.location}: duplicate case id {case.base_id!r} "
                    f"(first defined at {first[0]}:{first[1]})"
                )
        names = _target_names(self.config)
        if len(names) == 1:
            yield from _items(self, cases, names[0])
        else:
            for name in names:
                yield TargetGroup.from_parent(self, name=name, cases=cases)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:  # type: ignore[override]
        """Case-file problems as their one-line messages, without a traceback."""
        if isinstance(excinfo.value, CaseFileProblem):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


def _items(parent: pytest.Collector, cases: list[Case], target: str) -> Any:
    plugin_timeout = parent.config.pluginmanager.hasplugin("timeout")
    for case in cases:
        item = CaseItem.from_parent(parent, name=case.id, case=case, target=target)
        if plugin_timeout:
            item.add_marker(pytest.mark.timeout(case.timeout or DEFAULT_TIMEOUT))
        for tag in case.tags:
            item.extra_keyword_matches.add(tag)
        yield item


class TargetGroup(pytest.Collector):
    """The cases of one file for one target, when several targets run."""

    def __init__(self, *, cases: list[Case], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cases = cases

    def collect(self) -> Any:
        """One CaseItem per case, on this collector's target."""
        return list(_items(self, self.cases, self.name))


class CaseItem(pytest.Item):
    """One runnable case on one target."""

    def __init__(self, *, case: Case, target: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.target = target

    def runtest(self) -> None:
        """Run the case on its target and map its outcome onto pytest's."""
        adapter, info, goldens, problem = _target(self.config, self.target)
        if problem is not None:
            if problem.startswith("skip: "):
                pytest.skip(problem[6:])
            raise CaseFailure(problem)
        own_alarm = None if self.config.pluginmanager.hasplugin("timeout") else (
            self.case.timeout or DEFAULT_TIMEOUT
        )  # fmt: skip
        result = execute.run_case(self.case, adapter, info, goldens=goldens, timeout=own_alarm)
        if result.outcome == PASSED:
            return
        if result.outcome == SKIPPED:
            pytest.skip(result.message)
        if result.outcome == XFAILED:
            pytest.xfail(result.message.splitlines()[0])
        if result.outcome in (FAILED, XPASSED, ERROR):
            raise CaseFailure(
                result.message if result.outcome != ERROR else f"error: {result.message}"
            )

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        """The engine's readable message and the case's source, not a traceback."""
        if isinstance(excinfo.value, CaseFailure):
            return f"{excinfo.value}\nsource: {self.case.source_text}\ncase: {self.case.location}"
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        """Where the case is defined."""
        return self.path, self.case.line - 1, f"case {self.case.id}"
