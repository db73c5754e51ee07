"""What many tests need from the engine, in one place: settings that run every rule of the
registry (as fixture ground truth is written), and one file checked on its own."""

from __future__ import annotations

from pathlib import Path

import libcst as cst

from torchlint_inplace import analysis, api, registry
from torchlint_inplace.config import Settings
from torchlint_inplace.linting import FileResult


def every_rule(root: str = "/", preview: bool = False) -> Settings:
    """Every rule of the registry selected, default-enabled or not; no per-file-ignores. Read at
    call time, so that a test that replaces the registry's rules gets its own."""
    return Settings(root=root, select=registry.codes(), preview=preview)


def check_file(path: Path, settings: Settings, prepass: bool = True) -> FileResult:
    """One file checked as a run checks it (read, decoded, linted), without a cache;
    `prepass=False` analyses it fully even where the pre-pass would skip it."""
    (result,) = api.lint_paths([path], settings, prepass=prepass).files
    return result


# A model whose `forward` writes into the result `sigmoid` saved (TIP002, with a safe fix): the
# buffer the editor tests (stdin, the language server) send.
SIGMOID_HAZARD = """\
import torch
from torch import nn


class A(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.sigmoid()
        y[0] = 0.0
        return y
"""


def runs_of(project: analysis.Project, name: str, module: cst.Module) -> int:
    """How many runs of the module-level function `name` the project's memo holds."""
    node = next(
        statement
        for statement in module.body
        if isinstance(statement, cst.FunctionDef) and statement.name.value == name
    )
    return sum(1 for key in project.memo if isinstance(key, tuple) and key[:1] == ("run",) and key[2] == id(node))
