"""Where a file sits: its package, the folder Python imports it from, and its project.

Several parts of the tool need the same three answers about a path, and each once walked the
folders itself: the cache (which project's cache holds this file's entry), the analysis (how
an absolute import resolves, which files of a package may call this one), the pre-pass, and
`--confirm` (which working directory and `sys.path` the file's code expects). The walks
differed in small ways (markers, where to stop), so they answered differently for the same
file; here each question has one answer.

- `package_root(path)`: the outermost folder above `path` that is a package (has
  `__init__.py`), or None for a file outside any package.
- `import_root(path)`: the folder Python would import `path` from: the parent of its
  outermost package, or its own folder. Absolute imports of the file's project resolve here.
- `project_root(path)`: the nearest folder above `path` holding one of `PROJECT_MARKERS`, or
  None for a file in no project.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

# What makes a folder a project's root, as packaging tools and git see it.
PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
# The files a search for a file's callers reads (the analysis, and the cache's test of whether
# those callers changed): a bound, and the folders it does not enter (virtualenvs, build
# output, VCS).
MAX_CALLER_SCAN = 5000
_NOT_SCANNED = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "__pycache__",
        "build",
        "dist",
        "site-packages",
        ".tox",
        ".nox",
        ".eggs",
        "node_modules",
    }
)


def _absolute(path: Path | str) -> Path:
    return Path(os.path.abspath(path))


def package_root(path: Path | str) -> Path | None:
    root, folder = None, _absolute(path).parent
    while (folder / "__init__.py").exists():
        root, folder = folder, folder.parent
    return root


def import_root(path: Path | str) -> Path:
    root = package_root(path)
    return root.parent if root is not None else _absolute(path).parent


def project_root(path: Path | str) -> Path | None:
    for folder in _absolute(path).parents:
        if any(os.path.exists(folder / marker) for marker in PROJECT_MARKERS):  # False where we may not look
            return folder
    return None


def caller_files(root: Path) -> Iterator[Path]:
    """The Python files under `root`, in a stable order, outside virtualenvs and build output.
    At most MAX_CALLER_SCAN of them, found lazily: a scan never walks the rest of a large tree.
    A loose script's folder (no project, no package: a home directory, /tmp) yields only the
    files beside it: scripts import their siblings, and its subfolders are other people's."""
    loose = project_root(root / "_") is None and not (root / "__init__.py").exists()
    return itertools.islice(_walk(root, loose), MAX_CALLER_SCAN)


def _walk(root: Path, loose: bool) -> Iterator[Path]:
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = (
            []
            if loose
            else sorted(
                name
                for name in subfolders
                if name not in _NOT_SCANNED and not name.startswith(".") and not name.endswith(".egg-info")
            )
        )
        yield from (Path(folder) / name for name in sorted(files) if name.endswith(".py"))
