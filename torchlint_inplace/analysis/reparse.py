"""A new version of a file parsed from the old version's tree: the top-level statements before
and after the edit are kept, only the text between them is parsed.

An editor sends a new version of the buffer on every pause in typing, nearly all of it the
text it had; LibCST's parse of a 1,000-line file is a third of analysing it. `reparse`
builds the tree `libcst.parse_module` would build for the new text (the same nodes, field for
field: tests/test_reparse.py compares them with `deep_equals` over every fixture and random
edits), from the statements of the old tree the edit did not touch and a parse of the rest,
or returns None where it cannot be sure of that, and the caller parses the whole text.

The old text is cut into pieces, one per top-level statement: its code with the comment and
blank lines LibCST gave it (`leading_lines`), between the module's header and its footer. The
statements whose pieces lie wholly in the text the two versions share at the start (prefix)
and at the end (suffix) are kept. LibCST's choice of owner for the comment and blank lines
between two statements looks ahead (a blank line after a block belongs to the block when an
indented comment follows, else to the next statement), so a cut is made only where every
line from it to the next line of code is empty or a comment in column 0, and that line of
code starts a statement (column 0, not `else:`/`except:`...). The module's own fields are
those the parser would detect: the indentation of the first indented block, the first line
break, and whether the text ends with one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

import libcst as cst

from .positions import Edit, derive, line_of

# A line that continues the compound statement above it rather than starting one.
_CLAUSE = re.compile(r"(?:else|elif|except|finally)\b")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")
# What a module's body holds: statements that carry their own leading lines.
_Statement = cst.SimpleStatementLine | cst.BaseCompoundStatement


@dataclass(frozen=True)
class Pieces:
    """Where each top-level statement's code begins in the text a module was parsed from
    (`starts`, one per statement), and where its footer begins."""

    starts: tuple[int, ...]
    footer: int

    @classmethod
    def of(cls, module: cst.Module) -> Pieces:
        header = sum(len(module.code_for_node(line)) for line in module.header)
        lengths = [len(module.code_for_node(statement)) for statement in module.body]
        ends = list(accumulate(lengths, initial=header))
        return cls(tuple(ends[:-1]), ends[-1])

    def end(self, index: int) -> int:
        """Where the piece of statement `index` ends (the next one's start, or the footer's)."""
        return self.starts[index + 1] if index + 1 < len(self.starts) else self.footer


class Parsed:
    """A text and its tree; the pieces of the tree's statements in the text are found when a
    new version is first parsed from it (a codegen of the whole module)."""

    def __init__(self, text: str, module: cst.Module, pieces: Pieces | None = None) -> None:
        self.text, self.module, self._pieces = text, module, pieces

    @property
    def pieces(self) -> Pieces:
        if self._pieces is None:
            self._pieces = Pieces.of(self.module)
        return self._pieces


def reparse(old: Parsed, text: str) -> Parsed | None:
    """The tree of `text`, built from `old`'s untouched statements and a parse of the text
    between them; None where the result might differ from parsing `text` whole, or where the
    changed part does not parse on its own (the whole text's parse says why)."""
    before, module = old.text, old.module
    count = len(module.body)
    if not count or not module.has_trailing_newline or not text.endswith(("\n", "\r")):
        return None  # the last piece's code and its text differ by the line break LibCST adds
    pieces = old.pieces
    shared = _common_prefix(before, text)
    kept = 0  # statements kept from the start
    while kept < count and pieces.end(kept) <= shared:
        kept += 1
    while kept > 0 and not _cut(text, pieces.end(kept - 1)):
        kept -= 1
    start = pieces.end(kept - 1) if kept else 0
    shared_end = _common_suffix(before, text, min(len(before), len(text)) - start)
    tail = count  # the first statement kept at the end (count: none)
    while tail > kept and pieces.starts[tail - 1] >= len(before) - shared_end:
        tail -= 1
    shift = len(text) - len(before)
    while tail < count and not _cut(text, pieces.starts[tail] + shift):
        tail += 1
    if kept == 0 and tail == count:
        return None  # nothing to keep
    stop = pieces.starts[tail] + shift if tail < count else len(text)
    changed = text[start:stop]
    if kept == 0 and not _has_line_break(changed):
        return None  # the first line break, which sets the module's, would lie in a kept piece
    try:
        middle = cst.parse_module(changed)
    except (cst.ParserSyntaxError, RecursionError):
        return None
    head, body, foot = list(module.body[:kept]), list(middle.body), list(module.body[tail:])
    # Comment and blank lines of the changed part that no statement of its own owns: in the
    # whole text they lead the next statement (at the start of the text, they are its header).
    leading = list(middle.header) if kept else []
    trailing = list(middle.footer) if foot else []
    if body:
        body = _lead(body, leading)
        foot = _lead(foot, trailing)
    elif kept and foot:
        foot = _lead(foot, [*leading, *trailing])
    else:
        return None  # a first statement whose leading lines the header takes, or comments after the last
    indent = _default_indent([(head, module), (body, middle), (foot, module)])
    if indent is None:
        return None
    rebuilt = cst.Module(
        body=[*head, *body, *foot],
        header=module.header if kept else middle.header,
        footer=module.footer if foot else middle.footer,
        encoding=module.encoding,
        default_indent=indent,
        default_newline=module.default_newline if kept else middle.default_newline,
        has_trailing_newline=True,
    )
    _derive_positions(old, rebuilt, text, start, tail, [*(() if kept else middle.header), *body], foot, middle)
    at = start if kept else sum(len(middle.code_for_node(line)) for line in middle.header)
    starts = list(pieces.starts[:kept])
    for statement in body:
        starts.append(at)
        at += len(middle.code_for_node(statement))
    if foot:
        starts += [at, *(offset + shift for offset in pieces.starts[tail + 1 :])]
        footer = pieces.footer + shift
    else:
        footer = at
    return Parsed(text, rebuilt, Pieces(tuple(starts), footer))


def _derive_positions(
    old: Parsed,
    rebuilt: cst.Module,
    text: str,
    start: int,
    tail: int,
    fresh: list[cst.CSTNode],
    foot: list[_Statement],
    middle: cst.Module,
) -> None:
    """Lets `rebuilt`'s positions come from `old`'s: only the nodes it did not take from
    `old` (`fresh`, and the first kept statement after the edit when it was given new
    leading lines) are generated again."""
    pieces, count = old.pieces, len(old.module.body)
    if foot and foot[0] is not old.module.body[tail]:
        fresh.append(foot[0])
        tail += 1
    if not foot:
        fresh += middle.footer
    moved = pieces.starts[tail] if tail < count else pieces.footer
    shift = line_of(text, moved + len(text) - len(old.text)) - line_of(old.text, moved)
    edit = Edit(tuple(fresh), line_of(text, start), line_of(old.text, moved), shift, (line_of(text, len(text)), 0))
    derive(rebuilt, old.module, edit)


def _lead(statements: list[_Statement], lines: Sequence[cst.EmptyLine]) -> list[_Statement]:
    """`statements` with `lines` in front of the first one's leading lines."""
    if not lines:
        return statements
    first = statements[0]
    return [first.with_changes(leading_lines=[*lines, *first.leading_lines]), *statements[1:]]


def _cut(text: str, at: int) -> bool:
    """Whether a statement may start its piece at offset `at` of `text` whatever precedes it:
    the lines from there to the next line of code are empty or comments in column 0, and that
    line starts a statement."""
    if at > 0 and text[at - 1] not in "\r\n":
        return False
    for match in _LINE.finditer(text, at):
        line = match.group()
        if not line:
            return False  # no code after the cut
        if line in ("\n", "\r\n", "\r") or line.startswith("#"):
            continue
        return not line[0].isspace() and _CLAUSE.match(line) is None
    return False


def _default_indent(parts: list[tuple[list[_Statement], cst.Module]]) -> str | None:
    """The module's indentation as the parser detects it, the first indented block's, when each
    part's blocks were parsed with that same default (a block at the default has no indent of
    its own); None where that is not so or not known."""
    detected: str | None = None
    for statements, source in parts:
        for statement in statements:
            if isinstance(statement, cst.SimpleStatementLine):
                continue
            body = getattr(statement, "body", None)
            if not isinstance(body, cst.IndentedBlock):
                return None  # `if x: pass` then an indented `else:` block, a `match`: not worth it
            if detected is None:
                detected = source.default_indent if body.indent is None else body.indent
            if source.default_indent != detected:
                return None
    return " " * 4 if detected is None else detected


def _has_line_break(text: str) -> bool:
    return "\n" in text or "\r" in text


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix, by halving (string comparisons run in C)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def _common_suffix(a: str, b: str, limit: int) -> int:
    """The length of the longest common suffix, at most `limit`."""
    low, high = 0, max(limit, 0)
    while low < high:
        mid = (low + high + 1) // 2
        if a[len(a) - mid :] == b[len(b) - mid :]:
            low = mid
        else:
            high = mid - 1
    return low
