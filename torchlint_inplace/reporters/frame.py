"""Code frames: the offending source lines under a line-number gutter with a caret underline,
so the reader sees the exact expression without opening the file."""

from __future__ import annotations

import unicodedata
from typing import NamedTuple

from ..diagnostics import Span
from .base import Report
from .style import BLUE, BOLD, Palette

CONTEXT_LINES = 2
TAB_WIDTH = 4


class Row(NamedTuple):
    """One output line of a finding's body; the gutter width is only known once all rows exist."""

    gutter: str  # a line number, or "" for the bar-only and underline rows
    text: str  # already painted
    bar: bool = True  # False for `= note:` lines, which hang under the gutter without a bar


def display_width(text: str) -> int:
    """Terminal columns taken by `text` from the start of a line (tabs, wide CJK, combining marks)."""
    width = 0
    for char in text.expandtabs(TAB_WIDTH):
        if unicodedata.combining(char):
            continue
        width += 2 if unicodedata.east_asian_width(char) in "WF" else 1
    return width


def _underline(text: str, span: Span) -> tuple[int, int]:
    """Offset and width of the carets; a multi-line span is underlined to the end of its first line."""
    start = min(span.start.column, len(text))
    end = span.end.column if span.end.line == span.start.line else len(text.rstrip())
    offset = display_width(text[:start])
    return offset, max(1, display_width(text[: max(start, end)]) - offset)


def _shown_lines(report: Report, path: str, line: int, context: int) -> list[int]:
    """The span's first line with up to `context` lines either side, blank edge lines dropped;
    in a notebook, only lines of the same cell."""
    cell = report.cell(path, line)
    texts = {
        n: text
        for n in range(line - context, line + context + 1)
        if (text := report.source_line(path, n)) is not None and _same_cell(report.cell(path, n), cell)
    }
    numbers = list(texts)
    while numbers and numbers[0] != line and not texts[numbers[0]].strip():
        numbers.pop(0)
    while numbers and numbers[-1] != line and not texts[numbers[-1]].strip():
        numbers.pop()
    return numbers if line in numbers else []


def _same_cell(where: tuple[int, int] | None, cell: tuple[int, int] | None) -> bool:
    return (where and where[0]) == (cell and cell[0])


def frame_rows(
    report: Report, path: str, span: Span, palette: Palette, colour: str, label: str = "", context: int = CONTEXT_LINES
) -> list[Row]:
    """Rows for the frame around `span`, or none when the source is not available."""
    numbers = _shown_lines(report, path, span.start.line, context)
    if not numbers:
        return []
    rows = [Row("", "")]
    for number in numbers:
        text = report.source_line(path, number) or ""
        where = report.cell(path, number)
        rows.append(Row(str(number if where is None else where[1]), text.expandtabs(TAB_WIDTH).rstrip()))
        if number == span.start.line:
            offset, width = _underline(text, span)
            marker = "^" * width + (f" {label}" if label else "")
            rows.append(Row("", " " * offset + palette.paint(marker, BOLD, colour)))
    rows.append(Row("", ""))
    return rows


def format_rows(rows: list[Row], palette: Palette) -> list[str]:
    width = max((len(row.gutter) for row in rows), default=0)
    lines = []
    for row in rows:
        if not row.bar:
            lines.append(f"{'':>{width}} {row.text}")
            continue
        gutter = palette.paint(f"{row.gutter:>{width}} |", BOLD, BLUE)
        lines.append(f"{gutter} {row.text}" if row.text else gutter)
    return lines
