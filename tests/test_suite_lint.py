"""The suite lint (conformance/lint.py): each rule on a case that breaks it, and the
whole suite clean. CI runs this file, so a check that cannot fail stops the build."""

from __future__ import annotations

import textwrap
from pathlib import Path

from click.testing import CliRunner

from cli.conformance import lint_cases as lint_command
from conformance.lint import lint_cases
from conformance.loader import load_cases

# The TF32 case as it was before the lint existed: on refimpl its "mirror" of the flag was
# the flag itself, and the override variable could make every check pass.
OLD_TF32_CASE = """
  - id: flags.cublas_allow_tf32_get_set
    source: research
    program: |
      import os
      matmul = t.backends.cuda.matmul
      mirror = (t._C._get_cublas_allow_tf32 if target == "torch"
                else (lambda: matmul.allow_tf32))
      overridden = bool(int(os.environ.get("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "0")))
      orig = matmul.allow_tf32
      try:
          seen = [mirror() == orig]
          matmul.allow_tf32 = not orig
          seen.append(mirror() == (not orig) or overridden)
          seen.append(matmul.allow_tf32 == (not orig) or overridden)
      finally:
          matmul.allow_tf32 = orig
    expect:
      - value: seen
        equals: [true, true, true]
"""


def _findings(tmp_path: Path, body: str) -> list[tuple[str, int]]:
    folder = tmp_path / "cases" / "x"
    folder.mkdir(parents=True)
    (folder / "c.yaml").write_text("cases:\n" + textwrap.dedent(body))
    loaded = load_cases(tmp_path / "cases")
    assert not loaded.errors, [str(e) for e in loaded.errors]
    return [(f.rule, f.line) for f in lint_cases(loaded.cases)]


def test_the_suite_has_no_check_that_cannot_fail() -> None:
    findings = lint_cases(load_cases().cases)
    assert findings == [], "\n".join(str(f) for f in findings)


def test_old_tf32_case_is_caught(tmp_path: Path) -> None:
    found = _findings(tmp_path, OLD_TF32_CASE)
    # line 15 of the file: on refimpl the mirror read is the flag itself, so the check is
    # the one on line 16; lines 15 and 16: the override variable short-circuits both.
    assert ("self-comparison", 15) in found
    assert ("vacuous-or", 15) in found and ("vacuous-or", 16) in found


def test_raises_without_a_message_pattern(tmp_path: Path) -> None:
    found = _findings(tmp_path, """
      - id: a.one
        source: research
        program: "x = 1"
        expect:
          - raises: {type: RuntimeError}
            eval: "t.ones(2).view(3)"
          - raises: {type: RuntimeError, match: "shape"}
            eval: "t.ones(2).view(3)"
      - id: a.two
        source: research
        program: "t.ones(2).view(3)"
        raises: {type: RuntimeError}
    """)
    assert found == [("raises-without-match", 7), ("raises-without-match", 11)]


def test_or_on_a_param_and_isinstance_of_dumps(tmp_path: Path) -> None:
    found = _findings(tmp_path, """
      - id: b.one
        source: research
        params:
          mode: [a, b]
        program: |
          import json
          text = json.dumps({"k": 1})
          n = t.ones(2).sum().item()
        expect:
          - true: "mode == 'a' or n == 2.0"
          - true: "isinstance(text, str)"
          - true: "n == 2.0 or n == 3.0"
    """)
    assert found == [("vacuous-or", 12), ("isinstance-always", 13)]


def test_relative_only_needs_an_absolute_anchor(tmp_path: Path) -> None:
    body = """
      - id: c.one
        source: research
        inputs:
          a: {randn: [2], requires_grad: true}
        program: |
          t.exp(a).sum().backward()
          g1 = a.grad.clone()
          a.grad = None
          t.exp(a).sum().backward()
          g2 = a.grad
        expect:
          - true: "bool(t.equal(g1, g2))"
          - true: "g1.shape == g2.shape"
    """
    assert _findings(tmp_path, body) == [("relative-only", 14)]
    anchored = body.rstrip(" ") + '          - value: g1\n            equals_np: "np.exp(np_a)"\n'
    assert _findings(tmp_path / "again", anchored) == []


def test_command_line(tmp_path: Path) -> None:
    folder = tmp_path / "x"
    folder.mkdir()
    (folder / "c.yaml").write_text(
        "cases:\n  - {id: d.one, source: research, program: 'x = 1',"
        " expect: [{true: 'x == x'}]}\n"
    )
    result = CliRunner().invoke(lint_command, ["--cases", str(tmp_path)])
    assert result.exit_code == 1
    assert "d.one: [self-comparison]" in result.output and "1 finding(s)" in result.output
    clean = CliRunner().invoke(lint_command, [])
    assert clean.exit_code == 0 and "no findings" in clean.output


def test_seed_map_says_what_every_pending_test_waits_for() -> None:
    from conformance import seedmap

    documents, errors = seedmap.load_seed_map(seedmap.SEED_MAP_DIR)
    assert errors == []
    vague = [f"{t.document}::{t.test}" for doc in documents for t in doc.tests
             if t.status != "ported" and t.reason.strip().lower().rstrip(".") in
             ("not ported yet", "not ported", "todo", "later")]
    assert vague == []
    clauses, spec_problems = seedmap.parse_spec(seedmap.SPEC_DIR)
    data = seedmap.coverage(load_cases().cases, documents, clauses)
    assert spec_problems + data["problems"] == []


def test_bools_of_tensor_comparisons_need_an_anchor(tmp_path: Path) -> None:
    # autograd.threads.simple_backward before the lint: [True] * 10 of t.equal(...)
    body = """
      - id: e.one
        source: research
        program: |
          x = t.ones(5, 5, requires_grad=True)
          ((x + 3) * (x + 4) * 0.5).sum().backward()
          results = [bool(t.equal(x.grad, x + 3.5))]
        expect:
          - value: results
            equals: [true]
    """
    assert _findings(tmp_path, body) == [("relative-only", 10)]
    nan = """
      - id: e.two
        source: research
        program: |
          x = t.tensor([float("nan"), 1.0])
          close = t.isclose(x, x)
        expect:
          - value: close
            equals: [false, true]
    """
    assert _findings(tmp_path / "again", nan) == []
