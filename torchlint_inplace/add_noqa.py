"""`--add-noqa`: a `# noqa: CODE` comment on every line with a finding, as ruff adds them, so
that a large code base can adopt the tool today and fix its findings over time.

The comment goes where `noqa.parse` reads it: at the end of the line the finding is reported
on (a statement's first line). A line that already has a `# noqa: ...` gets the new codes
merged into it; a line with another comment gets the directive after it. A line that ends
inside a string or with a backslash continuation cannot take a comment: it is left alone and
reported. The result must compile and must suppress every finding it was made for, or the file
is left as it was. TIP000 is never suppressed, so it gets no comment.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from . import noqa
from .diagnostics import NOT_CHECKED_CODE, Finding, RunWarning
from .fixes.apply import compiles

_LINE = re.compile(r"[^\r\n]*(\r\n|\r|\n|$)")
_DIRECTIVE = re.compile(r"#\s*noqa\s*:\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*)", re.IGNORECASE)


@dataclass(frozen=True)
class Annotated:
    """A file's text with directives added: how many lines got one, and the lines that could not."""

    text: str
    added: int
    warnings: tuple[RunWarning, ...] = ()


def _lines(text: str) -> list[tuple[str, str]]:
    """(content, line ending) for each physical line, as Python's tokenizer counts them."""
    found = [(match.group()[: match.start(1) - match.start()], match.group(1)) for match in _LINE.finditer(text)]
    return found[:-1] if found and found[-1] == ("", "") else found


def _layout(text: str) -> tuple[dict[int, tokenize.TokenInfo], set[int]]:
    """Each line's comment token, and the lines that end inside a multi-line token (a string)."""
    comments: dict[int, tokenize.TokenInfo] = {}
    inside: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(text, newline=None).readline):
            if token.type == tokenize.COMMENT:
                comments[token.start[0]] = token
            elif token.end[0] > token.start[0] and token.type not in (tokenize.NL, tokenize.NEWLINE):
                inside.update(range(token.start[0], token.end[0]))
    except (tokenize.TokenError, SyntaxError):
        pass  # a file the tokenizer refuses does not compile either: refused below
    return comments, inside


def _with_codes(content: str, comment: tokenize.TokenInfo | None, codes: set[str]) -> str:
    if comment is not None and (match := _DIRECTIVE.search(comment.string)):
        merged = sorted(set(re.findall(r"[A-Z]+[0-9]+", match["codes"].upper())) | codes)
        start = comment.start[1] + match.start("codes")
        return content[:start] + ", ".join(merged) + content[comment.start[1] + match.end("codes") :]
    return f"{content.rstrip()}  # noqa: {', '.join(sorted(codes))}"


def annotate(path: str, text: str, findings: Iterable[Finding]) -> Annotated:
    """`text` with a directive for each of `findings` (all of one file)."""
    findings = [finding for finding in findings if finding.code != NOT_CHECKED_CODE]
    wanted: dict[int, set[str]] = defaultdict(set)
    for finding in findings:
        wanted[finding.line].add(finding.code)
    lines = _lines(text)
    comments, inside = _layout(text)
    warnings: list[RunWarning] = []
    added = 0
    for number, codes in sorted(wanted.items()):
        content, ending = lines[number - 1]
        if number in inside or content.rstrip().endswith("\\"):
            warnings.append(
                RunWarning("cannot add a noqa comment: the line ends inside a string or continues", path, number)
            )
            continue
        lines[number - 1] = (_with_codes(content, comments.get(number), codes), ending)
        added += 1
    result = "".join(content + ending for content, ending in lines)
    refused = {warning.line for warning in warnings}
    suppressions = noqa.parse(result)
    if added and not (
        compiles(result, path) and all(suppressions.suppresses(f) for f in findings if f.line not in refused)
    ):
        return Annotated(
            text,
            0,
            (RunWarning("noqa comments not added: the result would not compile or not suppress the findings", path),),
        )
    return Annotated(result, added, tuple(warnings))
