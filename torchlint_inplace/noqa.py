"""Suppression comments, read from real comments only (via the tokenizer), as ruff reads them:

- `# noqa` on the line a finding is reported on (a statement's first line) suppresses it;
  `# noqa: TIP001, TIP003` (any spacing, commas or spaces, any case of `noqa`) only those codes.
  Like ruff, the directive may follow other comment text: `# type: ignore  # noqa: TIP001`.
- `# torchlint-inplace: noqa` on a line of its own disables the whole file;
  `# torchlint-inplace: noqa: TIP001` disables only those codes in the file.

TIP000 (file not checked) is never suppressed: it says the other findings may be missing.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from .diagnostics import NOT_CHECKED_CODE, Finding

_CODE = r"[A-Z]+[0-9]+"
_CODES = rf"(?P<codes>{_CODE}(?:[\s,]+{_CODE})*)"
_LINE = re.compile(rf"#\s*noqa\b(?::\s*{_CODES}?)?", re.IGNORECASE)
_FILE = re.compile(rf"#\s*torchlint-inplace\s*:\s*noqa\b(?::\s*{_CODES}?)?", re.IGNORECASE)

ALL = None  # a directive without codes covers every code


def _codes(match: re.Match[str]) -> frozenset[str] | None:
    codes = match.group("codes")
    return frozenset(re.findall(_CODE, codes.upper())) if codes else ALL


def _comments(text: str) -> Iterator[tuple[tokenize.TokenInfo, bool]]:
    """Each comment token and whether it stands on a line of its own. A file the tokenizer gives
    up on still yields the comments before the point where it stopped."""
    own_line = True
    try:
        for token in tokenize.generate_tokens(io.StringIO(text, newline=None).readline):
            if token.type == tokenize.COMMENT:
                yield token, own_line
            own_line = token.type in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
    except (tokenize.TokenError, SyntaxError):
        return


@dataclass(frozen=True)
class Suppressions:
    lines: dict[int, frozenset[str] | None] = field(default_factory=dict)  # line -> codes or ALL
    file_codes: frozenset[str] | None = frozenset()  # codes disabled in the whole file, or ALL

    @property
    def whole_file(self) -> bool:
        return self.file_codes is ALL

    def suppresses(self, finding: Finding) -> bool:
        if finding.code == NOT_CHECKED_CODE:
            return False
        if self.file_codes is ALL or finding.code in self.file_codes:
            return True
        if finding.line not in self.lines:
            return False
        codes = self.lines[finding.line]
        return codes is ALL or finding.code in codes

    def filter(self, findings: Iterable[Finding]) -> list[Finding]:
        return [finding for finding in findings if not self.suppresses(finding)]


def _union(current: frozenset[str] | None, new: frozenset[str] | None) -> frozenset[str] | None:
    return ALL if current is ALL or new is ALL else current | new


def parse(text: str) -> Suppressions:
    if "noqa" not in text.lower():  # the common case; tokenizing costs a fifth of a parse
        return Suppressions()
    lines: dict[int, frozenset[str] | None] = {}
    file_codes: frozenset[str] | None = frozenset()
    for token, own_line in _comments(text):
        if own_line and (match := _FILE.match(token.string)):
            file_codes = _union(file_codes, _codes(match))
        elif match := _LINE.search(token.string):
            line = token.start[0]
            lines[line] = _union(lines.get(line, frozenset()), _codes(match))
    return Suppressions(lines=lines, file_codes=file_codes)
