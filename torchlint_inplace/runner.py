"""Checks files: read and decode, parse once, analyse once, run the selected rules, then drop
what `# noqa` comments and per-file-ignores suppress.

Whatever goes wrong with one file becomes a TIP000 finding for that file and never stops the
run: an unreadable or undecodable file, a syntax error, or a bug of ours in the analysis (then
the traceback travels in the result so that `--verbose` can show it).
"""

from __future__ import annotations

import ast
import traceback
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from . import analysis, noqa, registry, source
from .config import Settings
from .diagnostics import NOT_CHECKED_CODE, Finding, not_checked
from .globs import matches_path

INTERNAL_ERROR = "internal error while checking this file (please report it with the file): "


@dataclass(frozen=True)
class FileResult:
    path: str
    findings: tuple[Finding, ...]
    text: str | None = None  # the decoded source for code frames, kept only when there are findings
    traceback: str | None = None  # of an internal error, shown with --verbose


def check_source(
    path: str, text: str, select: frozenset[str] | None = None, preview: bool = False, project: analysis.Project | None = None
) -> list[Finding]:
    """Findings for one file's text, `# noqa` applied, sorted; `select=None` runs every rule.

    `project` is shared by the files of one run, so that callee summaries are computed once."""
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as error:
        return [_syntax_error(path, text, error)]
    suppressions = noqa.parse(text)
    if suppressions.whole_file:
        return []
    file_analysis = analysis.analyze(module, path, project, preview)
    findings: list[Finding] = []
    for rule in registry.all_rules():
        if select is None or rule.code in select:
            findings.extend(rule().check(file_analysis))
    return sorted(suppressions.filter(findings), key=Finding.sort_key)


def _syntax_error(path: str, text: str, error: cst.ParserSyntaxError) -> Finding:
    """Python's own compiler words syntax errors better and places them more precisely than
    LibCST, so its message is preferred; LibCST's stands when Python accepts the file."""
    try:
        compile(text, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as python_error:
        column = max((python_error.offset or 1) - 1, 0)
        return not_checked(path, f"syntax error: {python_error.msg}", python_error.lineno or 1, column)
    except (ValueError, RecursionError, MemoryError):
        pass  # null bytes, absurd nesting: fall back to LibCST's account
    return not_checked(path, f"cannot parse: {error.message}", error.raw_line, error.raw_column)


def _ignored_codes(path: Path, settings: Settings) -> frozenset[str]:
    try:
        relative: str | None = path.relative_to(settings.root).as_posix()
    except ValueError:
        relative = None
    return frozenset(
        code for pattern, codes in settings.per_file_ignores if matches_path(pattern, relative, path.name) for code in codes
    )


def check_file(path: Path, settings: Settings, project: analysis.Project | None = None) -> FileResult:
    name = str(path)
    try:
        text = source.read(path).text
    except source.NotReadable as error:
        return FileResult(name, (not_checked(name, error.message, error.line),))
    try:
        kept = tuple(lint_text(path, text, settings, project))
    except Exception as error:  # one file's bug in our analysis must not end the run
        message = INTERNAL_ERROR + f"{type(error).__name__}: {error}"
        return FileResult(name, (not_checked(name, message),), text, traceback.format_exc())
    return FileResult(name, kept, text if kept else None)


def lint_text(path: Path, text: str, settings: Settings, project: analysis.Project | None = None) -> list[Finding]:
    """The findings `check_file` reports for `path` holding `text`: also how --fix relints its result."""
    findings = check_source(str(path), text, frozenset(settings.select), settings.preview, project)
    ignored = _ignored_codes(path, settings) - {NOT_CHECKED_CODE}
    return [finding for finding in findings if finding.code not in ignored]


def check_files(paths: Iterable[Path], settings: Settings) -> list[FileResult]:
    project = analysis.Project()
    return [check_file(path, settings, project) for path in paths]
