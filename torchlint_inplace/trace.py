"""`python -m torchlint_inplace.trace [--fail-fast] [--format text|json] [-o FILE] [--fail-on-silent]
script.py [args...]`: run a script under the culprit tracer, like `python -m cProfile`.

The package also exposes the tracer itself as `torchlint_inplace.trace()`; once this module is
imported, Python binds the package attribute `trace` to the module instead, so the module is
made callable and forwards to the tracer: `torchlint_inplace.trace()` works either way.
"""

from __future__ import annotations

import argparse
import sys
import types
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .runtime.tracer import Tracer


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m torchlint_inplace.trace",
        description="Run a script, explain its in-place autograd errors with the saving and the mutating line, and report silent corruption.",
    )
    parser.add_argument(
        "--fail-fast", action="store_true", help="raise at the in-place write itself, not at backward()"
    )
    parser.add_argument(
        "--format", choices=("text", "json"), default="text", help="how the report is written (default: text)"
    )
    parser.add_argument("-o", "--output-file", help="write the report there instead of stderr")
    parser.add_argument("--fail-on-silent", action="store_true", help="exit 1 when silent corruption was seen")
    parser.add_argument("script", help="the Python script to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    options = parser.parse_args(argv)
    from .runtime.script import run_script

    return run_script(
        options.script,
        options.args,
        fail_fast=options.fail_fast,
        format=options.format,
        output=options.output_file,
        fail_on_silent=options.fail_on_silent,
    )


class _CallableModule(types.ModuleType):
    def __call__(self, fail_fast: bool = False) -> Tracer:
        from .runtime import trace

        return trace(fail_fast=fail_fast)


if __name__ == "__main__":
    sys.exit(main())
else:
    sys.modules[__name__].__class__ = _CallableModule
