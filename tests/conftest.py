"""Shared fixtures: the seed-2 `class A` example as files a fresh user would lint.

The end-to-end tests (an installed wheel, a pre-commit hook) need one file the linter must
flag and one it must pass; both come from here so they agree on what "hazardous" means.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import NamedTuple

import pytest

SEED_HAZARD = """\
import torch
from torch import nn

class A(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.x = nn.Parameter(torch.tensor([1.0]))

    def forward(self) -> torch.Tensor:
        t = torch.tensor([2.0])
        y = self.x * t
        t[:] = 3.0
        return y
"""

# The same module with the fix applied: `t` is rebound to a new tensor, nothing saved is mutated.
SEED_CLEAN = SEED_HAZARD.replace("t[:] = 3.0", "t = torch.full_like(t, 3.0)")


class SeedFiles(NamedTuple):
    hazard: Path
    clean: Path
    mutation_line: int  # `t[:] = 3.0`, reported as TIP002
    saving_line: int  # `y = self.x * t`, the `*` that saved `t` for backward


@pytest.fixture(autouse=True)
def user_cache_directory(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the results cache puts entries of files in no project: never the real home's."""
    directory = tmp_path_factory.mktemp("user-cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(directory))
    return directory


@pytest.fixture
def seed_files(tmp_path: Path) -> SeedFiles:
    lines = SEED_HAZARD.splitlines()
    hazard = tmp_path / "seed_hazard.py"
    clean = tmp_path / "seed_clean.py"
    hazard.write_text(SEED_HAZARD, encoding="utf-8")
    clean.write_text(SEED_CLEAN, encoding="utf-8")
    return SeedFiles(
        hazard=hazard,
        clean=clean,
        mutation_line=lines.index("        t[:] = 3.0") + 1,
        saving_line=lines.index("        y = self.x * t") + 1,
    )


# `pytest -m "not slow"` is the quick static loop: a module whose tests are all slow (it says so
# with a module-level `pytestmark = pytest.mark.slow`) is not even imported for it, since
# importing torch or hypothesis costs seconds in every worker.
_ALL_SLOW = "\npytestmark = pytest.mark.slow"


def source_line(function, code: str) -> int:
    """The line number of the line of `function`'s source that reads `code` (stripped)."""
    lines, first = inspect.getsourcelines(function)
    return next(first + offset for offset, line in enumerate(lines) if line.strip() == code)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    quick = config.option.markexpr.replace(" ", "") == "notslow"
    if quick and collection_path.suffix == ".py" and _ALL_SLOW in collection_path.read_text(encoding="utf-8"):
        return True
    return None
