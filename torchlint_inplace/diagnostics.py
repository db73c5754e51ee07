"""What a finding is: the one value that flows from the analysis to rules, reporters and the fixer.

Everything here is immutable and plain data so that findings can be cached, sent between
processes and compared in tests without dragging syntax trees along.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"


class Applicability(str, Enum):
    """ruff's model: safe fixes keep every value any other reader observes; unsafe ones may not."""

    SAFE = "safe"
    UNSAFE = "unsafe"


@dataclass(frozen=True, order=True)
class Position:
    line: int  # 1-based
    column: int  # 0-based, in characters


@dataclass(frozen=True, order=True)
class Span:
    start: Position
    end: Position


@dataclass(frozen=True)
class Related:
    """Another place that explains the finding: where the tensor was saved, or who else reads it."""

    path: str
    span: Span
    message: str


@dataclass(frozen=True)
class Edit:
    span: Span
    content: str


@dataclass(frozen=True)
class Fix:
    description: str
    edits: tuple[Edit, ...]
    applicability: Applicability


# The key of `Finding.properties` under which `--confirm` leaves a finding's status.
CONFIRMATION = "confirmation"
# The key under which a finding keeps what its path assumed (`attn_drop > 0` (default 0.0)).
CONDITIONS = "conditions"


@dataclass(frozen=True)
class Finding:
    path: str
    code: str
    name: str
    message: str
    severity: Severity
    span: Span
    consequence: str  # "raises at backward", "raises now (leaf)", "silently changes `h` read at line 12"
    related: tuple[Related, ...] = ()
    help: str = ""
    fix: Fix | None = None
    properties: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def line(self) -> int:
        return self.span.start.line

    @property
    def confirmation(self) -> str | None:
        """What `--confirm` found running the code (`confirmed: raises`, `benign`, ...), if it ran."""
        return self.properties.get(CONFIRMATION)

    @property
    def conditions(self) -> list[str]:
        """What must hold for the finding to happen (a configuration's option, the mode); [] when
        nothing worth saying was assumed. Stated in the message too."""
        return list(self.properties.get(CONDITIONS, ()))

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.span.start.line, self.span.start.column, self.code)


@dataclass(frozen=True)
class RunWarning:
    """Something about the run the user should hear that is no finding: a fix dropped, a file
    that could not be written, a walk that found nothing. Library code returns these; the
    command prints them (`warning: path:line: message`) on stderr."""

    message: str
    path: str | None = None
    line: int | None = None


# A file that could not be analysed is reported as a finding under this code, so that every
# reporter, exit code and summary treats it like any other problem; it cannot be deselected.
NOT_CHECKED_CODE = "TIP000"
NOT_CHECKED_NAME = "file-not-checked"


def not_checked(path: str, message: str, line: int = 1, column: int = 0) -> Finding:
    pos = Position(line, column)
    return Finding(
        path=path,
        code=NOT_CHECKED_CODE,
        name=NOT_CHECKED_NAME,
        message=message,
        severity=Severity.ERROR,
        span=Span(pos, pos),
        consequence="file not checked",
    )
