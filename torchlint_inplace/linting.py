"""Linting one file: read and decode, ask the pre-pass, parse once, analyse once, run the
selected rules, then drop what `# noqa` comments and per-file-ignores suppress.

`lint_text` is the one path from a text to its findings; `Checker` runs it over files for one
process, with what a run shares (the analysis' `Project`, the pre-pass's knowledge of imported
files, the results cache). The public entry points are in `api`; this module is what they and
the worker processes of `parallel` have in common.

Whatever goes wrong with one file becomes a TIP000 finding for that file and never stops the
run: an unreadable or undecodable file, a syntax error, or a bug of ours in the analysis (then
the traceback travels in the result so that `--verbose` can show it).
"""

from __future__ import annotations

import ast
import gc
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache, partial
from pathlib import Path

import libcst as cst

from . import analysis, noqa, notebook, source
from .analysis.prepass import PrePass
from .cache import ResultsCache
from .config import Settings
from .diagnostics import NOT_CHECKED_CODE, Finding, Position, not_checked
from .globs import matches_path
from .rule import FormRule, Rule

# A parsed file is hundreds of thousands of small objects and none of them forms a cycle, yet at
# CPython's default threshold (700 allocations) the collector walks them thousands of times per
# run: 31% of the CPU of a cold run on timm (timed with `gc.callbacks`). Collecting 50x less
# often costs nothing in memory.
GC_THRESHOLDS = (50_000, 20, 100)

INTERNAL_ERROR = "internal error while checking this file (please report it with the file): "

Rules = Sequence[type[Rule]]


@dataclass(frozen=True)
class FileResult:
    """One checked file: its findings, in order, after `# noqa` and per-file-ignores."""

    path: str
    findings: tuple[Finding, ...]
    text: str | None = None  # the decoded source for code frames, kept only when there are findings
    traceback: str | None = None  # of an internal error, shown with --verbose


@dataclass(frozen=True)
class SourceAnalysis:
    """A file's findings, and the other files they were read from (what a cache keys on).
    Linted with `fixes=False`, the findings come without their fixes and `with_fixes()` builds
    them, once, from the same analysis: the same findings, each with its fix."""

    findings: list[Finding]
    dependencies: frozenset[str] = frozenset()
    scanned_roots: frozenset[str] = frozenset()
    fixed: Callable[[], list[Finding]] | None = field(default=None, compare=False, repr=False)

    def with_fixes(self) -> list[Finding]:
        return self.findings if self.fixed is None else self.fixed()

    def then(self, step: Callable[[list[Finding]], list[Finding]]) -> SourceAnalysis:
        """The same analysis with `step` applied to its findings, with fixes or without."""
        fixed = self.fixed
        later = None if fixed is None else cache(lambda: step(fixed()))
        return replace(self, findings=step(self.findings), fixed=later)


def lint_text(
    text: str,
    path: str,
    settings: Settings,
    rules: Rules,
    project: analysis.Project,
    prepass: PrePass | None,
    *,
    fixes: bool = True,
) -> SourceAnalysis:
    """The findings of `path` holding `text` under `settings`, sorted, with the files they
    depend on. `prepass` (shared by a run) lets files that provably hold no finding skip
    LibCST; None analyses every file fully. `fixes=False` leaves the fixes to `with_fixes()`."""
    selected = [rule for rule in rules if rule.code in settings.select]
    prepass = prepass if _prepass_applies(selected) else None
    result = _analyze(path, text, selected, settings.preview, project, prepass, fixes)
    if notebook.is_notebook(path):
        result = result.then(lambda found: [_in_cell_words(finding, text) for finding in found])
    ignored = _ignored_codes(Path(path), settings) - {NOT_CHECKED_CODE}
    if not ignored:
        return result
    return result.then(lambda found: [finding for finding in found if finding.code not in ignored])


def _analyze(
    path: str,
    text: str,
    rules: Rules,
    preview: bool,
    project: analysis.Project,
    prepass: PrePass | None,
    fixes: bool,
) -> SourceAnalysis:
    if notebook.is_notebook(path):
        text = notebook.python_source(text)  # the same lines and columns, IPython's syntax masked
    python_accepts = False
    if prepass is not None:
        verdict = prepass.verdict(path, text)
        if verdict.skippable:
            return SourceAnalysis([], verdict.dependencies)
        python_accepts = verdict.parses
    rejected = None if python_accepts else _python_syntax_error(path, text)
    if rejected is not None:
        return SourceAnalysis([rejected])
    try:
        module = project.parse(path, text)
    except cst.ParserSyntaxError as error:
        return SourceAnalysis([not_checked(path, f"cannot parse: {error.message}", error.raw_line, error.raw_column)])
    suppressions = noqa.parse(text)
    if suppressions.whole_file:
        return SourceAnalysis([])
    file_analysis = analysis.analyze(module, path, project, preview)

    def report(with_fixes: bool) -> list[Finding]:
        checked = replace(file_analysis, fixes=with_fixes)
        findings = _distinct(finding for rule in rules for finding in rule().check(checked))
        return sorted(suppressions.filter(findings), key=Finding.sort_key)

    later = None if fixes else cache(partial(report, True))
    return SourceAnalysis(report(fixes), file_analysis.dependencies, file_analysis.scanned_roots, later)


def _distinct(findings: Iterable[Finding]) -> list[Finding]:
    """The first of findings that read the same (code, where they start, words): the links of
    one chain (`x[..., :2].mul_(2).add_(y).div_(2)`) met through a caller, or one write met
    through two parses of its file, are one finding to the reader, and one edit to the fixer."""
    seen: dict[tuple[str, Position, str], Finding] = {}
    for finding in findings:
        seen.setdefault((finding.code, finding.span.start, finding.message), finding)
    return list(seen.values())


def _in_cell_words(finding: Finding, text: str) -> Finding:
    """A notebook's finding, its words naming lines as `cell C, line L` (its positions stay in
    the joined text, which fixes edit; reporters show them per cell)."""
    index = notebook.cell_index(text)
    related = tuple(replace(item, message=index.relabel(item.message)) for item in finding.related)
    return replace(
        finding,
        message=index.relabel(finding.message),
        consequence=index.relabel(finding.consequence),
        help=index.relabel(finding.help),
        related=related,
    )


def _prepass_applies(rules: Rules) -> bool:
    """The pre-pass proves that the analysis finds no mutation, which silences exactly the
    rules that only report mutations; another kind of rule may report something else."""
    return all(issubclass(rule, FormRule) for rule in rules)


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
        code
        for pattern, codes in settings.per_file_ignores
        if matches_path(pattern, relative, path.name)
        for code in codes
    )


@dataclass(frozen=True)
class RunOptions:
    """What every checker of a run is told: the rules, whether to read and write the results
    cache, and whether the pre-pass may skip files (False analyses every file fully)."""

    rules: tuple[type[Rule], ...]
    cache: bool = False
    prepass: bool = True


class Checker:
    """Checks the files of one run in this process, one after another, sharing what can be
    shared: the pre-pass's knowledge of imported files, the cache's digests, and an
    `analysis.Project` (which bounds the syntax trees it keeps by their size, so memory stays
    flat on large trees)."""

    def __init__(self, options: RunOptions) -> None:
        gc.set_threshold(*GC_THRESHOLDS)  # this process now spends its life checking files
        self.rules = options.rules
        self.prepass = PrePass() if options.prepass else None
        self.cache = ResultsCache(self.rules) if options.cache else None
        self.project = analysis.Project()

    def check(self, path: Path, settings: Settings) -> FileResult:
        name = str(path)
        try:
            text = source.read(path).text
        except source.NotReadable as error:
            return FileResult(name, (not_checked(name, error.message, error.line),))
        known = self._cached(name, text, settings)
        if known is not None:
            return known
        return self.check_text(name, text, settings)

    def check_text(self, name: str, text: str, settings: Settings) -> FileResult:
        """The result of the file `name` holding the decoded `text` (a file's, or stdin's)."""
        try:
            result = lint_text(text, name, settings, self.rules, self.project, self.prepass)
        except Exception as error:  # one file's bug in our analysis must not end the run
            message = INTERNAL_ERROR + f"{type(error).__name__}: {error}"
            return FileResult(name, (not_checked(name, message),), text, traceback.format_exc())
        kept = tuple(result.findings)
        if self.cache is not None:
            self.cache.store(name, text, settings, kept, result.dependencies, result.scanned_roots)
        return FileResult(name, kept, text if kept else None)

    def from_cache(self, path: Path, settings: Settings) -> FileResult | None:
        """The cached result, if the cache holds one for the file as it is now."""
        try:
            text = source.read(path).text
        except source.NotReadable:
            return None  # `check` reports it
        return self._cached(str(path), text, settings)

    def _cached(self, name: str, text: str, settings: Settings) -> FileResult | None:
        findings = self.cache.lookup(name, text, settings) if self.cache is not None else None
        return None if findings is None else FileResult(name, findings, text if findings else None)
