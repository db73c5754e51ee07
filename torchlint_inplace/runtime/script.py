"""Run a Python script under the culprit tracer, the way `python -m cProfile script.py` does.

The script sees its own `sys.argv`, runs as `__main__` with its folder first on `sys.path`, and
its exit code passes through; the tracer's error becomes a report on stderr and exit code 1.
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Sequence
from typing import TextIO

from .report import InplaceCulpritError
from .tracer import trace

EXIT_CULPRIT, EXIT_USAGE = 1, 2


def run_script(script: str, args: Sequence[str], fail_fast: bool = False, stderr: TextIO | None = None) -> int:
    stderr = stderr or sys.stderr
    if not os.path.isfile(script):
        print(f"error: no such script: {script}", file=stderr)
        return EXIT_USAGE
    saved_argv, saved_path = sys.argv, sys.path[:]
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        with trace(fail_fast=fail_fast):
            runpy.run_path(script, run_name="__main__")
    except SystemExit as exit_:
        return _exit_code(exit_, stderr)
    except InplaceCulpritError as error:
        print(f"torchlint-inplace trace: {error}", file=stderr)
        return EXIT_CULPRIT
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    return 0


def _exit_code(exit_: SystemExit, stderr: TextIO) -> int:
    """What the interpreter would exit with for this SystemExit."""
    if exit_.code is None or isinstance(exit_.code, int):
        return exit_.code or 0
    print(exit_.code, file=stderr)
    return 1
