"""The pytest plugin: `pytest --torchlint-inplace` runs each test under the culprit tracer.

A test that hits an in-place autograd error fails with the tracer's explanation (the mutating
and the saving line, as `path:line`) in place of autograd's bare message; silent corruption seen
while a test runs fails it too, or with `--torchlint-inplace=warn` becomes a warning in the
summary. Registered through the `pytest11` entry point, so every pytest in an environment that
has the package sees the option; this module imports neither torch nor the tracer until the
option is given, so a run without it costs nothing. Works under pytest-xdist: each worker
configures its own tracer, and failures and warnings travel back as text.
"""

from __future__ import annotations

import copy

import pytest

OPTION = "--torchlint-inplace"
MODES = ("fail", "warn")


class SilentCorruptionWarning(UserWarning):
    """Silent corruption seen while a test ran (with `--torchlint-inplace=warn`)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("torchlint-inplace", "in-place autograd errors and silent corruption (torchlint-inplace)")
    group.addoption(
        OPTION,
        nargs="?",
        const="fail",
        default=None,
        dest="torchlint_inplace",
        metavar="fail|warn",
        help="run each test under the torchlint-inplace tracer (needs torch): in-place autograd errors are explained, "
        "and silent corruption fails the test (fail, the default) or is reported as a warning (warn)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """`pytest --torchlint-inplace tests/`: argparse would read `tests/` as the option's value, so
    a bare option is spelt out as `--torchlint-inplace=fail` before the final parse (and the
    early one, which found the initial conftests, is redone)."""
    bare = [
        index
        for index, arg in enumerate(args)
        if arg == OPTION and (index + 1 == len(args) or args[index + 1] not in MODES)
    ]
    for index in bare:
        args[index] = f"{OPTION}=fail"
    if bare:
        early_config.known_args_namespace = parser.parse_known_args(args, namespace=copy.copy(early_config.option))


def pytest_configure(config: pytest.Config) -> None:
    mode = config.getoption("torchlint_inplace", None)
    if mode is None:
        return
    if (
        mode not in MODES
    ):  # checked here: argparse choices would refuse `--torchlint-inplace tests/` before it is spelt out
        raise pytest.UsageError(f"{OPTION}={mode}: the mode is one of {', '.join(MODES)}")
    try:
        from .runtime.tracing_tests import TracedTests
    except ImportError as error:
        if (error.name or "").partition(".")[0] != "torch":
            raise
        raise pytest.UsageError(f"{OPTION} needs torch: pip install 'torchlint-inplace[runtime]'") from None
    config.pluginmanager.register(
        TracedTests(warn=mode == "warn", warning=SilentCorruptionWarning), "torchlint-inplace-tracer"
    )
