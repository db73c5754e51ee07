"""`--add-noqa`: every line with a finding gets a `# noqa: CODE` that suppresses exactly it, and
nothing else about the file changes."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from torchlint_inplace import add_noqa, noqa
from torchlint_inplace.cli import main
from torchlint_inplace.diagnostics import Finding, Position, Severity, Span, not_checked

HAZARD = """\
import torch
from torch import nn


class M(nn.Module):
    def forward(self, x):
        h = torch.sigmoid(x)
        h.mul_(2)
        h += 1  # keep this comment
        return h
"""


def finding(code: str, line: int) -> Finding:
    span = Span(Position(line, 0), Position(line, 1))
    return Finding("m.py", code, "name", "message", Severity.ERROR, span, "raises at backward")


def test_a_directive_is_appended_and_merged_into_an_existing_one() -> None:
    text = "a = 1\nb = 2  # noqa: TIP003\nc = 3  # type: ignore\n"
    annotated = add_noqa.annotate(
        "m.py", text, [finding("TIP002", 1), finding("TIP001", 2), finding("TIP002", 3), finding("TIP001", 1)]
    )
    assert (
        annotated.text
        == "a = 1  # noqa: TIP001, TIP002\nb = 2  # noqa: TIP001, TIP003\nc = 3  # type: ignore  # noqa: TIP002\n"
    )
    assert annotated.added == 3 and annotated.warnings == ()


def test_line_endings_and_the_last_line_without_newline_are_kept() -> None:
    annotated = add_noqa.annotate("m.py", "a = 1\r\nb = 2", [finding("TIP001", 1), finding("TIP001", 2)])
    assert annotated.text == "a = 1  # noqa: TIP001\r\nb = 2  # noqa: TIP001"


def test_a_line_that_ends_inside_a_string_or_continues_is_left_and_reported() -> None:
    text = 'x = """\nabc"""\ny = 1 + \\\n    2\nz = 3\n'
    annotated = add_noqa.annotate("m.py", text, [finding("TIP001", 1), finding("TIP001", 3), finding("TIP001", 5)])
    assert annotated.text == text.replace("z = 3", "z = 3  # noqa: TIP001")
    assert [warning.line for warning in annotated.warnings] == [1, 3]


def test_tip000_gets_no_directive() -> None:
    annotated = add_noqa.annotate("m.py", "def f(:\n", [not_checked("m.py", "syntax error")])
    assert annotated.text == "def f(:\n" and annotated.added == 0


def test_the_result_suppresses_what_it_was_made_for() -> None:
    text = "a = 1\nb = (\n    2,\n)\n"
    findings = [finding("TIP001", 1), finding("TIP002", 2)]
    annotated = add_noqa.annotate("m.py", text, findings)
    assert noqa.parse(annotated.text).filter(findings) == []


def test_add_noqa_silences_a_real_run_and_reports_the_count(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "model.py").write_text(HAZARD)
    (tmp_path / "clean.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["--isolated", "--no-cache", "--add-noqa", "."])
    assert result.exit_code == 0 and result.stdout == ""
    assert result.stderr == "Added 2 noqa directives.\n"
    assert (tmp_path / "model.py").read_text() == HAZARD.replace("h.mul_(2)", "h.mul_(2)  # noqa: TIP001").replace(
        "# keep this comment", "# keep this comment  # noqa: TIP003"
    )
    assert (tmp_path / "clean.py").read_text() == "x = 1\n"
    again = CliRunner().invoke(main, ["--isolated", "--no-cache", "."])
    assert again.exit_code == 0 and again.stdout == "All checks passed!\n"
