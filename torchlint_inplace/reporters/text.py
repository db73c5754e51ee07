"""The pieces the human-readable formats (full, concise) share: the finding's header line and
the closing summary, worded as ruff words them so users read them without thinking."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from ..diagnostics import Applicability, Finding, Position, Severity
from .base import Report
from .style import BOLD, CYAN, GREEN, Palette


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def location(report: Report, path: str, position: Position, palette: Palette) -> str:
    """`path:line:col` with a 1-based column, as editors and terminals make clickable; in a
    notebook `path:cell N:line:col`, as ruff writes it."""
    colon = palette.paint(":", CYAN)
    cell, shown = report.in_cell(path, position)
    where = f"cell {cell}{colon}" if cell is not None else ""
    return f"{palette.paint(report.display_path(path), BOLD)}{colon}{where}{shown.line}{colon}{shown.column + 1}"


def header(finding: Finding, report: Report, palette: Palette) -> str:
    """`path:line:col: CODE [*] message`; `[*]` marks a fix that --fix applies (safe), as in ruff."""
    fixable = finding.fix is not None and finding.fix.applicability is Applicability.SAFE
    marker = "[*] " if fixable else ""
    where = location(report, finding.path, finding.span.start, palette) + palette.paint(":", CYAN)
    return f"{where} {palette.severity(finding.code, finding.severity)} {marker}{finding.message}"


def fixable(findings: Iterable[Finding]) -> tuple[int, int]:
    """How many findings `--fix` resolves, and how many more `--unsafe-fixes` would."""
    counts = Counter(finding.fix.applicability for finding in findings if finding.fix is not None)
    return counts[Applicability.SAFE], counts[Applicability.UNSAFE]


def fixability(findings: Iterable[Finding]) -> str:
    """`[*] 1 fixable with --fix (1 more with --unsafe-fixes)`, or "" when nothing is fixable."""
    safe, unsafe = fixable(findings)
    more = f"{unsafe} more with --unsafe-fixes" if safe else f"{unsafe} fixable with --unsafe-fixes"
    if safe:
        return f"[*] {safe} fixable with --fix" + (f" ({more})" if unsafe else "")
    return more if unsafe else ""


def found(findings: Sequence[Finding], fixed: int = 0) -> str:
    """`Found 3 errors`, `Found 2 errors and 1 warning`: warnings are the findings only a
    non-default configuration reaches (they say which)."""
    warnings = sum(finding.severity is Severity.WARNING for finding in findings)
    errors = len(findings) + fixed - warnings
    if warnings and not errors:
        return f"Found {plural(warnings, 'warning')}"
    return f"Found {plural(errors, 'error')}" + (f" and {plural(warnings, 'warning')}" if warnings else "")


def summary(report: Report, palette: Palette) -> str:
    """The closing line: `Found 3 errors in 2 files (9 files checked). [*] 1 fixable with --fix
    (1 more with --unsafe-fixes).`; after --fix, what was fixed and what remains."""
    remaining = len(report.findings)
    if remaining == 0 and report.fixed == 0:
        return palette.paint("All checks passed!", BOLD, GREEN)
    text = found(report.findings, report.fixed)
    details = []
    if report.fixed:
        unsafe = fixable(report.findings)[1]
        details.append(
            f"{report.fixed} fixed, {remaining} remaining"
            + (f" ({unsafe} fixable with --unsafe-fixes)" if unsafe else "")
        )
    elif report.files_checked > 1:
        text += f" in {plural(len({finding.path for finding in report.findings}), 'file')}"
    if report.files_checked > 1:
        details.append(f"{plural(report.files_checked, 'file')} checked")
    if details:
        text += f" ({'; '.join(details)})"
    fixes = "" if report.fixed else fixability(report.findings)
    return palette.paint(f"{text}." + (f" {fixes}." if fixes else ""), BOLD)
