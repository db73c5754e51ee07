"""The common subset of git's ignore rules, so a walk skips what the repository ignores without
running git: `*`, `**`, `?`, `[...]`, `/`-anchoring, trailing-`/` directory-only patterns,
`!` negation, and nested .gitignore files (deeper files and later lines win).

Like ruff (and ripgrep), ignore files are honoured only inside a git repository: the nearest
directory holding `.git` is the repository root, and its `.git/info/exclude` applies too.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from .globs import translate


@dataclass(frozen=True)
class Pattern:
    regex: re.Pattern[str]
    negated: bool
    directory_only: bool


@dataclass(frozen=True)
class IgnoreFile:
    """The patterns of one ignore file; they match paths relative to `base`."""

    base: Path
    patterns: tuple[Pattern, ...]


def parse_line(line: str) -> Pattern | None:
    line = line.rstrip("\n").rstrip("\r")
    if not line or line.startswith("#"):
        return None
    stripped = line.rstrip(" ")
    if stripped.endswith("\\") and len(stripped) < len(line):
        stripped += " "  # `\ ` keeps one trailing space
    line = stripped
    negated = line.startswith("!")
    if negated:
        line = line[1:]
    elif line.startswith("\\!") or line.startswith("\\#"):
        line = line[1:]
    directory_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line  # a slash at the start or in the middle anchors to the file's directory
    body = translate(line.removeprefix("/"))
    source = body if anchored else f"(?:.*/)?{body}"
    return Pattern(re.compile(source + r"\Z", re.DOTALL), negated, directory_only)


def read_ignore_file(path: Path, base: Path) -> IgnoreFile | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    patterns = tuple(pattern for line in text.splitlines() if (pattern := parse_line(line)) is not None)
    return IgnoreFile(base, patterns) if patterns else None


def find_repository_root(directory: Path) -> Path | None:
    for candidate in (directory, *directory.parents):
        if os.path.exists(candidate / ".git"):  # False where we may not look; Path.exists raises
            return candidate
    return None


def inherited_files(directory: Path) -> list[IgnoreFile] | None:
    """The ignore files that apply to `directory`'s entries from above it (the repository's
    info/exclude and the .gitignore files from the repository root down to its parent),
    shallowest first; None outside a git repository, where .gitignore files mean nothing."""
    root = find_repository_root(directory)
    if root is None:
        return None
    files = [read_ignore_file(root / ".git" / "info" / "exclude", root)]
    chain = [directory, *directory.parents]
    for ancestor in reversed(chain[1 : chain.index(root) + 1]):
        files.append(read_ignore_file(ancestor / ".gitignore", ancestor))
    return [file for file in files if file is not None]


def is_ignored(path: Path, is_dir: bool, files: list[IgnoreFile]) -> bool:
    """Whether the last pattern matching `path` (across `files`, shallowest first) ignores it."""
    ignored = False
    for file in files:
        try:
            relative = path.relative_to(file.base).as_posix()
        except ValueError:
            continue
        for pattern in file.patterns:
            if (is_dir or not pattern.directory_only) and pattern.regex.match(relative):
                ignored = not pattern.negated
    return ignored
