"""GitHub Actions workflow commands: each finding becomes an annotation on the pull request diff.

Escaping follows @actions/core (command.ts): data escapes %, CR and LF; property values
additionally escape `:` and `,`, which would otherwise end the property.
"""

from __future__ import annotations

from typing import TextIO

from ..diagnostics import Finding, Severity
from .base import Report


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(finding: Finding, report: Report) -> str:
    command = "error" if finding.severity is Severity.ERROR else "warning"
    cell, start = report.in_cell(finding.path, finding.span.start)
    end = report.in_cell(finding.path, finding.span.end)[1]
    properties = {
        "file": report.display_path(finding.path),
        "line": start.line,
        "col": start.column + 1,
        "endLine": end.line,
        "endColumn": end.column + 1,
        "title": f"{finding.code} {finding.name}" + (f" (cell {cell})" if cell is not None else ""),
    }
    rendered = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items())
    message = "\n".join(part for part in (finding.message, finding.help) if part)
    if finding.confirmation is not None:
        message += f" [{finding.confirmation}]"
    return f"::{command} {rendered}::{escape_data(message)}"


def write(report: Report, stream: TextIO, color: bool) -> None:
    for finding in report.findings:
        stream.write(annotation(finding, report) + "\n")
