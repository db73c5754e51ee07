"""The pieces the human-readable formats (full, concise) share: the finding's header line and
the closing summary, worded as ruff words them so users read them without thinking."""

from __future__ import annotations

from ..diagnostics import Applicability, Finding, Position
from .report import Report
from .style import BOLD, CYAN, GREEN, Palette


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def location(report: Report, path: str, position: Position, palette: Palette) -> str:
    """`path:line:col` with a 1-based column, as editors and terminals make clickable."""
    colon = palette.paint(":", CYAN)
    return f"{palette.paint(report.display_path(path), BOLD)}{colon}{position.line}{colon}{position.column + 1}"


def header(finding: Finding, report: Report, palette: Palette) -> str:
    """`path:line:col: CODE [*] message`; `[*]` marks a fix that --fix applies (safe), as in ruff."""
    fixable = finding.fix is not None and finding.fix.applicability is Applicability.SAFE
    marker = "[*] " if fixable else ""
    where = location(report, finding.path, finding.span.start, palette) + palette.paint(":", CYAN)
    return f"{where} {palette.severity(finding.code, finding.severity)} {marker}{finding.message}"


def summary(report: Report, palette: Palette) -> str:
    remaining = len(report.findings)
    if remaining == 0 and report.fixed == 0:
        return palette.paint("All checks passed!", BOLD, GREEN)
    text = f"Found {plural(remaining + report.fixed, 'error')}"
    details = []
    if report.fixed:
        unsafe = sum(1 for finding in report.findings if finding.fix is not None and finding.fix.applicability is Applicability.UNSAFE)
        details.append(f"{report.fixed} fixed, {remaining} remaining" + (f" ({unsafe} fixable with --unsafe-fixes)" if unsafe else ""))
    elif report.files_checked > 1:
        text += f" in {plural(len({finding.path for finding in report.findings}), 'file')}"
    if report.files_checked > 1:
        details.append(f"{plural(report.files_checked, 'file')} checked")
    if details:
        text += f" ({'; '.join(details)})"
    return palette.paint(f"{text}.", BOLD)
