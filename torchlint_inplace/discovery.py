"""Which files a run checks: the paths the user named, and the Python files under named directories.

A file named on the command line is always checked, whatever its extension and whatever
excludes or .gitignore say; the user asked for it. A named path that does not exist is kept
too, so that reading it reports it (TIP000), as ruff reports E902. Directories are walked in sorted order,
skipping `exclude`/`extend-exclude` matches, virtualenvs and what .gitignore ignores, and
following directory symlinks at most once per real directory so a symlink loop cannot hang.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from . import gitignore
from .config import Settings
from .globs import matches_path

PYTHON_SUFFIXES = (".py", ".pyi")


class _Walker:
    def __init__(self, settings: Settings) -> None:
        self.root = Path(settings.root)
        self.excludes = (*settings.exclude, *settings.extend_exclude)
        self.seen_directories: set[str] = set()

    def excluded(self, path: Path) -> bool:
        try:
            relative: str | None = path.relative_to(self.root).as_posix()
        except ValueError:
            relative = None
        return any(matches_path(pattern, relative, path.name) for pattern in self.excludes)

    def walk(self, directory: Path, ignore_files: list[gitignore.IgnoreFile] | None) -> Iterator[Path]:
        """Python files under `directory`; `ignore_files` is None outside a git repository."""
        real = os.path.realpath(directory)
        if real in self.seen_directories:
            return
        self.seen_directories.add(real)
        if ignore_files is not None:
            local = gitignore.read_ignore_file(directory / ".gitignore", directory)
            ignore_files = ignore_files if local is None else [*ignore_files, local]
        try:
            entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except OSError:
            return  # an unreadable directory holds nothing we can check
        for entry in entries:
            path = directory / entry.name
            is_dir = _is_dir(entry)
            if self.excluded(path) or gitignore.is_ignored(path, is_dir, ignore_files or []):
                continue
            if is_dir:
                if not (path / "pyvenv.cfg").exists():
                    yield from self.walk(path, ignore_files)
            elif path.suffix in PYTHON_SUFFIXES and _is_file(entry):
                yield path


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _is_file(entry: os.DirEntry) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def discover(paths: Iterable[Path | str], settings: Settings) -> tuple[Path, ...]:
    """Absolute paths of the files to check, sorted, without duplicates."""
    walker = _Walker(settings)
    files: set[Path] = set()
    for named in paths:
        path = Path(os.path.abspath(named))
        if path.is_dir():
            files.update(walker.walk(path, gitignore.inherited_files(path)))
        else:
            files.add(path)
    return tuple(sorted(files, key=str))
