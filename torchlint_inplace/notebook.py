"""Jupyter notebooks (nbformat 4 JSON), read and written with the standard library: the linter
itself must not need nbformat.

A notebook is linted as one module, its code cells joined in cell order, so that a tensor saved
in one cell and written in a later one is found. Before each cell the joined text holds a
marker line, a comment naming the cell's number (every cell of the notebook counts, from 1, as
ruff and Jupyter count them). The markers keep the cells apart through everything that treats
the joined text as a file's text (the cache, `# noqa`, fixes in rounds, `--add-noqa`): a line
maps back to its cell and its line there by the nearest marker above it (`CellIndex`), and a
fixed text splits back into cells at its markers however many lines the fixes added.

The joined text keeps IPython's syntax as written (`%matplotlib inline`, `!pip install x`,
`files = !ls`, `torch.nn.Linear?`): it is what code frames show and what fixes edit.
`python_source` masks those lines for the parser character for character, so no position
moves. Cells the linter does not read (markdown, raw, cells run by a cell magic such as
`%%time` or `%%bash`) stay out of the joined text and are written back untouched.

Writing back (`Notebook.dumps`) changes only the `source` of the cells whose text changed and
keeps everything else: outputs, execution counts, metadata, cell ids, key order, the file's
indentation, its line endings and whether it ends with a newline.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import PurePath
from typing import Any

SUFFIX = ".ipynb"

MARKER = "#%% torchlint-inplace cell {}"
_MARKER_LINE = re.compile(r"^#%% torchlint-inplace cell (\d+)$", re.MULTILINE)
_LINES = re.compile(r"[^\n]*\n|[^\n]+\Z")
_LINE_WORDS = re.compile(r"\bline (\d+)\b(?! of )")

# IPython syntax at the start of a logical line: a line magic, a shell escape, a help request
# (`?torch.nn`, `torch.nn?`), and the assignments `x = %time f()` / `files = !ls`.
_ESCAPE = re.compile(r"[ \t]*(?P<magic>(?:%|!|\?).*)")
_HELP = re.compile(r"[ \t]*(?P<magic>[\w.]+\?\??)[ \t]*")
_ASSIGNED = re.compile(r"[ \t]*[\w.]+(?:[ \t]*,[ \t]*[\w.]+)*[ \t]*=[ \t]*(?P<magic>[%!].*)")


class NotANotebook(ValueError):
    """The text is not a notebook this linter can read; the message says why, for the user."""


class NotWritable(ValueError):
    """A joined text that no longer splits into the notebook's cells (a fix moved a marker)."""


def is_notebook(path: str | PurePath) -> bool:
    return PurePath(path).suffix == SUFFIX


# ----------------------------------------------------------------------------- positions


@dataclass(frozen=True)
class CellIndex:
    """Where each cell starts in a joined text: the marker lines and the cells they name."""

    markers: tuple[int, ...]  # 1-based line of each marker, ascending
    cells: tuple[int, ...]  # the cell number each marker names

    def locate(self, line: int) -> tuple[int, int] | None:
        """(cell number, 1-based line within the cell) of a line of the joined text; None for a
        marker line and what precedes the first marker, which belong to no cell."""
        at = bisect.bisect_left(self.markers, line)
        if at == 0 or (at < len(self.markers) and self.markers[at] == line):
            return None
        return self.cells[at - 1], line - self.markers[at - 1]

    def relabel(self, words: str) -> str:
        """A finding's words with each `line N` of the joined text as the user finds it,
        `cell C, line L` (`line N of other.py` names another file and stays)."""

        def cell_line(match: re.Match[str]) -> str:
            where = self.locate(int(match.group(1)))
            return match.group() if where is None else f"cell {where[0]}, line {where[1]}"

        return _LINE_WORDS.sub(cell_line, words)


@lru_cache(maxsize=64)
def cell_index(text: str) -> CellIndex:
    markers, cells = [], []
    for match in _MARKER_LINE.finditer(text):
        markers.append(text.count("\n", 0, match.start()) + 1)
        cells.append(int(match.group(1)))
    return CellIndex(tuple(markers), tuple(cells))


def split(text: str) -> dict[int, str]:
    """The text of each cell of a joined text, by cell number (each ends with the newline the
    join gave it). Raises NotWritable when text precedes the first marker or a cell repeats."""
    matches = list(_MARKER_LINE.finditer(text))
    if not matches or text[: matches[0].start()].strip():
        raise NotWritable("the notebook's code no longer starts at its first cell")
    cells: dict[int, str] = {}
    for match, following in zip(matches, [*matches[1:], None], strict=True):
        number = int(match.group(1))
        if number in cells:
            raise NotWritable(f"cell {number} appears twice")
        end = len(text) if following is None else following.start()
        cells[number] = text[match.end() + 1 : end]
    return cells


def join(cells: Mapping[int, str]) -> str:
    """The joined text of code cells given by number (an editor's notebook document)."""
    return "".join(f"{MARKER.format(number)}\n{_terminated(text)}" for number, text in sorted(cells.items()))


def _terminated(text: str) -> str:
    return text if text.endswith("\n") or not text else text + "\n"


# ----------------------------------------------------------------------------- masking IPython syntax


def python_source(text: str) -> str:
    """A joined text with IPython's syntax masked, line for line and column for column: what
    Python (and LibCST) can parse. Only lines that start a logical line are looked at, so a
    `%` continuing an expression inside brackets stays the operator it is."""
    out: list[str] = []
    scanner = _Scanner()
    masking_continuation = False
    for line in _LINES.findall(text):
        body = line.rstrip("\r\n")
        ending = line[len(body) :]
        if _MARKER_LINE.match(body):
            scanner = _Scanner()  # IPython compiles each cell on its own
            masking_continuation = False
            out.append(line)
            continue
        if masking_continuation:  # a magic's arguments continued with a backslash
            out.append(_commented(body) + ending)
            masking_continuation = body.endswith("\\")
            continue
        match = (
            (_ASSIGNED.fullmatch(body) or _ESCAPE.fullmatch(body) or _HELP.fullmatch(body))
            if scanner.at_start
            else None
        )
        if match is None:
            scanner.feed(line)
            out.append(line)
            continue
        start = match.start("magic")
        magic = body[start:]
        out.append(body[:start] + "0" + ("#" + magic[2:] if len(magic) > 1 else "") + ending)
        masking_continuation = body.endswith("\\")
    return "".join(out)


def _commented(body: str) -> str:
    stripped = body.lstrip()
    if not stripped:
        return body
    indent = len(body) - len(stripped)
    return body[:indent] + "#" + stripped[1:]


class _Scanner:
    """Just enough of Python's tokenizer to tell where a logical line starts: open brackets,
    open strings (triple-quoted ones span lines) and backslash continuations."""

    def __init__(self) -> None:
        self.depth = 0
        self.quote: str | None = None
        self.continued = False

    @property
    def at_start(self) -> bool:
        return self.depth == 0 and self.quote is None and not self.continued

    def feed(self, line: str) -> None:
        self.continued = False
        index, length = 0, len(line)
        while index < length:
            char = line[index]
            if self.quote is not None:
                if char == "\\":
                    index += 2
                    continue
                if line.startswith(self.quote, index):
                    index += len(self.quote)
                    self.quote = None
                    continue
                if char == "\n" and len(self.quote) == 1:
                    self.quote = None  # an unterminated string: Python reports it, not us
                index += 1
                continue
            if char == "#":
                return
            if char in "'\"":
                self.quote = line[index : index + 3] if line.startswith(char * 3, index) else char
                index += len(self.quote)
                continue
            if char in "([{":
                self.depth += 1
            elif char in ")]}":
                self.depth = max(0, self.depth - 1)
            elif char == "\\" and not line[index + 1 :].strip("\r\n"):
                self.continued = True
            index += 1


# ----------------------------------------------------------------------------- the notebook file


@dataclass(frozen=True)
class _Layout:
    """How the file was serialised, so that writing it back changes only what was fixed."""

    indent: str | None
    separators: tuple[str, str]
    ensure_ascii: bool
    newline: str
    trailing_newline: bool

    @classmethod
    def of(cls, text: str) -> _Layout:
        indented = re.search(r"\n([ \t]+)\S", text)
        indent = indented.group(1) if indented else None
        separators = (",", ": ") if indent is not None else ((", ", ": ") if '": ' in text else (",", ":"))
        ascii_only = text.isascii()
        return cls(
            indent=indent,
            separators=separators,
            ensure_ascii=ascii_only and "\\u" in text,
            newline="\r\n" if "\r\n" in text else "\n",
            trailing_newline=text.endswith("\n"),
        )

    def dumps(self, document: Any) -> str:
        text = json.dumps(document, indent=self.indent, separators=self.separators, ensure_ascii=self.ensure_ascii)
        text = text.replace("\n", self.newline)
        return text + self.newline if self.trailing_newline else text


@dataclass(frozen=True, eq=False)
class Notebook:
    """A parsed notebook: its JSON document, how it was laid out, and the joined text of the
    code cells the linter reads (`source`)."""

    document: dict[str, Any]
    layout: _Layout
    source: str
    linted: tuple[int, ...]  # the numbers of the cells in `source`

    @classmethod
    def parse(cls, text: str) -> Notebook:
        try:
            document = json.loads(text)
        except json.JSONDecodeError as error:
            raise NotANotebook(f"not a notebook: invalid JSON ({error.msg} at line {error.lineno})") from None
        except RecursionError:
            raise NotANotebook("not a notebook: its JSON nests too deeply") from None
        cells = _cells(document)
        code = {number: text for number, text in cells.items() if not _runs_a_cell_magic(text)}
        if any(_MARKER_LINE.search(text) for text in code.values()):
            raise NotANotebook("a code cell holds a line torchlint-inplace uses to separate cells; not checked")
        return cls(document, _Layout.of(text), join(code), tuple(sorted(code)))

    def dumps(self, source: str) -> str:
        """The notebook's JSON text with its code cells replaced by those of `source` (a joined
        text in the form of `self.source`); raises NotWritable when it does not split into the
        same cells."""
        new = split(source)
        if sorted(new) != list(self.linted):
            raise NotWritable("the fixed code no longer splits into the notebook's cells")
        old = split(self.source)
        cells = list(self.document["cells"])
        for number in self.linted:
            if new[number] != old[number]:
                cell = cells[number - 1]
                text = _unterminated(new[number], _source_text(cell["source"]))
                cells[number - 1] = {
                    **cell,
                    "source": _LINES.findall(text) if isinstance(cell["source"], list) else text,
                }
        return self.layout.dumps({**self.document, "cells": cells})


def cell_sources(text: str) -> list[str]:
    """The source of every cell of the notebook `text` (its JSON), in order, markdown and raw
    cells too: what an editor's cell documents hold. Raises NotANotebook as `Notebook.parse`."""
    return [
        _source_text(cell["source"]) if _is_source(cell.get("source")) else ""
        for cell in Notebook.parse(text).document["cells"]
    ]


def _cells(document: Any) -> dict[int, str]:
    """The text of each code cell, by number; raises NotANotebook for what is no nbformat 4."""
    if not isinstance(document, dict) or "cells" not in document:
        raise NotANotebook("not a notebook: no `cells` list at the top level")
    version = document.get("nbformat")
    if version != 4:
        raise NotANotebook(
            f"nbformat {version} notebooks are not supported (only nbformat 4); "
            "convert it with `jupyter nbconvert --to notebook`"
        )
    cells = document["cells"]
    if not isinstance(cells, list):
        raise NotANotebook("not a notebook: `cells` is not a list")
    code = {}
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
            raise NotANotebook(f"not a notebook: cell {number} has no `cell_type`")
        if cell["cell_type"] != "code":
            continue
        if not _is_source(cell.get("source")):
            raise NotANotebook(f"not a notebook: cell {number}'s `source` is neither a string nor a list of strings")
        code[number] = _source_text(cell["source"])
    return code


def _is_source(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, list) and all(isinstance(item, str) for item in value))


def _source_text(value: str | list[str]) -> str:
    return value if isinstance(value, str) else "".join(value)


def _runs_a_cell_magic(text: str) -> bool:
    """`%%time`, `%%bash`, ...: the cell's body is input to the magic, not Python."""
    return text.lstrip().startswith("%%")


def _unterminated(text: str, original: str) -> str:
    """A split cell's text without the newline the join added to a cell that had none."""
    return text[:-1] if text.endswith("\n") and not original.endswith("\n") else text
