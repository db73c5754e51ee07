"""ruff-style findings with code frames: the line that mutates, the line that saved the tensor
for backward, what will happen and how to fix it, all without opening the file."""

from __future__ import annotations

from typing import TextIO

from ..diagnostics import Applicability, Finding, Fix
from .base import Report
from .frame import Row, format_rows, frame_rows
from .style import BOLD, CYAN, Palette, severity_colour
from .text import header, location, summary


def _fix_note(fix: Fix) -> str:
    if fix.applicability is Applicability.SAFE:
        return f"[*] {fix.description} (safe)"
    return f"{fix.description} (unsafe, use --unsafe-fixes)"


def _body(finding: Finding, report: Report, palette: Palette) -> list[Row]:
    rows = frame_rows(
        report, finding.path, finding.span, palette, severity_colour(finding.severity), label=finding.code
    )

    def note(label: str, text: str) -> None:
        rows.append(Row("", f"{palette.paint(f'= {label}:', BOLD, CYAN)} {text}", bar=False))

    for related in finding.related:
        note("note", f"{location(report, related.path, related.span.start, palette)}: {related.message}")
        rows.extend(frame_rows(report, related.path, related.span, palette, CYAN, context=0))
    if finding.consequence:
        note("consequence", finding.consequence)
    if finding.help:
        note("help", finding.help)
    if finding.fix is not None:
        note("fix", _fix_note(finding.fix))
    if finding.confirmation is not None:
        note("confirm", finding.confirmation)
    return rows


def write(report: Report, stream: TextIO, color: bool) -> None:
    palette = Palette(color)
    for finding in report.findings:
        lines = [header(finding, report, palette), *format_rows(_body(finding, report, palette), palette)]
        stream.write("\n".join(lines) + "\n\n")
    stream.write(summary(report, palette) + "\n")
