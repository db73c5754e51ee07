"""Findings as the Language Server Protocol speaks of them: diagnostics, text edits, code actions.

Pure functions over `api` results, so that what an editor is sent can be tested without a
server. Positions: a finding counts lines from 1 and columns in code points; LSP counts both
from 0, columns in the UTF-16 code units most clients use (`Encode`, the session's codec).
A notebook's findings are positioned in its joined cells (`api.checked_text`); `Place` says
which document (a cell) and which line there each line of that text is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lsprotocol import types

from .. import ruledoc
from ..add_noqa import annotate
from ..diagnostics import Applicability, Edit, Finding, Position, Severity, Span

SOURCE = "torchlint-inplace"
FIX_ALL = f"{types.CodeActionKind.SourceFixAll.value}.{SOURCE}"

# A document's uri, a 0-based line and a code-point column there -> that position in the client's units.
Encode = Callable[[str, int, int], types.Position]


@dataclass(frozen=True)
class Place:
    """Where a line of the checked text is shown: the document's uri and its 0-based line."""

    uri: str
    line: int


# The 1-based line of the checked text -> where it is shown (None: nowhere, a cell marker).
Locate = Callable[[int], Place | None]


def _range(span: Span, locate: Locate, encode: Encode) -> tuple[str, types.Range] | None:
    """The document and range of a span of the checked text; None where it has no single place."""
    start, end = locate(span.start.line), locate(span.end.line)
    if start is None or end is None or start.uri != end.uri:
        return None
    return start.uri, types.Range(
        encode(start.uri, start.line, span.start.column), encode(end.uri, end.line, span.end.column)
    )


def diagnostic(
    finding: Finding, locate: Locate, encode: Encode, uri_of: Callable[[str], str]
) -> tuple[str, types.Diagnostic] | None:
    """The diagnostic of a finding, and the uri of the document it belongs to; related places
    in other files point at those files (`uri_of` a path)."""
    placed = _range(finding.span, locate, encode)
    if placed is None:
        return None
    uri, where = placed
    related = []
    for item in finding.related:
        if uri_of(item.path) == uri_of(finding.path):
            shown = _range(item.span, locate, encode)
        else:
            shown = (uri_of(item.path), _plain_range(item.span))
        if shown is not None:
            related.append(types.DiagnosticRelatedInformation(types.Location(shown[0], shown[1]), item.message))
    return uri, types.Diagnostic(
        range=where,
        message=finding.message + (f"\n{finding.consequence}" if finding.consequence else ""),
        severity=types.DiagnosticSeverity.Error
        if finding.severity is Severity.ERROR
        else types.DiagnosticSeverity.Warning,
        code=finding.code,
        code_description=types.CodeDescription(href=ruledoc.url(finding.code)),
        source=SOURCE,
        related_information=related or None,
    )


def _plain_range(span: Span) -> types.Range:
    """A range in a file the session has not opened: code points stand in for UTF-16 units."""
    return types.Range(
        types.Position(span.start.line - 1, span.start.column), types.Position(span.end.line - 1, span.end.column)
    )


def text_edits(edits: Sequence[Edit], locate: Locate, encode: Encode) -> dict[str, list[types.TextEdit]] | None:
    """The edits by document; None when one of them has no place (it crosses a cell)."""
    changes: dict[str, list[types.TextEdit]] = {}
    for edit in edits:
        placed = _range(edit.span, locate, encode)
        if placed is None:
            return None
        changes.setdefault(placed[0], []).append(types.TextEdit(placed[1], edit.content))
    return changes


def quick_fix(finding: Finding, locate: Locate, encode: Encode, unsafe: bool) -> types.CodeAction | None:
    """The finding's own fix as a quick fix: safe ones always, unsafe ones when the client's
    settings ask for them (`unsafeFixes`), labelled as such."""
    fix = finding.fix
    if fix is None or (fix.applicability is Applicability.UNSAFE and not unsafe):
        return None
    changes = text_edits(fix.edits, locate, encode)
    if changes is None:
        return None
    return types.CodeAction(
        title=f"{fix.description} ({fix.applicability.value}, {finding.code})",
        kind=types.CodeActionKind.QuickFix,
        edit=types.WorkspaceEdit(changes=changes),
        is_preferred=fix.applicability is Applicability.SAFE,
    )


def disable_for_line(finding: Finding, text: str, locate: Locate, encode: Encode) -> types.CodeAction | None:
    """ "Disable CODE for this line": the line as `--add-noqa` would write it."""
    annotated = annotate(finding.path, text, [finding])
    if not annotated.added:
        return None
    old, new = text.splitlines()[finding.line - 1], annotated.text.splitlines()[finding.line - 1]
    span = Span(Position(finding.line, 0), Position(finding.line, len(old)))
    changes = text_edits([Edit(span, new)], locate, encode)
    if changes is None:
        return None
    return types.CodeAction(
        title=f"Disable {finding.code} for this line",
        kind=types.CodeActionKind.QuickFix,
        edit=types.WorkspaceEdit(changes=changes),
    )


def replacement(uri: str, old: str, new: str, encode: Encode) -> types.TextEdit | None:
    """One edit that turns the document `uri`, holding `old`, into `new`: the lines between
    what the two share at the start and at the end (the rest of the document, and the cursor
    there, stay put)."""
    if old == new:
        return None
    before, after = old.splitlines(keepends=True), new.splitlines(keepends=True)
    start = 0
    while start < min(len(before), len(after)) and before[start] == after[start]:
        start += 1
    end = 0
    while end < min(len(before), len(after)) - start and before[-1 - end] == after[-1 - end]:
        end += 1
    if end == 0 and before and not before[-1].endswith(("\n", "\r")):  # up to the end of an unterminated line
        stop = encode(uri, len(before) - 1, len(before[-1]))
    else:
        stop = types.Position(len(before) - end, 0)
    return types.TextEdit(types.Range(types.Position(start, 0), stop), "".join(after[start : len(after) - end]))
