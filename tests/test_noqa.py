"""Suppression comments: `# noqa`, `# noqa: CODES`, and the file-level directive."""

from __future__ import annotations

import pytest
from fakes import fake_rules  # noqa: F401 - a fixture
from support import every_rule

from torchlint_inplace import noqa
from torchlint_inplace.api import lint_source
from torchlint_inplace.diagnostics import Finding, Position, Severity, Span, not_checked


def finding(code: str, line: int) -> Finding:
    span = Span(Position(line, 0), Position(line, 1))
    return Finding("m.py", code, "name", "message", Severity.ERROR, span, "raises at backward")


def kept(text: str, *findings: Finding) -> list[tuple[str, int]]:
    return [(f.code, f.line) for f in noqa.parse(text).filter(findings)]


@pytest.mark.parametrize(
    "comment",
    [
        "# noqa",
        "#noqa",
        "# NOQA",
        "# NoQa",
        "#  noqa  ",
        "# noqa: TIP001",
        "# noqa:TIP001",
        "# noqa:   TIP001",
        "# noqa: TIP003, TIP001",
        "# noqa: TIP003,TIP001",
        "# noqa: TIP003 TIP001",
        "# noqa: tip001",
        "# type: ignore  # noqa: TIP001",
        "# noqa: TIP001 because the tensor is a copy",
    ],
)
def test_directives_that_suppress_tip001(comment: str) -> None:
    assert kept(f"x.add_(1)  {comment}\n", finding("TIP001", 1)) == []


@pytest.mark.parametrize("comment", ["# noqa: TIP003", "# noqa: TIP0011", "# noqanything", "# see the noqa docs"])
def test_directives_that_do_not_suppress_tip001(comment: str) -> None:
    assert kept(f"x.add_(1)  {comment}\n", finding("TIP001", 1)) == [("TIP001", 1)]


def test_only_the_reported_line_counts() -> None:
    text = "a = 1  # noqa\nb = 2\n"
    assert kept(text, finding("TIP001", 1), finding("TIP001", 2)) == [("TIP001", 2)]


def test_noqa_inside_a_string_literal_does_not_count() -> None:
    text = 'x = "# noqa"\ny = """\n# noqa\n"""\n'
    assert kept(text, finding("TIP001", 1), finding("TIP001", 3)) == [("TIP001", 1), ("TIP001", 3)]


def test_tip000_is_never_suppressed() -> None:
    assert noqa.parse("# torchlint-inplace: noqa\nx = 1  # noqa\n").filter([not_checked("m.py", "broken")]) != []


def test_file_level_directive_on_its_own_line_disables_the_file() -> None:
    text = "import torch\n# torchlint-inplace: noqa\nx.add_(1)\n"
    assert noqa.parse(text).whole_file
    assert kept(text, finding("TIP001", 3), finding("TIP003", 1)) == []


def test_file_level_directive_with_codes_disables_only_those() -> None:
    text = "#  Torchlint-Inplace:NOQA: TIP001\nx.add_(1)\nx += 1\n"
    assert kept(text, finding("TIP001", 2), finding("TIP003", 3)) == [("TIP003", 3)]


def test_file_level_directive_after_code_is_not_a_file_directive() -> None:
    text = "x.add_(1)  # torchlint-inplace: noqa\ny.add_(1)\n"
    assert kept(text, finding("TIP001", 1), finding("TIP001", 2)) == [("TIP001", 1), ("TIP001", 2)]


def test_comments_before_a_tokenizer_error_still_count() -> None:
    text = "x.add_(1)  # noqa\ny = (\n"
    assert kept(text, finding("TIP001", 1)) == []


@pytest.mark.usefixtures("fake_rules")
def test_multi_line_statement_is_suppressed_on_its_first_line_only() -> None:
    first = "y = mutate(  # noqa: TIP001\n    x,\n)\n"
    later = "y = mutate(\n    x,  # noqa: TIP001\n)\n"
    assert lint_source(first, "m.py", every_rule()) == []
    assert [(f.code, f.line) for f in lint_source(later, "m.py", every_rule())] == [("TIP001", 1)]


@pytest.mark.usefixtures("fake_rules")
def test_lint_source_applies_noqa_and_file_directive() -> None:
    text = "mutate(1)  # noqa\nmutate(2)\nother(3)  # noqa: TIP001\n"
    assert [(f.code, f.line) for f in lint_source(text, "m.py", every_rule())] == [("TIP001", 2), ("TIP003", 3)]
    assert lint_source("# torchlint-inplace: noqa\n" + text, "m.py", every_rule()) == []
    assert [f.code for f in lint_source("# torchlint-inplace: noqa\ndef f(:\n", "m.py", every_rule())] == ["TIP000"]
