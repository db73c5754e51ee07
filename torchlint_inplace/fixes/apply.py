"""Applying fixes: edits to text, rounds to a fixed point, a parse check, an atomic write.

A round applies every selected fix whose edits do not overlap one already taken (the rest wait
for the next round, when the file is linted again — fixing one finding may also resolve or
reveal others). The result must compile; when it does not, the round's fixes are tried one by
one and those that break the file are dropped and reported. A round after which a fixed
finding is still there is undone, and that fix dropped and reported. Rounds stop when nothing changes,
or after `MAX_ROUNDS`. Files are written only when they changed, through a temporary file in
the same directory and `os.replace`, so an interrupted run leaves each file old or new, with
its encoding, BOM, newlines and permissions as they were.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import tempfile
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from .. import notebook
from ..diagnostics import Applicability, Edit, Finding, Fix, Span
from ..source import NotReadable, SourceFile, read

MAX_ROUNDS = 10

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_LINE_NUMBER = re.compile(r"\bline \d+")

Lint = Callable[[str], list[Finding]]


def selected(finding: Finding, unsafe: bool) -> bool:
    """Whether this run applies the finding's fix: safe ones always, the rest with --unsafe-fixes."""
    return finding.fix is not None and (unsafe or finding.fix.applicability is Applicability.SAFE)


@dataclass
class FixedText:
    text: str
    applied: list[Finding] = field(default_factory=list)
    rejected: list[Finding] = field(default_factory=list)  # fixes dropped because the result would not compile
    ineffective: list[Finding] = field(default_factory=list)  # fixes undone because their finding stayed
    remaining: list[Finding] = field(default_factory=list)  # findings of the final text
    rounds: int = 0


def _line_starts(text: str) -> list[int]:
    return [0] + [match.end() for match in _LINE_BREAK.finditer(text)]


def _offset(starts: list[int], text: str, line: int, column: int) -> int:
    if line > len(starts):
        return len(text)
    return min(starts[line - 1] + column, len(text))


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """`text` with non-overlapping `edits` applied (positions refer to `text`)."""
    starts = _line_starts(text)
    ranges = sorted(
        (
            (
                _offset(starts, text, e.span.start.line, e.span.start.column),
                _offset(starts, text, e.span.end.line, e.span.end.column),
                e.content,
            )
            for e in edits
        ),
        key=lambda item: item[:2],
    )
    pieces, cursor = [], 0
    for start, end, content in ranges:
        pieces += [text[cursor:start], content]
        cursor = end
    return "".join(pieces) + text[cursor:]


def compiles(text: str, path: str) -> bool:
    """Python's own compiler, so that errors the grammar allows (a walrus rebinding a
    comprehension variable) are caught too; a notebook's joined cells with IPython's syntax
    masked, as they are linted."""
    if notebook.is_notebook(path):
        text = notebook.python_source(text)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def _non_overlapping(fixes: list[tuple[Finding, Fix]]) -> list[tuple[Finding, Fix]]:
    """Fixes in file order, skipping any that touches a range taken by an earlier one; a fix
    whose edits were all taken already (two findings, one clone) counts as applied."""
    taken: list[Edit] = []
    chosen = []
    for finding, fix in sorted(fixes, key=lambda item: min(edit.span for edit in item[1].edits)):
        if all(edit in taken for edit in fix.edits):
            chosen.append((finding, Fix(fix.description, (), fix.applicability)))
        elif not any(_overlap(edit, other) for edit in fix.edits for other in taken):
            taken += fix.edits
            chosen.append((finding, fix))
    return chosen


def _overlap(a: Edit, b: Edit) -> bool:
    return a.span.start <= b.span.end and b.span.start <= a.span.end


def _apply_round(text: str, path: str, fixes: list[tuple[Finding, Fix]]) -> tuple[str, list[Finding], list[Finding]]:
    edits = [edit for _, fix in fixes for edit in fix.edits]
    candidate = apply_edits(text, edits)
    if compiles(candidate, path):
        return candidate, [finding for finding, _ in fixes], []
    accepted: list[Edit] = []
    applied, rejected = [], []
    for finding, fix in fixes:  # each checked on the original text with those accepted so far
        if compiles(apply_edits(text, accepted + list(fix.edits)), path):
            accepted += fix.edits
            applied.append(finding)
        else:
            rejected.append(finding)
    return apply_edits(text, accepted), applied, rejected


def fix_text(path: str, text: str, lint: Lint, unsafe: bool, findings: list[Finding] | None = None) -> FixedText:
    """Applies the selected fixes of `lint(text)` round after round until nothing changes."""
    result = FixedText(text)
    findings = lint(text) if findings is None else findings
    rejected_keys: set[_Key] = set()
    while result.rounds < MAX_ROUNDS:
        fixes = [
            (f, f.fix) for f in findings if f.fix is not None and selected(f, unsafe) and _key(f) not in rejected_keys
        ]
        if not fixes:
            break
        text, applied, rejected = _apply_round(result.text, path, _non_overlapping(fixes))
        result.rejected += rejected
        rejected_keys |= {_key(f) for f in rejected}
        if text == result.text:
            break
        after = lint(text)
        ineffective = _ineffective(applied, findings, after, result.text, text)
        if ineffective:  # undo the round; the others are applied again without these
            result.ineffective += ineffective
            rejected_keys |= {_key(f) for f in ineffective}
            continue
        result.text, result.rounds = text, result.rounds + 1
        result.applied += applied
        findings = after
    result.remaining = [replace(f, fix=None) if _key(f) in rejected_keys else f for f in findings]
    return result


_Key = tuple[str, Span, str]


def _key(finding: Finding) -> _Key:
    return (finding.code, finding.span, finding.message)


def _ineffective(
    applied: list[Finding], before: list[Finding], after: list[Finding], old: str, new: str
) -> list[Finding]:
    """Applied fixes whose finding is still there, as often as before: a rewrite that cannot
    help (each round would add another useless clone up to the bound) is worse than none."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    counts_before = Counter(_gist(finding, old_lines) for finding in before)
    counts_after = Counter(_gist(finding, new_lines) for finding in after)
    return [
        finding
        for finding in applied
        if counts_after[_gist(finding, old_lines)] >= counts_before[_gist(finding, old_lines)]
    ]


def _gist(finding: Finding, lines: list[str]) -> tuple[str, str, str]:
    """A finding without its place: the same one after lines moved. Its line's text tells apart
    two findings whose messages read the same (`w[:, i] += a` and `w[:, i] += b`)."""
    number = finding.span.start.line
    source = lines[number - 1].strip() if 0 < number <= len(lines) else ""
    return finding.code, _LINE_NUMBER.sub("line N", finding.message), source


def encode(source: SourceFile, text: str) -> bytes:
    """What to write for `text`, read as `source` was; a notebook is its whole document with
    the cells of `text` (NotWritable when they no longer split into its cells)."""
    if source.notebook is not None:
        return (b"\xef\xbb\xbf" if source.bom else b"") + source.notebook.dumps(text).encode("utf-8")
    return (b"\xef\xbb\xbf" if source.bom else b"") + text.encode(source.encoding)


def write_atomically(path: Path, data: bytes) -> None:
    """Replaces `path` by a file holding `data`, with the same permissions, in one rename.
    A file nobody may write is refused: a rename would replace it regardless of its mode."""
    mode = os.stat(path).st_mode & 0o7777
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        raise PermissionError(errno.EACCES, "the file is read-only", str(path))
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise


@dataclass
class FileFix:
    path: Path
    source: SourceFile  # as read before fixing: how to write the result back
    result: FixedText

    @property
    def changed(self) -> bool:
        return self.result.text != self.source.text

    def encoded(self) -> bytes:
        """The fixed file's bytes, encoded as it was read."""
        return encode(self.source, self.result.text)

    def write(self) -> None:
        write_atomically(self.path, self.encoded())


def fix_file(path: Path, text: str | None, findings: Sequence[Finding], lint: Lint, unsafe: bool) -> FileFix | None:
    """The fixed text of one file whose check found `findings` in `text`; None when no fix is
    selected or the file cannot be read again. A file changed since it was checked is relinted."""
    if not any(selected(finding, unsafe) for finding in findings):
        return None
    try:
        source = read(path)
    except NotReadable:
        return None
    return fix_read(path, source, text, findings, lint, unsafe)


def fix_read(
    path: Path, source: SourceFile, text: str | None, findings: Sequence[Finding], lint: Lint, unsafe: bool
) -> FileFix:
    """The fixed text of `source` as read for `path` (from the file, or stdin); `findings` are
    those of `text`, reused when the source still holds it."""
    known = list(findings) if source.text == text else None
    return FileFix(path, source, fix_text(str(path), source.text, lint, unsafe, known))
