"""``tensorctl run-conformance``, ``list-cases`` and ``coverage``: argument handling and
presentation over :mod:`conformance`; the engine itself lives there.

Exit codes: 0 everything passed, 1 failures (or coverage problems), 2 usage errors,
case-file errors or an unusable target. Expected problems are reported as one
line each on stderr, never as a traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from functools import wraps
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from conformance import golden, report, runner, seedmap
from conformance.loader import CasesPathError, load_cases
from conformance.model import ERROR, FAILED, SKIPPED, XFAILED, XPASSED, Case, Result
from conformance.selection import KeywordError, select

_STYLE = {
    "passed": "green", "failed": "red", "error": "red", "xpassed": "red",
    "skipped": "yellow", "xfailed": "yellow",
}  # fmt: skip


class _Exit(Exception):
    def __init__(self, code: int, lines: Sequence[str] = ()) -> None:
        super().__init__(code)
        self.code = code
        self.lines = list(lines)


def _fail(*lines: str, code: int = 2) -> NoReturn:
    raise _Exit(code, lines)


def _one_line_errors(func: Callable[..., int]) -> Callable[..., None]:
    """Turn _Exit into one line per problem on stderr and the exit code."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            code = func(*args, **kwargs)
        except _Exit as stop:
            for line in stop.lines:
                click.echo(line, err=True)
            code = stop.code
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            code = 130
        sys.exit(code)

    return wrapper


def _load(cases_path: str | None) -> list[Case]:
    try:
        loaded = load_cases(cases_path)
    except CasesPathError as exc:
        _fail(f"error: --cases {exc}")
    if loaded.errors:
        _fail(*(str(e) for e in loaded.errors))
    return loaded.cases


def _select(cases: list[Case], area: Sequence[str], tag: Sequence[str], keyword: str | None,
            device: Sequence[str]) -> list[Case]:  # fmt: skip
    try:
        return select(cases, areas=area, tags=tag, keyword=keyword, devices=device)
    except KeywordError as exc:
        _fail(f"error: {exc}")


def _filter_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """The options shared by run-conformance and list-cases."""
    options = [
        click.option("--cases", "cases_path", metavar="PATH",
                     help="A case file or folder (default: the packaged conformance/cases)."),
        click.option("--area", multiple=True, help="Only this area (repeatable)."),
        click.option("-k", "keyword", metavar="EXPR",
                     help="Substring of case ids, or words with and/or/not, as in pytest."),
        click.option("--tag", multiple=True, help="Only cases with this tag (repeatable)."),
        click.option("--device", multiple=True, type=click.Choice(["cpu", "cuda"]),
                     help="Only cases for this device (default: all; CUDA cases skip "
                          "when the target has no CUDA device)."),
    ]  # fmt: skip
    for option in reversed(options):
        func = option(func)
    return func


def _jobs(value: str) -> int:
    if value == "auto":
        return runner.default_jobs()
    try:
        jobs = int(value)
    except ValueError:
        _fail(f"error: -j expects a number or 'auto', got {value!r}")
    if jobs < 0:
        _fail("error: -j must be >= 0 (0 runs in this process)")
    return jobs


def _print_problem(console: Console, case: Case, result: Result) -> None:
    label = {FAILED: "FAILED", ERROR: "ERROR", XPASSED: "XPASSED"}[result.outcome]
    head = Text.assemble(
        (f"{label} ", "bold red"), (case.id, "bold"), f"  {case.location}", "\n",
        ("  source: ", "dim"), case.source_text,
    )  # fmt: skip
    console.print(head, soft_wrap=True)
    for line in result.message.splitlines():
        console.print(Text("    " + line), soft_wrap=True, highlight=False)


def _summary_table(pairs: list[tuple[Case, Result]]) -> Table:
    table = Table(title="conformance summary", title_justify="left")
    columns = ("passed", "failed", "skipped", "xfailed", "errors")
    table.add_column("area")
    for column in columns:
        table.add_column(column, justify="right")
    areas = report.by_area(pairs)
    total = report.summarize(r for _, r in pairs)
    for area, counts in [*areas.items(), ("total", total)]:
        cells = [
            Text(
                str(counts[c]),
                style=_STYLE[c if c != "errors" else "error"] if counts[c] else "dim",
            )
            for c in columns
        ]
        table.add_row(Text(area, style="bold" if area == "total" else ""), *cells)
    return table


def _device_text(devices: Sequence[str], info: Any) -> str:
    if devices:
        return ",".join(sorted(set(devices)))
    return "cpu,cuda" if info.cuda_available else "cpu"


@click.command("run-conformance")
@click.option(
    "--target",
    default="refimpl",
    show_default=True,
    help="refimpl, torch (the oracle), or any importable module name.",
)
@_filter_options
@click.option(
    "-j",
    "--jobs",
    "jobs_text",
    default="auto",
    show_default=True,
    metavar="N",
    help="Worker processes; 0 runs in this process (no crash isolation).",
)
@click.option("--fail-fast", is_flag=True, help="Stop after the first failure or error.")
@click.option(
    "--record",
    is_flag=True,
    help="Store the values of passing cases as goldens (needs --target torch).",
)
@click.option(
    "--golden-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Where goldens live (default: conformance/golden).",
)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write a JSON report.")
@click.option(
    "--junit-xml", "junit_path", type=click.Path(dir_okay=False), help="Write a JUnit XML report."
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    help="Seconds per case, unless the case sets its own.",
)
@click.option("-v", "--verbose", is_flag=True, help="Also list skipped and xfailed cases.")
@_one_line_errors
def run_conformance(
    target: str, cases_path: str | None, area: tuple[str, ...], keyword: str | None,
    tag: tuple[str, ...], device: tuple[str, ...], jobs_text: str, fail_fast: bool,
    record: bool, golden_dir: str | None, json_path: str | None, junit_path: str | None,
    timeout: float, verbose: bool,
) -> int:  # fmt: skip
    """Run the conformance cases against a target and report per area."""
    if record and target != "torch":
        _fail("error: --record needs --target torch (goldens come from real torch)")
    jobs = _jobs(jobs_text)
    cases = _select(_load(cases_path), area, tag, keyword, device)
    if not cases:
        _fail("error: no cases match the given filters")
    golden_path = Path(golden_dir) if golden_dir else golden.GOLDEN_DIR
    options = runner.RunOptions(
        target=target, jobs=jobs, timeout=timeout, fail_fast=fail_fast, record=record,
        golden_dir=golden_path,
    )  # fmt: skip
    console = Console(highlight=False)
    failing = 0
    progress = Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"), TimeElapsedColumn(),
        console=console, transient=True, disable=not console.is_terminal,
    )  # fmt: skip
    with progress:
        task = progress.add_task(target, total=len(cases), status=f"starting {target}...")

        def on_result(case: Case, result: Result) -> None:
            nonlocal failing
            failing += report.is_bad(result)
            status = Text(f"{failing} failing", style="red") if failing else ""
            progress.update(task, advance=1, status=status)

        try:
            outcome = runner.run(cases, options, on_result)
        except runner.TargetUnavailable as exc:
            progress.stop()
            _fail(f"error: {exc}")
    if outcome.notice:
        console.print(Text(outcome.notice, style="yellow"))
    for case, result in outcome.pairs:
        if report.is_bad(result):
            _print_problem(console, case, result)
    if verbose:
        for case, result in outcome.pairs:
            if result.outcome in (SKIPPED, XFAILED):
                first = result.message.splitlines()[0] if result.message else ""
                console.print(Text(f"{result.outcome.upper()} {case.id}: {first}", style="yellow"))
    info = outcome.info
    pairs = outcome.pairs
    console.print(_summary_table(pairs))
    counts = report.summarize(r for _, r in pairs)
    parts = [
        f"{counts[k]} {k}"
        for k in ("passed", "failed", "skipped", "xfailed", "errors")
        if counts[k]
    ]
    version = f" {info.version}" if info.version else ""
    line = f"target {info.name}{version} · {len(pairs)} cases · {', '.join(parts) or 'nothing run'}"
    line += f" in {outcome.duration:.2f} s"
    if outcome.not_run:
        line += f" · stopped early, {outcome.not_run} not run"
    style = "bold red" if counts["failed"] or counts["errors"] else "bold green"
    console.print(Text(line, style=style))
    device_text = _device_text(device, info)
    if json_path:
        data = report.json_report(
            pairs, target=target, torch_version=info.torch_version, device=device_text,
            extra={"target_version": info.version, "cuda_devices": info.cuda_devices,
                   "duration": round(outcome.duration, 3), "not_run": outcome.not_run},
        )  # fmt: skip
        report.write_json(json_path, data)
    if junit_path:
        report.write_junit(junit_path, pairs, target=target)
    if record:
        written = golden.record(golden_path, pairs, info.torch_version)
        console.print(f"recorded goldens: {', '.join(str(p) for p in written) or 'none'}")
    return 1 if counts["failed"] or counts["errors"] or outcome.not_run else 0


@click.command("list-cases")
@_filter_options
@click.option("--json", "as_json", is_flag=True, help="Print the cases as JSON.")
@_one_line_errors
def list_cases(
    cases_path: str | None, area: tuple[str, ...], keyword: str | None, tag: tuple[str, ...],
    device: tuple[str, ...], as_json: bool,
) -> int:  # fmt: skip
    """List the ids of the cases the filters select (validating every case file)."""
    cases = _select(_load(cases_path), area, tag, keyword, device)
    if as_json:
        rows = [
            {"id": c.id, "area": c.area, "source": c.source_text, "spec": list(c.spec),
             "tags": list(c.tags), "device": c.device, "path": c.path, "line": c.line}
            for c in cases
        ]  # fmt: skip
        click.echo(json.dumps(rows, indent=2))
    else:
        for case in cases:
            click.echo(case.id)
    return 0


@click.command("coverage")
@click.option("--cases", "cases_path", metavar="PATH", help="Case file or folder.")
@click.option(
    "--seed-map",
    "seed_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Seed-map folder (default: conformance/seed-map).",
)
@click.option(
    "--spec",
    "spec_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Spec folder (default: spec/ next to the package).",
)
@click.option(
    "--json", "json_path", metavar="PATH", help="Write the coverage as JSON ('-': stdout)."
)
@click.option("-v", "--verbose", is_flag=True, help="List every test and every clause.")
@_one_line_errors
def coverage(
    cases_path: str | None, seed_dir: str | None, spec_dir: str | None, json_path: str | None,
    verbose: bool,
) -> int:  # fmt: skip
    """Seed tests ported / out of scope / pending, and the cases of each spec clause."""
    cases = _load(cases_path)
    documents, errors = seedmap.load_seed_map(Path(seed_dir) if seed_dir else seedmap.SEED_MAP_DIR)
    if errors:
        _fail(*(str(e) for e in errors))
    spec_path = Path(spec_dir) if spec_dir else seedmap.SPEC_DIR
    clauses, spec_problems = seedmap.parse_spec(spec_path) if spec_path.is_dir() else ({}, [])
    data = seedmap.coverage(cases, documents, clauses)
    data["problems"] = spec_problems + data["problems"]
    if json_path == "-":
        click.echo(json.dumps(data, indent=2))
        return 1 if data["problems"] else 0
    if json_path:
        report.atomic_write(json_path, json.dumps(data, indent=2) + "\n")
    console = Console(highlight=False)
    _print_coverage(console, data, verbose)
    for problem in data["problems"]:
        console.print(Text(problem, style="red"), soft_wrap=True)
    return 1 if data["problems"] else 0


def _print_coverage(console: Console, data: dict[str, Any], verbose: bool) -> None:
    table = Table(title="seed documents", title_justify="left")
    for name in ("document", "tests", "ported", "out-of-scope", "pending", "cases"):
        table.add_column(name, justify="left" if name == "document" else "right")
    for doc in data["documents"]:
        n_cases = len({c for t in doc["ported"] for c in t["cases"]})
        table.add_row(doc["document"], str(doc["tests"]), str(len(doc["ported"])),
                      str(len(doc["out_of_scope"])), str(len(doc["pending"])), str(n_cases))  # fmt: skip
    console.print(table)
    if verbose:
        for doc in data["documents"]:
            console.print(Text(doc["document"], style="bold"))
            for test in doc["ported"]:
                ports = ", ".join([*test["cases"], *test.get("tests", [])])
                console.print(Text(f"  ported        {test['test']}: {ports}"), soft_wrap=True)
            for test in doc["out_of_scope"]:
                console.print(
                    Text(f"  out-of-scope  {test['test']}: {test['reason']}"), soft_wrap=True
                )
            partial = {p["test"]: p["cases"] for p in doc.get("partial", [])}
            reasons = doc.get("pending_reasons", {})
            for test in doc["pending"]:
                line = f"  pending       {test}: {reasons.get(test, '')}"
                if test in partial:
                    line += f" (cases so far: {', '.join(partial[test])})"
                console.print(Text(line), soft_wrap=True)
    by_file: dict[str, list[dict[str, Any]]] = {}
    for clause in data["clauses"]:
        by_file.setdefault(Path(clause["path"]).name, []).append(clause)
    table = Table(title="spec clauses", title_justify="left")
    for name in ("file", "clauses", "with cases", "without cases"):
        table.add_column(name, justify="left" if name == "file" else "right")
    for name, clauses in by_file.items():
        covered = sum(1 for c in clauses if c["cases"])
        table.add_row(name, str(len(clauses)), str(covered), str(len(clauses) - covered))
    console.print(table)
    if verbose:
        for clause in data["clauses"]:
            cases = ", ".join(clause["cases"]) or "-"
            console.print(Text(f"  {clause['id']}: {cases}"), soft_wrap=True)


@click.command("lint-cases")
@click.option("--cases", "cases_path", metavar="PATH", help="Case file or folder.")
@_one_line_errors
def lint_cases(cases_path: str | None) -> int:
    """Find expectations that cannot fail (conformance/lint.py lists the rules)."""
    from conformance import lint

    findings = lint.lint_cases(_load(cases_path))
    for finding in findings:
        click.echo(str(finding))
    click.echo(f"{len(findings)} finding(s)" if findings else "no findings")
    return 1 if findings else 0


COMMANDS = [run_conformance, list_cases, coverage, lint_cases]
