"""What every reporter is handed: the findings plus the context needed to show them well.

Paths are shown relative to `root` in every format, so that the same run prints the same
text on any machine and SARIF/GitHub annotations resolve against the repository checkout.
A notebook's findings are placed in its joined cells (`notebook.py`); every format shows
them as ruff does, by cell and line within the cell (`in_cell`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path, PurePath

from .. import notebook
from ..diagnostics import Finding, Position

# Python's tokenizer breaks lines only on these; str.splitlines() also breaks on \f, \x1c, ...
# which would shift every line number after such a character.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@lru_cache(maxsize=64)
def _split_lines(text: str) -> tuple[str, ...]:
    return tuple(_LINE_BREAK.split(text))


@dataclass(frozen=True)
class Report:
    findings: Sequence[Finding]  # already sorted by Finding.sort_key
    files_checked: int
    root: Path
    sources: Mapping[str, str] = field(default_factory=dict)  # finding path -> text, for code frames
    fixed: int = 0  # fixes applied by --fix, counted in the summary

    def relative_path(self, path: str) -> str | None:
        """`path` relative to root in posix form, or None when it lies outside root."""
        try:
            relative = Path(os.path.abspath(path)).relative_to(os.path.abspath(self.root))
        except ValueError:
            return None
        return relative.as_posix()

    def display_path(self, path: str) -> str:
        relative = self.relative_path(path)
        return relative if relative is not None else PurePath(path).as_posix()

    def source_line(self, path: str, line: int) -> str | None:
        """The text of 1-based `line`, or None when the source is unknown or does not reach it."""
        text = self.sources.get(path)
        if text is None:
            return None
        lines = _split_lines(text)
        return lines[line - 1] if 1 <= line <= len(lines) else None

    def cell(self, path: str, line: int) -> tuple[int, int] | None:
        """For a line of a notebook's joined cells: (cell number, line within that cell)."""
        text = self.sources.get(path)
        if text is None or not notebook.is_notebook(path):
            return None
        return notebook.cell_index(text).locate(line)

    def in_cell(self, path: str, position: Position) -> tuple[int | None, Position]:
        """Where the user finds `position`: its cell (None outside a notebook) and its line
        there; the column is the same."""
        where = self.cell(path, position.line)
        return (None, position) if where is None else (where[0], Position(where[1], position.column))
