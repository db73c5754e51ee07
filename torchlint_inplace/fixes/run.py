"""--fix, --diff and --show-fixes over a checked run: which files to fix, what to print.

Kept out of the CLI so that the command only wires options to these steps.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import click

from .. import analysis
from ..config import Settings
from ..runner import FileResult, lint_text
from .apply import FileFix, fix_file


def fix_results(results: Sequence[FileResult], settings: Settings, unsafe: bool) -> list[FileFix]:
    """The fixed text of every checked file with a selected fix (nothing is written here)."""
    project = analysis.Project()
    fixes = []
    for result in results:
        path = Path(result.path)
        try:
            fixed = fix_file(path, result.text, result.findings, lambda text, path=path: lint_text(path, text, settings, project), unsafe)
        except Exception as error:  # a bug of ours while relinting one file: leave it as it is
            click.echo(f"warning: {path}: not fixed, internal error while relinting it ({type(error).__name__}: {error})", err=True)
            continue
        if fixed is not None and (fixed.changed or fixed.result.rejected or fixed.result.ineffective):
            fixes.append(fixed)
    return fixes


def after_fixes(results: Sequence[FileResult], fixes: Sequence[FileFix]) -> list[FileResult]:
    """The run's results with each fixed file's findings replaced by those of its fixed text."""
    by_path = {str(fix.path): fix for fix in fixes}
    merged = []
    for result in results:
        fix = by_path.get(result.path)
        if fix is None:
            merged.append(result)
        else:
            remaining = tuple(fix.result.remaining)
            merged.append(replace(result, findings=remaining, text=fix.result.text if remaining else None))
    return merged


def unified_diff(fix: FileFix, display: str) -> str:
    lines = difflib.unified_diff(
        fix.source.text.splitlines(keepends=True), fix.result.text.splitlines(keepends=True), f"a/{display}", f"b/{display}"
    )
    return "".join(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n" for line in lines)


def applied_summary(fixes: Sequence[FileFix], display) -> str:
    """ruff's --show-fixes list: per file, how many of each code were fixed, and how."""
    count = sum(len(fix.result.applied) for fix in fixes)
    out = [f"Fixed {count} error{'s' if count != 1 else ''}:"]
    for fix in fixes:
        out.append(f"- {display(str(fix.path))}:")
        kinds = Counter((finding.code, finding.fix.description if finding.fix else "") for finding in fix.result.applied)
        out += [f"    {n} × {code} ({description})" for (code, description), n in sorted(kinds.items())]
    return "\n".join(out) + "\n"


def rejected_notes(fixes: Sequence[FileFix], display) -> list[str]:
    return [
        f"warning: fix for {finding.code} at {display(finding.path)}:{finding.line} {why}; not applied"
        for fix in fixes
        for findings, why in ((fix.result.rejected, "would not compile"), (fix.result.ineffective, "leaves the finding in place"))
        for finding in findings
    ]
