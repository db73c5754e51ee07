"""Which files a run checks: the paths the user named, and the Python files and notebooks under named directories.

A file named on the command line is always checked, whatever its extension and whatever
excludes or .gitignore say; the user asked for it. A named path that does not exist is kept
too, so that reading it reports it (TIP000), as ruff reports E902. Directories are walked in sorted order,
taking the files that match `include`/`extend-include` (`*.py`, `*.pyi`, `*.ipynb` by default), skipping `exclude`/`extend-exclude` matches, virtualenvs and what .gitignore ignores, and
following directory symlinks at most once per real directory so a symlink loop cannot hang.
Each entry is matched against the excludes of its own directory's settings (a subproject's
`pyproject.toml` excludes what lies under it, relative to itself).

A directory that cannot be listed (permission denied, removed while the run walks it) and a
named symbolic link to nothing are handed to `on_error` with a message for the user: the
command reports each as a TIP000 finding on that path, as it reports an unreadable file, and
goes on. Broken links met during a walk are skipped without a word: editors leave them
(Emacs's `.#name.py` lock files), and nobody asked for them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from . import gitignore
from .config import Configuration
from .globs import matches_path

# Told about each path that cannot be searched or read: (the path, why, worded for the user).
OnError = Callable[[Path, str], None]


def _ignore_errors(path: Path, message: str) -> None:
    """For callers that want only the file list (benchmarks, tests of the walk)."""


class _Walker:
    def __init__(self, configuration: Configuration, on_error: OnError) -> None:
        self.on_error = on_error
        self.configuration = configuration
        self.seen_directories: set[str] = set()

    def matchers(self, directory: Path) -> tuple[Callable[[Path], bool], Callable[[Path], bool]]:
        """Whether an entry of `directory` is excluded, and whether a file there is included,
        by that directory's settings."""
        settings = self.configuration.for_directory(directory)
        root = Path(settings.root)

        def matcher(patterns: tuple[str, ...]) -> Callable[[Path], bool]:
            def matches(path: Path) -> bool:
                try:
                    relative: str | None = path.relative_to(root).as_posix()
                except ValueError:
                    relative = None
                return any(matches_path(pattern, relative, path.name) for pattern in patterns)

            return matches

        return (
            matcher((*settings.exclude, *settings.extend_exclude)),
            matcher((*settings.include, *settings.extend_include)),
        )

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
        except OSError as error:
            self.on_error(directory, _unlistable(error))
            return
        excluded, included = self.matchers(directory)
        for entry in entries:
            path = directory / entry.name
            is_dir = _is_dir(entry)
            if excluded(path) or gitignore.is_ignored(path, is_dir, ignore_files or []):
                continue
            if is_dir:
                if not os.path.exists(path / "pyvenv.cfg"):  # False, not an error, where we may not look
                    yield from self.walk(path, ignore_files)
            elif included(path) and _is_file(entry):
                yield path


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def _unlistable(error: OSError) -> str:
    if isinstance(error, PermissionError):
        return "cannot read directory: permission denied"
    if isinstance(error, FileNotFoundError):
        return "cannot read directory: it no longer exists (removed during the run?)"
    return f"cannot read directory: {error.strerror or error}"


def _dangling_target(path: Path) -> str | None:
    """Where `path` points when it is a symbolic link to nothing (a link loop is not dangling:
    reading it reports "too many levels of symbolic links")."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return os.readlink(path) if os.path.islink(path) else None
    except OSError:
        pass
    return None


def discover(
    paths: Iterable[Path | str], configuration: Configuration, on_error: OnError = _ignore_errors
) -> tuple[Path, ...]:
    """Absolute paths of the files to check, sorted, without duplicates; what cannot be
    searched goes to `on_error` instead."""
    walker = _Walker(configuration, on_error)
    files: set[Path] = set()
    for named in paths:
        path = Path(os.path.abspath(named))
        if os.path.isdir(path):  # Path.is_dir raises where a parent may not be searched
            files.update(walker.walk(path, gitignore.inherited_files(path)))
        elif (target := _dangling_target(path)) is not None:
            on_error(path, f"broken symbolic link: its target {target} does not exist")
        else:
            files.add(path)
    return tuple(sorted(files, key=str))
