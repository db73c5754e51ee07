"""`--show-settings`: the settings one path gets, as TOML a user can paste into their table,
and where they come from (which pyproject.toml, the defaults, the command line on top)."""

from __future__ import annotations

import json
from pathlib import Path

from ..config import Overrides, Resolver


def describe(path: Path, shown_as: str, resolver: Resolver) -> str:
    """The settings of `path` (a file, which need not exist, or a directory's files)."""
    settings = resolver.for_directory(path) if path.is_dir() else resolver.for_path(path)
    overrides = resolver.overrides
    if settings.config_path is not None:
        origin = settings.config_path
    elif overrides.isolated:
        origin = "the defaults (--isolated)"
    else:
        origin = "the defaults (no pyproject.toml with [tool.torchlint-inplace] above it)"
    given = overrides != Overrides(config=overrides.config, isolated=overrides.isolated)
    ignores = ", ".join(f"{json.dumps(glob)} = {json.dumps(list(codes))}" for glob, codes in settings.per_file_ignores)
    lines = [
        f"# Settings for {shown_as}",
        f"# from {origin}" + (", with the command line's options on top" if given else ""),
        f"root = {json.dumps(settings.root)}",
        f"select = {json.dumps(list(settings.select))}",
        f"preview = {json.dumps(settings.preview)}",
        f"exclude = {json.dumps(list(settings.exclude))}",
        f"extend-exclude = {json.dumps(list(settings.extend_exclude))}",
        f"include = {json.dumps(list(settings.include))}",
        f"extend-include = {json.dumps(list(settings.extend_include))}",
        f"per-file-ignores = {{{ignores}}}",
        *(f"confirm.{name} = {spec}" for name, spec in settings.confirm),
    ]
    return "\n".join(lines) + "\n"
