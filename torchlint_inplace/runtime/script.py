"""Run a Python script under the culprit tracer, the way `python -m cProfile script.py` does.

The script sees its own `sys.argv`, runs as `__main__` with its folder first on `sys.path`, and
its exit code passes through. The report goes to stderr (or `output`), after the script's own
output: the in-place error explained, exit code 1, and every silent corruption seen, which
changes the exit code only with `fail_on_silent`. Another exception prints its traceback as
Python would, less the frames of this package, runpy and the CLI that ran the script.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import traceback
from collections.abc import Sequence
from types import TracebackType
from typing import TextIO

from .refusals import InplaceRefusalError
from .report import InplaceCulpritError, SilentReport
from .sites import is_internal
from .tracer import trace

EXIT_CULPRIT, EXIT_USAGE = 1, 2
PREFIX = "torchlint-inplace trace: "


def run_script(
    script: str,
    args: Sequence[str],
    fail_fast: bool = False,
    stderr: TextIO | None = None,
    format: str = "text",
    output: str | None = None,
    fail_on_silent: bool = False,
) -> int:
    stderr = stderr or sys.stderr
    if not os.path.isfile(script):
        print(f"error: no such script: {script}", file=stderr)
        return EXIT_USAGE
    saved_argv, saved_path = sys.argv, sys.path[:]
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    tracer = trace(fail_fast=fail_fast)
    error: InplaceCulpritError | InplaceRefusalError | None = None
    try:
        with tracer:
            runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as exit_:
        code = _exit_code(exit_, stderr)
    except (InplaceCulpritError, InplaceRefusalError) as caught:
        error, code = caught, EXIT_CULPRIT
    except BaseException as other:  # the script's own crash: its traceback, as Python prints it
        traceback.print_exception(type(other), other, _user_traceback(other.__traceback__), file=stderr)
        code = 130 if isinstance(other, KeyboardInterrupt) else 1
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    reports = tracer.reports
    if fail_on_silent and reports and code == 0:
        code = EXIT_CULPRIT
    stream = open(output, "w", encoding="utf-8") if output else stderr
    try:
        if format == "json":
            document = {
                "version": 1,
                "script": script,
                "exit_code": code,
                "error": error.to_dict() if error else None,
                "silent": [report.to_dict() for report in reports],
            }
            stream.write(json.dumps(document, indent=2) + "\n")
        else:
            _write_text(stream, error, reports, fail_on_silent)
    finally:
        if output:
            stream.close()
    return code


def _write_text(
    stream: TextIO,
    error: InplaceCulpritError | InplaceRefusalError | None,
    reports: list[SilentReport],
    fail_on_silent: bool,
) -> None:
    if error is not None:
        stream.write(f"{PREFIX}{error}\n")
    for report in reports:
        stream.write(f"\n{PREFIX}{report.render()}\n")
    if reports:
        count = f"{len(reports)} silent corruption report{'s' if len(reports) != 1 else ''}"
        hint = "" if fail_on_silent else " (the exit code ignores them; --fail-on-silent makes it 1)"
        stream.write(f"\n{PREFIX}{count}{hint}\n")


def _user_traceback(tb: TracebackType | None) -> TracebackType | None:
    """The traceback from the script's first frame: this package's and runpy's go."""
    while tb is not None and is_internal(tb.tb_frame):
        tb = tb.tb_next
    return tb


def _exit_code(exit_: SystemExit, stderr: TextIO) -> int:
    """What the interpreter would exit with for this SystemExit."""
    if exit_.code is None or isinstance(exit_.code, int):
        return exit_.code or 0
    print(exit_.code, file=stderr)
    return 1
