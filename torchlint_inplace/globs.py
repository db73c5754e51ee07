"""Glob patterns as users write them in .gitignore files and in `exclude`/`per-file-ignores`.

One translation to regular expressions serves both, so `*`, `**`, `?` and `[...]` mean the
same thing everywhere: `*` and `?` stay within one path segment, `**` crosses segments.
"""

from __future__ import annotations

import re
from functools import lru_cache


def _bracket(pattern: str, start: int) -> tuple[str, int] | None:
    """The regex class for the `[...]` opening at `start`, and the index after it; None if unclosed."""
    index = start + 1
    negate = index < len(pattern) and pattern[index] in "!^"
    if negate:
        index += 1
    body_start = index
    if index < len(pattern) and pattern[index] == "]":
        index += 1  # a leading `]` is a literal member, as in fnmatch and git
    while index < len(pattern) and pattern[index] != "]":
        index += 2 if pattern[index] == "\\" else 1
    if index >= len(pattern):
        return None
    body = pattern[body_start:index]
    members = "".join("-" if char == "-" else re.escape(char) for char in re.sub(r"\\(.)", r"\1", body))
    return f"[{'^' if negate else ''}{members}{'/' if negate else ''}]", index + 1


def _alternation(pattern: str, start: int) -> tuple[str, int] | None:
    """`{a,b}` as ruff's globs allow it; None when the brace is not closed."""
    end = pattern.find("}", start)
    if end < 0:
        return None
    choices = pattern[start + 1 : end].split(",")
    return "(?:" + "|".join(translate(choice) for choice in choices) + ")", end + 1


def translate(pattern: str) -> str:
    """Regex source (without anchors) matching the same posix paths as the glob `pattern`."""
    out: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if pattern.startswith("**/", index) and (index == 0 or pattern[index - 1] == "/"):
            out.append("(?:.*/)?")
            index += 3
        elif (
            pattern.startswith("**", index) and index + 2 == len(pattern) and (index == 0 or pattern[index - 1] == "/")
        ):
            out.append(".*")
            index += 2
        elif char == "*":
            while index < len(pattern) and pattern[index] == "*":
                index += 1
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
            index += 1
        elif char == "[" and (bracket := _bracket(pattern, index)) is not None:
            out.append(bracket[0])
            index = bracket[1]
        elif char == "{" and (choice := _alternation(pattern, index)) is not None:
            out.append(choice[0])
            index = choice[1]
        elif char == "\\" and index + 1 < len(pattern):
            out.append(re.escape(pattern[index + 1]))
            index += 2
        else:
            out.append(re.escape(char))
            index += 1
    return "".join(out)


@lru_cache(maxsize=1024)
def compile_glob(pattern: str) -> re.Pattern[str]:
    return re.compile(translate(pattern) + r"\Z", re.DOTALL)


def matches_path(pattern: str, relative: str | None, name: str) -> bool:
    """ruff's rule for `exclude` and `per-file-ignores`: a pattern without `/` names a file or
    directory anywhere (matched against `name`), one with `/` is a path from the project root
    (matched against `relative`, which is None for paths outside the root)."""
    pattern = pattern.rstrip("/")
    if "/" not in pattern:
        return compile_glob(pattern).match(name) is not None
    if relative is None:
        return False
    return compile_glob(pattern.removeprefix("./").removeprefix("/")).match(relative) is not None
