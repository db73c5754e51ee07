"""`pytest --torchlint-inplace` on a small project: a test that raises at backward, one refused at
the write, one that silently corrupts, a clean one and one that never touches torch. Run in
subprocesses, as a user runs pytest (the plugin comes from the installed `pytest11` entry point)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow  # runs pytest, torch and pytest-xdist in subprocesses

pytest_plugins = ("pytester",)

pytest.importorskip("torch")

PROJECT = textwrap.dedent(
    """\
    import sys

    import torch
    from torch import nn


    class Block(nn.Module):
        def __init__(self, inplace=True):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.act = nn.ReLU(inplace=inplace)

        def forward(self, x):
            h = self.fc(x)
            out = self.act(h)
            return out + h


    def test_backward_after_write():
        x = torch.randn(3, requires_grad=True)
        y = x.sigmoid()
        y.mul_(2)
        y.sum().backward()


    def test_leaf_written():
        weight = nn.Parameter(torch.ones(3))
        weight.add_(1)


    def test_residual_reads_rectified_input():
        Block()(torch.randn(2, 4)).sum().backward()


    def test_clean_block():
        Block(inplace=False)(torch.randn(2, 4)).sum().backward()
    """
)
NO_TORCH = textwrap.dedent(
    """\
    import sys


    def test_plugin_imported_no_torch():
        assert "torch" not in sys.modules
    """
)
TESTS = "test_model.py"


def _line(code: str) -> int:
    return next(number for number, line in enumerate(PROJECT.splitlines(), 1) if line.strip() == code)


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_model=PROJECT, test_plain=NO_TORCH)
    return pytester


def _run(project: pytest.Pytester, *args: str) -> pytest.RunResult:
    return project.runpytest_subprocess("-p", "no:cacheprovider", "-o", "addopts=", *args)


def test_without_the_option_nothing_changes_and_torch_is_not_imported(project: pytest.Pytester) -> None:
    _run(project, "test_plain.py").assert_outcomes(
        passed=1
    )  # the plugin was loaded (see `plugins:`) and imported no torch
    result = _run(project, TESTS)
    result.assert_outcomes(failed=2, passed=2)
    assert "torchlint-inplace:" not in result.stdout.str()
    result.stdout.fnmatch_lines(
        ["plugins: *torchlint-inplace*", "*RuntimeError: one of the variables needed for gradient computation*"]
    )


def test_failures_carry_the_explanation_and_silent_corruption_fails(project: pytest.Pytester) -> None:
    result = _run(project, "--torchlint-inplace", TESTS)  # a bare option before a path: the path is no mode
    result.assert_outcomes(failed=3, passed=1)
    output = result.stdout.str()
    saving, mutating = _line("y = x.sigmoid()"), _line("y.mul_(2)")
    assert f"saved for backward by `sigmoid` at test_model.py:{saving} in test_backward_after_write" in output
    assert f"modified in place by `mul_` (now version 1) at test_model.py:{mutating}" in output
    assert f"raised in:\n    test_model.py:{_line('y.sum().backward()')} in test_backward_after_write" in output
    assert f"refused: in-place `add_` at test_model.py:{_line('weight.add_(1)')} in test_leaf_written" in output
    assert (
        f"torchlint-inplace: silent corruption: the in-place `ReLU` at line {_line('out = self.act(h)')} rewrote `h`"
        in output
    )
    assert f"`h` read again at test_model.py:{_line('return out + h')}" in output
    assert "site-packages" not in output, "internal frames in the failures"
    result.stdout.fnmatch_lines(["FAILED test_model.py::test_residual_reads_rectified_input - Failed: *"])


def test_warn_mode_reports_silent_corruption_in_the_warnings_summary(project: pytest.Pytester) -> None:
    result = _run(project, TESTS, "--torchlint-inplace=warn")
    result.assert_outcomes(failed=2, passed=2, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*warnings summary*",
            "test_model.py::test_residual_reads_rectified_input",
            f"*test_model.py:{_line('out = self.act(h)')}: SilentCorruptionWarning: torchlint-inplace: silent corruption*",
        ]
    )


def test_runs_under_xdist(project: pytest.Pytester) -> None:
    result = _run(project, "-n", "2", "--torchlint-inplace", TESTS)
    result.assert_outcomes(failed=3, passed=1)
    assert f"modified in place by `mul_` (now version 1) at test_model.py:{_line('y.mul_(2)')}" in result.stdout.str()


def test_an_unknown_mode_is_a_usage_error(project: pytest.Pytester) -> None:
    result = _run(project, "--torchlint-inplace=loud")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--torchlint-inplace=loud: the mode is one of fail, warn*"])


def test_without_torch_the_option_says_what_to_install(project: pytest.Pytester) -> None:
    """torch made unimportable for the run, as in an environment without the runtime extra."""
    project.makeconftest("import sys\nsys.modules['torch'] = None\n")
    project.path.joinpath("test_model.py").unlink()
    result = _run(project, "--torchlint-inplace")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--torchlint-inplace needs torch: pip install 'torchlint-inplace[runtime]'" in result.stderr.str()


def test_plugin_module_imports_no_torch() -> None:
    code = "import sys, torchlint_inplace.pytest_plugin; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0
