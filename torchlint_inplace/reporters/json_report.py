"""Machine-readable findings with a documented, versioned schema (docs/json-schema.json).

Field names and 1-based columns follow ruff's json output, so tools that already consume
ruff's json need little change. Bump SCHEMA_VERSION on any incompatible change.
"""

from __future__ import annotations

import json
from typing import Any, TextIO

from .. import __version__
from ..diagnostics import Finding, Fix, Position, Span
from .base import Report

SCHEMA_VERSION = 1


def _location(position: Position) -> dict[str, Any]:
    return {"row": position.line, "column": position.column + 1}


def _span(report: Report, path: str, span: Span) -> dict[str, Any]:
    """`location` and `end_location`; in a notebook, rows within the `cell` they are in."""
    cell, start = report.in_cell(path, span.start)
    end = report.in_cell(path, span.end)[1]
    return {
        **({"cell": cell} if cell is not None else {}),
        "location": _location(start),
        "end_location": _location(end),
    }


def _fix(fix: Fix, report: Report, path: str) -> dict[str, Any]:
    return {
        "applicability": fix.applicability.value,
        "message": fix.description,
        "edits": [{"content": edit.content, **_span(report, path, edit.span)} for edit in fix.edits],
    }


def _finding(finding: Finding, report: Report) -> dict[str, Any]:
    return {
        "code": finding.code,
        "name": finding.name,
        "message": finding.message,
        "severity": finding.severity.value,
        "consequence": finding.consequence,
        "filename": report.display_path(finding.path),
        **_span(report, finding.path, finding.span),
        "related": [
            {
                "filename": report.display_path(related.path),
                **_span(report, related.path, related.span),
                "message": related.message,
            }
            for related in finding.related
        ],
        "help": finding.help,
        "fix": _fix(finding.fix, report, finding.path) if finding.fix is not None else None,
        **({"conditions": finding.conditions} if finding.conditions else {}),
        **({"confirmation": finding.confirmation} if finding.confirmation is not None else {}),
    }


def document(report: Report) -> dict[str, Any]:
    return {
        "version": SCHEMA_VERSION,
        "tool": "torchlint-inplace",
        "tool_version": __version__,
        "files_checked": report.files_checked,
        "fixed": report.fixed,
        "findings": [_finding(finding, report) for finding in report.findings],
    }


def write(report: Report, stream: TextIO, color: bool) -> None:
    json.dump(document(report), stream, indent=2)
    stream.write("\n")
