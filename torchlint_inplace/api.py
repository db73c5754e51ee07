"""The Python API: what the command line, the tests, the benchmarks and editor integrations call.

    from torchlint_inplace import api

    findings = api.lint_source(text, "src/model.py")          # one text; the file need not exist
    fixed = api.fix_source(text, "src/model.py", unsafe=True)  # its text with the fixes applied
    linted = api.lint_buffer(text, "src/model.py")             # .findings now, .with_fixes() later
    run = api.lint_paths(["src/"], jobs=4, cache=True)         # what `torchlint-inplace src/` does

A Jupyter notebook (a path ending in `.ipynb`) is linted as its code cells joined in order:
`text` is the notebook's JSON, and the findings' positions are lines of `checked_text(text,
path)`, whose `notebook.cell_index(...).locate(line)` gives the cell and the line there.

`settings` is a `config.Settings` (used for every file) or a `config.Resolver` (the settings
of each file from the `pyproject.toml` above it, under command-line overrides); None resolves
them for each path as the command does without options. `rules` is the catalogue to run, by
default the registry's. Nothing here prints: what the user should hear beyond the findings
comes back as `RunWarning`s in the result. Results are plain data (`Finding`, `FileResult`),
the same for any number of jobs.

A run (`lint_paths`) goes: discovery (which files, with which settings) -> the results cache
-> per file: the pre-pass, the parse, the analysis, the rules, suppressions (`linting`) ->
fixes (`fixes`), if asked for. The reporters turn its result into text.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from . import analysis, notebook, registry, source
from .add_noqa import annotate
from .analysis.prepass import PrePass
from .config import Configuration, Resolver, Settings
from .diagnostics import Finding, RunWarning, not_checked
from .discovery import discover
from .fixes.apply import FileFix, FixedText, encode, fix_read, fix_text, selected, write_atomically
from .fixes.run import after_fixes, dropped, fix_files, write_fixes
from .linting import Checker, FileResult, Rules, RunOptions, SourceAnalysis, lint_text
from .parallel import check_in_parallel

# Fewer files than this are checked in-process: starting workers would cost more than it saves.
PARALLEL_FROM = 8

NO_FILES = "No Python files found under the given path(s)"

# Told after each file is checked: (files done, files in the run).
Progress = Callable[[int, int], None]


class FixMode(enum.Enum):
    NONE = "none"  # report only
    DIFF = "diff"  # compute the fixes, write nothing (`--diff`)
    WRITE = "write"  # write the fixed files (`--fix`)


@dataclass(frozen=True)
class RunResult:
    """What one run found: each checked file's result (after fixes, when they were written),
    the paths that could not be searched (as TIP000 findings), the fixes, and warnings."""

    files: tuple[FileResult, ...]
    unsearchable: tuple[Finding, ...] = ()
    fixes: tuple[FileFix, ...] = ()  # written with FixMode.WRITE; to be shown with FixMode.DIFF
    warnings: tuple[RunWarning, ...] = ()

    @property
    def findings(self) -> list[Finding]:
        """Every finding of the run, sorted by path, line and column."""
        found = [*self.unsearchable, *(finding for result in self.files for finding in result.findings)]
        return sorted(found, key=Finding.sort_key)

    @property
    def fixed(self) -> int:
        """How many findings the written (or, with --diff, the shown) fixes resolve."""
        return sum(len(fix.result.applied) for fix in self.fixes if fix.changed)


def _rules(rules: Rules | None) -> tuple[type, ...]:
    return tuple(registry.all_rules() if rules is None else rules)


def lint_source(
    text: str,
    path: str | Path,
    settings: Settings | None = None,
    *,
    rules: Rules | None = None,
    prepass: bool = True,
    project: analysis.Project | None = None,
) -> list[Finding]:
    """The findings of the file at `path` if it held `text`, sorted, with `# noqa` comments and
    per-file-ignores applied. `path` need not exist (an editor buffer, stdin): it places the
    file for its settings and for resolving its imports. `settings` default to those resolved
    for `path`; `prepass=False` analyses the text fully even where the pre-pass proves it
    clean; `project` shares callee summaries among the texts of one session."""
    return _lint(text, path, settings, rules, prepass, project, fixes=True).findings


def lint_buffer(
    text: str,
    path: str | Path,
    settings: Settings | None = None,
    *,
    rules: Rules | None = None,
    project: analysis.Project | None = None,
) -> SourceAnalysis:
    """What an editor asks of a buffer: `lint_source`'s findings, first without their fixes
    (`.findings`, what diagnostics show), and, when a code action asks for them, the same
    findings with their fixes (`.with_fixes()`, built on the first call from the same analysis
    and kept). The fix builders cost more than the analysis, so diagnostics do not wait for them."""
    return _lint(text, path, settings, rules, True, project, fixes=False)


def _lint(
    text: str,
    path: str | Path,
    settings: Settings | None,
    rules: Rules | None,
    prepass: bool,
    project: analysis.Project | None,
    fixes: bool,
) -> SourceAnalysis:
    resolved = Resolver().for_path(path) if settings is None else settings
    pre = PrePass() if prepass else None
    try:
        checked = checked_text(text, path)
    except notebook.NotANotebook as error:
        return SourceAnalysis([not_checked(str(path), str(error))])
    catalogue, shared = _rules(rules), project or analysis.Project()
    return lint_text(checked, str(path), resolved, catalogue, shared, pre, fixes=fixes)


def checked_text(text: str, path: str | Path) -> str:
    """What the findings of `text` at `path` are positioned in: `text` itself, or for a
    notebook its code cells joined in order (raises `notebook.NotANotebook` for a notebook
    this linter cannot read, which `lint_source` reports as TIP000)."""
    return notebook.Notebook.parse(text).source if notebook.is_notebook(path) else text


def fix_source(
    text: str,
    path: str | Path,
    settings: Settings | None = None,
    *,
    unsafe: bool = False,
    rules: Rules | None = None,
    project: analysis.Project | None = None,
    findings: list[Finding] | None = None,
) -> FixedText:
    """`text` with its safe fixes applied (and unsafe ones with `unsafe=True`), round after
    round as `--fix` does: `.text` is the result, `.applied` the fixed findings, `.remaining`
    the findings of the result, `.rejected`/`.ineffective` the fixes dropped. For a notebook
    `.text` is its JSON with the fixed cells (the findings are in its joined cells).
    `findings`, the findings of `text` with their fixes when the caller has them already
    (`lint_buffer(...).with_fixes()`), spare the first round its analysis."""
    resolved = Resolver().for_path(path) if settings is None else settings
    relint = _relinter(lambda _: resolved, _rules(rules), project or analysis.Project())
    try:
        parsed = notebook.Notebook.parse(text) if notebook.is_notebook(path) else None
    except notebook.NotANotebook as error:
        return FixedText(text, remaining=[not_checked(str(path), str(error))])
    checked = text if parsed is None else parsed.source
    fixed = fix_text(str(path), checked, lambda new: relint(Path(path), new), unsafe, findings)
    if parsed is None or fixed.text == parsed.source:
        return fixed if parsed is None else replace(fixed, text=text)
    try:
        return replace(fixed, text=parsed.dumps(fixed.text))
    except notebook.NotWritable:  # the fixes moved a cell's boundary: none is applied
        return FixedText(text, rejected=fixed.applied, remaining=relint(Path(path), parsed.source))


def _relinter(
    settings_for: Callable[[Path], Settings], rules: Rules, project: analysis.Project
) -> Callable[[Path, str], list[Finding]]:
    """How fixes check each round: the file's findings for a new text (a fresh pre-pass each
    time, since the text it judges is not the file on disk)."""
    return lambda path, text: lint_text(text, str(path), settings_for(path), rules, project, PrePass()).findings


def lint_paths(
    paths: Iterable[Path | str],
    settings: Configuration | None = None,
    jobs: int = 1,
    cache: bool = False,
    *,
    fix: FixMode = FixMode.NONE,
    unsafe_fixes: bool = False,
    rules: Rules | None = None,
    prepass: bool = True,
    progress: Progress | None = None,
) -> RunResult:
    """Checks the Python files under `paths` (and the files named), as `torchlint-inplace`
    does: `jobs` > 1 checks them in that many processes, `cache` reads and writes the results
    cache, `fix` computes or writes the fixes (safe ones; unsafe ones too with `unsafe_fixes`),
    `prepass=False` analyses every file fully, `progress` is told of each file checked."""
    configuration = Resolver() if settings is None else settings
    catalogue = _rules(rules)
    unsearchable: list[Finding] = []
    files = discover(paths, configuration, lambda path, why: unsearchable.append(not_checked(str(path), why)))
    warnings = [] if files else [RunWarning(NO_FILES)]
    tasks = [(path, configuration.for_path(path)) for path in files]
    results = _check(tasks, RunOptions(catalogue, cache, prepass), jobs, progress)
    fixes: list[FileFix] = []
    if fix is not FixMode.NONE:
        relint = _relinter(configuration.for_path, catalogue, analysis.Project())
        fixes, fix_warnings = fix_files(results, relint, unsafe_fixes)
        warnings += fix_warnings
        if fix is FixMode.WRITE:
            fixes, write_warnings = write_fixes(fixes)
            warnings += write_warnings
            results = after_fixes(results, fixes)
    return RunResult(tuple(results), tuple(unsearchable), tuple(fixes), tuple(warnings))


def lint_stdin(
    data: bytes,
    path: str | Path,
    settings: Configuration | None = None,
    *,
    fix: FixMode = FixMode.NONE,
    unsafe_fixes: bool = False,
    rules: Rules | None = None,
) -> RunResult:
    """What `torchlint-inplace - --stdin-filename PATH` does: `data` checked as if it were the
    file at `path` (its settings, per-file-ignores and `# noqa` apply; the file need not
    exist), decoded as a file would be. Nothing is written: with `fix`, `.fixes` holds the
    fixed text, which `fixes[0].encoded()` gives as the file's bytes (the command prints them)."""
    configuration = Resolver() if settings is None else settings
    name = os.path.abspath(path)  # as discovery names files: where settings' globs are relative to
    resolved, catalogue = configuration.for_path(name), _rules(rules)
    try:
        decoded = source.decode(data, name)
    except source.NotReadable as error:
        return RunResult((FileResult(name, (not_checked(name, error.message, error.line),)),))
    result = Checker(RunOptions(catalogue)).check_text(name, decoded.text, resolved)
    if fix is FixMode.NONE or not any(selected(finding, unsafe_fixes) for finding in result.findings):
        return RunResult((result,))
    relint = _relinter(configuration.for_path, catalogue, analysis.Project())
    fixed = fix_read(Path(name), decoded, decoded.text, result.findings, partial(relint, Path(name)), unsafe_fixes)
    results = after_fixes([result], [fixed]) if fix is FixMode.WRITE else [result]
    return RunResult(tuple(results), fixes=(fixed,), warnings=tuple(dropped([fixed])))


def _check(
    tasks: Sequence[tuple[Path, Settings]], options: RunOptions, jobs: int, progress: Progress | None
) -> list[FileResult]:
    """Every file's result, in the order given. Before starting workers, cached results are
    answered here, so a warm run starts none."""
    checker = Checker(options)
    done = _Counter(len(tasks), progress)
    if jobs <= 1 or len(tasks) < PARALLEL_FROM:
        return [done.tick(checker.check(path, settings)) for path, settings in tasks]
    results: dict[Path, FileResult] = {}
    if options.cache:
        for path, settings in tasks:
            if (known := checker.from_cache(path, settings)) is not None:
                results[path] = done.tick(known)
    todo = [task for task in tasks if task[0] not in results]
    if len(todo) >= PARALLEL_FROM:
        results.update(
            (path, done.tick(result))
            for (path, _), result in zip(todo, check_in_parallel(todo, options, jobs), strict=True)
        )
    else:
        results.update((path, done.tick(checker.check(path, settings))) for path, settings in todo)
    return [results[path] for path, _ in tasks]


@dataclass
class _Counter:
    total: int
    progress: Progress | None
    done: int = field(default=0)

    def tick(self, result: FileResult) -> FileResult:
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, self.total)
        return result


@dataclass(frozen=True)
class NoqaResult:
    """What `add_noqa` did: how many lines got a directive, which files were written."""

    added: int
    written: tuple[str, ...]
    warnings: tuple[RunWarning, ...]


def add_noqa(
    paths: Iterable[Path | str],
    settings: Configuration | None = None,
    jobs: int = 1,
    cache: bool = False,
    *,
    rules: Rules | None = None,
) -> NoqaResult:
    """Adds `# noqa: CODE` to every line of the files under `paths` that has a finding
    (`--add-noqa`); a file changed since it was checked is left alone."""
    run = lint_paths(paths, settings, jobs, cache, rules=rules)
    added, written, warnings = 0, [], list(run.warnings)
    for result in run.files:
        if not result.findings or result.text is None:
            continue
        annotated = annotate(result.path, result.text, result.findings)
        warnings += annotated.warnings
        if not annotated.added:
            continue
        try:
            current = source.read(result.path)
            if current.text != result.text:
                warnings.append(RunWarning("changed while it was checked; no noqa comments added", result.path))
                continue
            write_atomically(Path(result.path), encode(current, annotated.text))
        except (source.NotReadable, OSError, UnicodeError, notebook.NotWritable) as error:
            warnings.append(RunWarning(f"cannot write the noqa comments to it: {error}", result.path))
            continue
        added += annotated.added
        written.append(result.path)
    return NoqaResult(added, tuple(written), tuple(warnings))
