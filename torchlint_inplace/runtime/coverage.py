"""What one driver's run shows about the file's lines: which ran, which raised, which changed.

`observed` runs a call under the culprit tracer while recording the lines of the file that
execute; an in-place error is blamed on the file's line it names (`Outcome.raised_at`), and the
fix comparison adds the lines whose fix changes the results (`Outcome.changed`). `Outcome.status`
turns that into a line's status.
"""

from __future__ import annotations

import re
import sys
import traceback
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

from .report import InplaceCulpritError
from .statuses import BENIGN, CONFIRMED, NOT_REACHED
from .tracer import trace

if TYPE_CHECKING:
    from _typeshed import TraceFunction

# Autograd's refusals of an in-place write on the spot (a leaf, a view of one, a multi-output
# view) and a custom Function's broken contract: raised where the write happens.
REFUSED_WRITE = re.compile(
    r"in-place operation|is a view and is being modified inplace|modified by an inplace operation|marked as dirty"
)
OUTPUT_OF_FUNCTION = re.compile(r"Output \d+ of (\w+) is a view")


class Outcome:
    """What one driver's runs showed about the requested lines of the file."""

    def __init__(self, file: str, requested: list[int], spans: dict[str, range], driver: str) -> None:
        self.file = file
        self.requested = set(requested)
        self.spans = spans  # top-level class -> its lines, to blame a Function's broken contract
        self.driver = driver
        self.raised_at: set[int] = set()
        self.executed: set[int] = set()
        self.changed: dict[int, str] = {}  # line -> its `confirmed: changes results (how)` status

    def status(self, line: int, owned: bool) -> str | None:
        if line in self.raised_at:
            return CONFIRMED
        if line in self.changed:
            return self.changed[line]
        if line in self.executed:
            return BENIGN
        return NOT_REACHED if owned else None

    def blame_refusal(self, error: RuntimeError) -> None:
        """Autograd refused an in-place write on the spot. It names no line when a custom
        Function broke its contract (reported after `forward` returned, or at the caller's
        later write to the Function's output): then the Function's executed lines are blamed."""
        lines = [
            frame.lineno
            for frame in traceback.extract_tb(error.__traceback__)
            if frame.filename == self.file and frame.lineno is not None
        ]
        if lines:
            self.raised_at.add(lines[-1])
        named = OUTPUT_OF_FUNCTION.search(str(error))
        culprit = named.group(1) if named else self.driver if not lines and "marked as dirty" in str(error) else None
        span = self.spans.get(culprit or "", range(0))
        self.raised_at |= {line for line in self.requested & self.executed if line in span}


def observed(call: Callable[[], object], outcome: Outcome) -> bool:
    """Runs `call` under the tracer, recording the file's executed lines. An in-place error is
    recorded at the file's line it names (True is returned); any other exception propagates."""
    file = outcome.file

    def tracer(frame: FrameType, event: str, arg: object) -> TraceFunction | None:
        if frame.f_code.co_filename != file:
            return None
        if event == "line":
            outcome.executed.add(frame.f_lineno)
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        with trace():
            call()
    except InplaceCulpritError as error:
        outcome.raised_at |= {line for write in error.writes for line in write.lines_in(file)}
        return True
    except RuntimeError as error:
        if not REFUSED_WRITE.search(str(error)):
            raise
        outcome.blame_refusal(error)
        return True
    finally:
        sys.settrace(previous)
    return False
