"""--fix, --diff and --show-fixes over a checked run: which files to fix, what to write, what to print.

Kept out of the CLI so that the command only wires options to these steps; what goes wrong on
the way (a fix that would not compile, a file that cannot be written) comes back as
`RunWarning`s, never printed here.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path

from .. import notebook
from ..diagnostics import Finding, RunWarning
from ..linting import FileResult
from .apply import FileFix, fix_file

# The findings of the file at a path if it held a text: how each round of fixes is checked.
Relint = Callable[[Path, str], list[Finding]]
# How a path is shown to the user (relative to the directory the command runs in).
Display = Callable[[str], str]


def fix_files(results: Sequence[FileResult], relint: Relint, unsafe: bool) -> tuple[list[FileFix], list[RunWarning]]:
    """The fixed text of every checked file with a selected fix (nothing is written here), and
    warnings for the files that could not be fixed and the fixes that were dropped."""
    fixes, warnings = [], []
    for result in results:
        path = Path(result.path)
        try:
            fixed = fix_file(path, result.text, result.findings, partial(relint, path), unsafe)
        except Exception as error:  # a bug of ours while relinting one file: leave it as it is
            warnings.append(
                RunWarning(f"not fixed, internal error while relinting it ({type(error).__name__}: {error})", str(path))
            )
            continue
        if fixed is not None and (fixed.changed or fixed.result.rejected or fixed.result.ineffective):
            fixes.append(fixed)
    return fixes, warnings + dropped(fixes)


def dropped(fixes: Sequence[FileFix]) -> list[RunWarning]:
    """A warning for each fix that was not applied, and why."""
    return [
        RunWarning(f"fix for {finding.code} {why}; not applied", finding.path, finding.line)
        for fix in fixes
        for findings, why in (
            (fix.result.rejected, "would not compile"),
            (fix.result.ineffective, "leaves the finding in place"),
        )
        for finding in findings
    ]


def write_fixes(fixes: Sequence[FileFix]) -> tuple[list[FileFix], list[RunWarning]]:
    """Writes the files the fixes changed; returns those written, and a warning for each file
    that could not be written (it is left as it was)."""
    written, warnings = [], []
    for fixed in fixes:
        if not fixed.changed:
            continue
        try:
            fixed.write()
            written.append(fixed)
        except (OSError, UnicodeError, notebook.NotWritable) as error:
            warnings.append(RunWarning(f"cannot write the fixes to it: {error}", str(fixed.path)))
    return written, warnings


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
    """The fix as a unified diff; for a notebook, one per changed cell (`a/nb.ipynb:cell 3`)."""
    if fix.source.notebook is None:
        return _diff(fix.source.text, fix.result.text, display)
    try:
        old, new = notebook.split(fix.source.text), notebook.split(fix.result.text)
    except notebook.NotWritable:  # writing it will refuse it too; show what the fixes made
        return _diff(fix.source.text, fix.result.text, display)
    return "".join(
        _diff(text, new.get(number, ""), f"{display}:cell {number}")
        for number, text in old.items()
        if new.get(number) != text
    )


def _diff(old: str, new: str, display: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{display}", f"b/{display}"
    )
    return "".join(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n" for line in lines)


def applied_summary(fixes: Sequence[FileFix], display: Display) -> str:
    """ruff's --show-fixes list: per file, how many of each code were fixed, and how."""
    count = sum(len(fix.result.applied) for fix in fixes)
    out = [f"Fixed {count} error{'s' if count != 1 else ''}:"]
    for fix in fixes:
        out.append(f"- {display(str(fix.path))}:")
        kinds = Counter(
            (finding.code, finding.fix.description if finding.fix else "") for finding in fix.result.applied
        )
        out += [f"    {n} × {code} ({description})" for (code, description), n in sorted(kinds.items())]
    return "\n".join(out) + "\n"
