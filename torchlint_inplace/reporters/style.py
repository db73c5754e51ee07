"""ANSI colouring that disappears completely when colour is off, so plain output stays
byte-for-byte stable for pipes, files and golden tests."""

from __future__ import annotations

from dataclasses import dataclass

from ..diagnostics import Severity

BOLD = "1"
DIM = "2"
RED = "31"
GREEN = "32"
YELLOW = "33"
BLUE = "34"
CYAN = "36"


@dataclass(frozen=True)
class Palette:
    enabled: bool

    def paint(self, text: str, *codes: str) -> str:
        if not self.enabled or not text:
            return text
        return f"\x1b[{';'.join(codes)}m{text}\x1b[0m"

    def severity(self, text: str, severity: Severity) -> str:
        return self.paint(text, BOLD, severity_colour(severity))


def severity_colour(severity: Severity) -> str:
    return RED if severity is Severity.ERROR else YELLOW
