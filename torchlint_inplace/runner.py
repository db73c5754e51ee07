"""Checks files: read and decode, parse once, analyse once, run the selected rules, then drop
what `# noqa` comments and per-file-ignores suppress.

Whatever goes wrong with one file becomes a TIP000 finding for that file and never stops the
run: an unreadable or undecodable file, a syntax error, or a bug of ours in the analysis (then
the traceback travels in the result so that `--verbose` can show it).
"""

from __future__ import annotations

import ast
import gc
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import libcst as cst

from . import analysis, noqa, registry, source
from .cache import ResultsCache
from .config import Settings
from .diagnostics import NOT_CHECKED_CODE, Finding, not_checked
from .globs import matches_path
from .prepass import PrePass
from .rule import FormRule

# A parsed file is hundreds of thousands of small objects and none of them forms a cycle, yet at
# CPython's default threshold (700 allocations) the collector walks them thousands of times per
# run: 31% of the CPU of a cold run on timm (timed with `gc.callbacks`). Collecting 50x less
# often costs nothing in memory.
GC_THRESHOLDS = (50_000, 20, 100)

# Fewer files than this are checked in-process: starting workers would cost more than it saves.
PARALLEL_FROM = 8

INTERNAL_ERROR = "internal error while checking this file (please report it with the file): "


@dataclass(frozen=True)
class FileResult:
    path: str
    findings: tuple[Finding, ...]
    text: str | None = None  # the decoded source for code frames, kept only when there are findings
    traceback: str | None = None  # of an internal error, shown with --verbose


@dataclass(frozen=True)
class SourceAnalysis:
    """A file's findings, and the other files they were read from (what a cache keys on)."""

    findings: list[Finding]
    dependencies: frozenset[str] = frozenset()
    scanned_roots: frozenset[str] = frozenset()


_SHIPPED_ANALYZE = analysis.analyze


def check_source(
    path: str, text: str, select: frozenset[str] | None = None, preview: bool = False, project: analysis.Project | None = None
) -> list[Finding]:
    """Findings for one file's text, `# noqa` applied, sorted; `select=None` runs every rule.

    `project` is shared by the files of one run, so that callee summaries are computed once."""
    return analyze_source(path, text, select, preview, project, PrePass()).findings


def analyze_source(
    path: str,
    text: str,
    select: frozenset[str] | None = None,
    preview: bool = False,
    project: analysis.Project | None = None,
    prepass: PrePass | None = None,
) -> SourceAnalysis:
    """`check_source`, with the files the result depends on; `prepass` (shared by a run) lets
    files that provably hold no finding skip LibCST; None analyses every file fully."""
    python_accepts = False
    if prepass is not None and _prepass_applies(select):
        verdict = prepass.verdict(path, text)
        if verdict.skippable:
            return SourceAnalysis([], verdict.dependencies)
        python_accepts = verdict.parses
    rejected = None if python_accepts else _python_syntax_error(path, text)
    if rejected is not None:
        return SourceAnalysis([rejected])
    project = project or analysis.Project()
    try:
        module = project.parse(path, text)
    except cst.ParserSyntaxError as error:
        return SourceAnalysis([not_checked(path, f"cannot parse: {error.message}", error.raw_line, error.raw_column)])
    suppressions = noqa.parse(text)
    if suppressions.whole_file:
        return SourceAnalysis([])
    file_analysis = analysis.analyze(module, path, project, preview)
    findings: list[Finding] = []
    for rule in registry.all_rules():
        if select is None or rule.code in select:
            findings.extend(rule().check(file_analysis))
    return SourceAnalysis(sorted(suppressions.filter(findings), key=Finding.sort_key), file_analysis.dependencies, file_analysis.scanned_roots)


def _prepass_applies(select: frozenset[str] | None) -> bool:
    """The pre-pass proves that the shipped analysis finds no mutation, which silences exactly
    the rules that only report mutations; a replaced analysis or another kind of rule may not."""
    return analysis.analyze is _SHIPPED_ANALYZE and all(
        issubclass(rule, FormRule) for rule in registry.all_rules() if select is None or rule.code in select
    )


def _python_syntax_error(path: str, text: str) -> Finding | None:
    """Python's own verdict, asked before LibCST's: its messages are worded and placed better,
    and LibCST's native parser overflows the C stack (a segfault no `except` catches) on the
    bracket nesting Python refuses ("too many nested parentheses"). LibCST's account stands
    only for files Python accepts."""
    try:
        compile(text, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as error:
        return not_checked(path, f"syntax error: {error.msg}", error.lineno or 1, max((error.offset or 1) - 1, 0))
    except (RecursionError, MemoryError):
        return not_checked(path, "too deeply nested for Python to parse")
    except ValueError as error:  # null bytes, before Python 3.12 made them a SyntaxError
        line = text.count("\n", 0, max(text.find("\0"), 0)) + 1
        return not_checked(path, f"cannot parse: {error}", line)
    return None


def _ignored_codes(path: Path, settings: Settings) -> frozenset[str]:
    try:
        relative: str | None = path.relative_to(settings.root).as_posix()
    except ValueError:
        relative = None
    return frozenset(
        code for pattern, codes in settings.per_file_ignores if matches_path(pattern, relative, path.name) for code in codes
    )


def check_file(
    path: Path, settings: Settings, project: analysis.Project | None = None, prepass: PrePass | None = None, cache: ResultsCache | None = None
) -> FileResult:
    name = str(path)
    try:
        text = source.read(path).text
    except source.NotReadable as error:
        return FileResult(name, (not_checked(name, error.message, error.line),))
    known = _cached(name, text, cache)
    if known is not None:
        return known
    try:
        result = lint_source(path, text, settings, project, prepass)
    except Exception as error:  # one file's bug in our analysis must not end the run
        message = INTERNAL_ERROR + f"{type(error).__name__}: {error}"
        return FileResult(name, (not_checked(name, message),), text, traceback.format_exc())
    kept = tuple(result.findings)
    if cache is not None:
        cache.store(name, text, kept, result.dependencies, result.scanned_roots)
    return FileResult(name, kept, text if kept else None)


def _cached(name: str, text: str, cache: ResultsCache | None) -> FileResult | None:
    findings = cache.lookup(name, text) if cache is not None else None
    return None if findings is None else FileResult(name, findings, text if findings else None)


def lint_text(path: Path, text: str, settings: Settings, project: analysis.Project | None = None) -> list[Finding]:
    """The findings `check_file` reports for `path` holding `text`: also how --fix relints its result."""
    return lint_source(path, text, settings, project, PrePass()).findings


def lint_source(path: Path, text: str, settings: Settings, project: analysis.Project | None = None, prepass: PrePass | None = None) -> SourceAnalysis:
    result = analyze_source(str(path), text, frozenset(settings.select), settings.preview, project, prepass)
    ignored = _ignored_codes(path, settings) - {NOT_CHECKED_CODE}
    return replace(result, findings=[finding for finding in result.findings if finding.code not in ignored])


class Checker:
    """Checks the files of one run, one after another, sharing what can be shared: the
    pre-pass's knowledge of imported files, the cache's digests, and an `analysis.Project`
    (which bounds the syntax trees it keeps by their size, so memory stays flat on large trees)."""

    def __init__(self, settings: Settings, use_cache: bool) -> None:
        gc.set_threshold(*GC_THRESHOLDS)  # this process now spends its life checking files
        self.settings = settings
        self.prepass = PrePass()
        self.cache = ResultsCache.for_settings(settings) if use_cache else None
        self.project = analysis.Project()

    def check(self, path: Path) -> FileResult:
        return check_file(path, self.settings, self.project, self.prepass, self.cache)

    def from_cache(self, path: Path) -> FileResult | None:
        """The cached result, if the cache holds one for the file as it is now."""
        try:
            text = source.read(path).text
        except source.NotReadable:
            return None  # `check` reports it
        return _cached(str(path), text, self.cache)


def check_files(paths: Iterable[Path], settings: Settings, jobs: int = 1, use_cache: bool = False) -> list[FileResult]:
    """Every file's result, in the order given; `jobs` > 1 checks them in that many processes.

    Before starting workers, cached results are answered here, so a warm run starts none."""
    paths = list(paths)
    checker = Checker(settings, use_cache)
    if jobs <= 1 or len(paths) < PARALLEL_FROM:
        return [checker.check(path) for path in paths]
    results = {path: result for path in paths if use_cache and (result := checker.from_cache(path)) is not None}
    todo = [path for path in paths if path not in results]
    if len(todo) >= PARALLEL_FROM:
        from .parallel import check_in_parallel  # it imports this module

        results.update(zip(todo, check_in_parallel(todo, settings, jobs, use_cache)))
    else:
        results.update((path, checker.check(path)) for path in todo)
    return [results[path] for path in paths]
