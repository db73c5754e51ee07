"""What the command does only for a person at a terminal: colour, and a progress indicator.

Both decide from where the output goes, never from the format alone, so that pipes, files,
CI logs and machine formats stay plain and byte-for-byte stable.
"""

from __future__ import annotations

import os
from typing import TextIO

# Runs with fewer files than this finish before a progress indicator would tell anything.
PROGRESS_FROM = 300


def colour_enabled(choice: str, stream: TextIO) -> bool:
    """`--color always/never` decide; `auto` colours a terminal, unless NO_COLOR is set
    (non-empty, https://no-color.org), and colours anything when FORCE_COLOR is set (non-empty)."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    return bool(os.environ.get("FORCE_COLOR")) or stream.isatty()


class Progress:
    """`Checking files: 120/2328` on one terminal line, wiped when the run ends; nothing for a
    run of fewer than PROGRESS_FROM files."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        if total < PROGRESS_FROM:
            return
        self.stream.write(f"\rChecking files: {done}/{total}")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def progress(stream: TextIO, human_report: bool) -> Progress | None:
    """A progress indicator only where a person watches: `stream` is a terminal, the report is
    for people (a human format, not --quiet), and no CI system runs us (some give their logs a
    terminal)."""
    if not human_report or os.environ.get("CI") or not stream.isatty():
        return None
    return Progress(stream)
