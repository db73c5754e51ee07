"""Output formats, chosen by name: `write_report("full", report, sys.stdout, color)`.

Each reporter is a `write(report, stream, color)` function in its own module; only the
human-readable formats (full, concise) use colour and print the closing summary line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from . import concise, full, github, json_report, sarif
from .base import Report

Reporter = Callable[[Report, TextIO, bool], None]

REPORTERS: dict[str, Reporter] = {
    "full": full.write,
    "concise": concise.write,
    "json": json_report.write,
    "sarif": sarif.write,
    "github": github.write,
}


def write_report(format: str, report: Report, stream: TextIO, color: bool) -> None:
    try:
        reporter = REPORTERS[format]
    except KeyError:
        raise ValueError(f"unknown output format {format!r}; choose one of {', '.join(REPORTERS)}") from None
    reporter(report, stream, color)


__all__ = ["REPORTERS", "Report", "Reporter", "write_report"]
