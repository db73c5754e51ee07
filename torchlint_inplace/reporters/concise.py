"""One line per finding, for grep, editors' quickfix lists and quick scans of large runs."""

from __future__ import annotations

from typing import TextIO

from .base import Report
from .style import Palette
from .text import header, summary


def write(report: Report, stream: TextIO, color: bool) -> None:
    palette = Palette(color)
    for finding in report.findings:
        confirmation = f" [{finding.confirmation}]" if finding.confirmation is not None else ""
        stream.write(header(finding, report, palette) + confirmation + "\n")
    stream.write(summary(report, palette) + "\n")
