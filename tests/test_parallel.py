"""`--jobs N` reports exactly what `--jobs 1` reports, in the same order."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from torchlint_inplace import config
from torchlint_inplace.analysis import project
from torchlint_inplace.api import PARALLEL_FROM, lint_paths
from torchlint_inplace.cli import main
from torchlint_inplace.discovery import discover

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture
def corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fixtures (cross-file packages included), plus a file that cannot be parsed."""
    shutil.copytree(FIXTURES, tmp_path / "fixtures")
    (tmp_path / "fixtures" / "broken.py").write_text("def f(:\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "fixtures"


@pytest.mark.slow  # lints a corpus several times
def test_parallel_results_equal_serial_results(corpus: Path) -> None:
    settings = config.resolve(config.Overrides(isolated=True))
    paths = list(discover([corpus], settings))
    assert len(paths) >= PARALLEL_FROM  # or the pool would not even start
    serial = lint_paths(paths, settings, jobs=1).files
    parallel = lint_paths(paths, settings, jobs=3).files
    assert [result.path for result in parallel] == [str(path) for path in paths]
    assert [(r.path, r.findings) for r in parallel] == [(r.path, r.findings) for r in serial]
    assert sum(len(result.findings) for result in serial) > 20


@pytest.mark.slow  # lints a corpus several times
def test_cli_output_is_identical_for_any_jobs(corpus: Path) -> None:
    outputs = {
        jobs: CliRunner()
        .invoke(main, ["--isolated", "--no-cache", "--format", "json", "--jobs", str(jobs), str(corpus)])
        .stdout
        for jobs in (1, 2, 4)
    }
    assert outputs[1].count('"code"') > 20
    assert outputs[1] == outputs[2] == outputs[4]


@pytest.mark.slow  # lints a corpus several times
def test_a_project_that_keeps_one_tree_at_a_time_changes_nothing(corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory is bounded by forgetting the syntax trees (and summaries) of files read earlier;
    findings must not notice: a forgotten callee is read again."""
    settings = config.resolve(config.Overrides(isolated=True))
    paths = list(discover([corpus], settings))
    shared = lint_paths(paths, settings).files
    monkeypatch.setattr(project, "MAX_CACHED_SOURCE", 1)
    monkeypatch.setattr(project, "MAX_WORKING_SOURCE", 1)  # forgotten even while the analysis reads them
    forgetful = lint_paths(paths, settings).files
    assert [(r.path, r.findings) for r in forgetful] == [(r.path, r.findings) for r in shared]
