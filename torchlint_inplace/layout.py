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

import os
from pathlib import Path

# What makes a folder a project's root, as packaging tools and git see it.
PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


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
