"""`--jobs N` reports exactly what `--jobs 1` reports, in the same order."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from torchlint_inplace import config, parallel, registry
from torchlint_inplace.analysis import project
from torchlint_inplace.api import PARALLEL_FROM, lint_paths
from torchlint_inplace.cli import main
from torchlint_inplace.discovery import discover
from torchlint_inplace.linting import RunOptions

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


CALLEE = """\
def scale_(t):
    t.mul_(2)
    return t
"""

CALLER = """\
import torch
from torch import nn

from .base import scale_


class Embedding(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(2, 2)

    def forward(self, coords, shape=None):
        coords = coords.clone()
        if shape is not None:
            coords[:, 0] = coords[:, 0] / shape[1]
        return self.proj(coords)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = Embedding()
        self.size = 4

    def forward(self, x):
        return scale_(self.embed(x, (self.size, self.size)).sum(-1))
"""


def test_a_file_read_as_a_caller_first_gets_the_findings_it_gets_alone(tmp_path: Path) -> None:
    """Checking `base.py` (files are checked in sorted order) reads `model.py` as its caller and
    remembers `Model` built; checking `model.py` next takes that construction from the memo, and
    must still know it built `Embedding` (only ever called with a tuple of ints), not run
    `Embedding.forward` on its defaults as if nobody built it (transformers' sam then sam2: a
    wrong TIP002). Nobody building it, that run is right to report the write."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "base.py").write_text(CALLEE)
    (package / "model.py").write_text(CALLER)
    (package / "unbuilt.py").write_text(CALLER.split("class Model")[0])
    settings = config.resolve(config.Overrides(isolated=True), cwd=tmp_path)
    unbuilt = lint_paths([package / "unbuilt.py"], settings, jobs=1, cache=False).findings
    assert [(f.code, f.line) for f in unbuilt] == [("TIP002", 15)]
    alone = lint_paths([package / "model.py"], settings, jobs=1, cache=False).findings
    assert alone == []
    after_its_callee = lint_paths([package / "base.py", package / "model.py"], settings, jobs=1, cache=False)
    assert [f for f in after_its_callee.findings if f.path.endswith("model.py")] == alone


HAZARD = """\
import torch

w = torch.randn(3, requires_grad=True)
y = w.sigmoid()
y.mul_(2)
y.sum().backward()
"""


def _check_or_die(file: tuple[Path, config.Settings]) -> object:
    """A worker that the system kills while it checks `dies.py` (as the OOM killer would)."""
    if file[0].name == "dies.py":
        os._exit(137)
    return parallel._checker.check(*file)  # type: ignore[union-attr]


def test_a_killed_worker_costs_only_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`multiprocessing.Pool` waited forever for a chunk whose worker was killed; now the file
    that kills its worker is reported as not checked, and every other file is checked."""
    for name in ("a.py", "b.py", "dies.py", "c.py", "d.py"):
        (tmp_path / name).write_text(HAZARD)
    monkeypatch.setattr(parallel, "_check", _check_or_die)
    settings = config.resolve(config.Overrides(isolated=True))
    paths = sorted(tmp_path.glob("*.py"))
    results = list(
        parallel.check_in_parallel([(path, settings) for path in paths], RunOptions(registry.all_rules()), 2)
    )
    assert [Path(result.path).name for result in results] == [path.name for path in paths]
    codes = {Path(result.path).name: [finding.code for finding in result.findings] for result in results}
    assert codes.pop("dies.py") == ["TIP000"]
    assert all(found == ["TIP001"] for found in codes.values()) and len(codes) == 4
    assert parallel.WORKER_DIED in results[[p.name for p in paths].index("dies.py")].findings[0].message


def test_the_pool_is_wound_down_before_results_end(tmp_path: Path) -> None:
    """A pool left to wind down on its own raced the interpreter's exit, whose hook then wrote
    to the pool's closed wake-up pipe: `-j 2` runs sometimes ended with a traceback ("OSError:
    Bad file descriptor") after their report."""
    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / name).write_text(HAZARD)
    settings = config.resolve(config.Overrides(isolated=True))
    files = [(path, settings) for path in sorted(tmp_path.glob("*.py"))]
    assert len(list(parallel.check_in_parallel(files, RunOptions(registry.all_rules()), 2))) == 3
    managers = [thread for thread in threading.enumerate() if type(thread).__name__ == "_ExecutorManagerThread"]
    assert not managers
