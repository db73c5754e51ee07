"""The settings of each checked file: the `[tool.torchlint-inplace]` table, overridden by command-line flags.

Which file, as ruff decides it: `--config PATH` if given (a pyproject.toml, read at its
`[tool.torchlint-inplace]` table, or any other .toml file holding the same keys at top level),
for every file of the run; nothing with `--isolated`; otherwise, for each checked file, the
nearest `pyproject.toml` above *that file* that has a `[tool.torchlint-inplace]` table
(pyproject files without the table are skipped, as ruff does), so `torchlint-inplace proj`
run from the parent honours `proj/pyproject.toml`. The directory of that file is the project
root that `exclude` and `per-file-ignores` patterns are relative to; without a file it is the
current directory. `Resolver` answers "which settings for this path" and reads each
pyproject.toml once per run; a `Settings` answers the same question with itself, so code that
walks or checks files takes either (`Configuration`).

Rule selection follows ruff: `select` replaces the default set, `extend-select` adds to it,
`ignore` removes; selectors are codes or prefixes (`TIP0`, `TIP`, `ALL`) and, within one layer,
the more specific selector wins. The config file is one layer and the command line another,
applied on top of it. Rules with `default_enabled = False` join through a prefix or the default
set only in preview mode; naming their exact code always enables them.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from . import registry
from .diagnostics import NOT_CHECKED_CODE

TABLE = "torchlint-inplace"

DEFAULT_EXCLUDE = (
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
    "*.egg-info",
    "node_modules",
    ".torchlint_inplace_cache",
)

# What a directory walk checks, as ruff's `include`: Python files and Jupyter notebooks.
DEFAULT_INCLUDE = ("*.py", "*.pyi", "*.ipynb")

_SELECTOR = re.compile(r"ALL|TIP\d{0,3}")


class ConfigError(Exception):
    """A setting that cannot be honoured; the CLI prints it as one line and exits with 2."""


@dataclass(frozen=True)
class Settings:
    """Everything that decides what a run reports, as plain hashable data (it keys the cache).

    `select` is the resolved set of rule codes; `per_file_ignores` maps a glob to resolved codes.
    """

    root: str
    select: tuple[str, ...]
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    include: tuple[str, ...] = DEFAULT_INCLUDE
    extend_include: tuple[str, ...] = ()
    preview: bool = False
    config_path: str | None = None
    confirm: tuple[tuple[str, str], ...] = ()  # class name -> JSON {args, kwargs, inputs}, for --confirm

    def for_path(self, path: Path | str) -> Settings:
        """The same settings for every file: a `Settings` is a `Configuration` of one answer."""
        return self

    def for_directory(self, directory: Path | str) -> Settings:
        return self


class Configuration(Protocol):
    """What decides the settings of each file: a `Resolver`, or one `Settings` for all."""

    def for_path(self, path: Path | str) -> Settings: ...

    def for_directory(self, directory: Path | str) -> Settings: ...


@dataclass(frozen=True)
class Selection:
    """One layer of rule selection (the config file, or the command line)."""

    select: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()


@dataclass(frozen=True)
class Overrides:
    """What the command line says; None means "not given, use the config file"."""

    selection: Selection = field(default_factory=Selection)
    exclude: tuple[str, ...] | None = None
    extend_exclude: tuple[str, ...] = ()
    preview: bool | None = None
    config: Path | None = None
    isolated: bool = False


@dataclass(frozen=True)
class FileConfig:
    path: Path | None
    selection: Selection = field(default_factory=Selection)
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] | None = None
    extend_exclude: tuple[str, ...] = ()
    include: tuple[str, ...] | None = None
    extend_include: tuple[str, ...] = ()
    preview: bool = False
    confirm: tuple[tuple[str, str], ...] = ()


def split_codes(values: Iterable[str]) -> tuple[str, ...]:
    """`--select TIP001,TIP003 --select TIP2` -> ("TIP001", "TIP003", "TIP2")."""
    return tuple(code.strip() for value in values for code in value.split(",") if code.strip())


# ---------------------------------------------------------------- rule selection


def _specificity(selector: str) -> int:
    return 0 if selector == "ALL" else len(selector)


def _matching(selector: str, preview: bool) -> set[str]:
    """Rule codes a selector enables: exact codes always, prefixes only default rules unless preview."""
    rules = registry.all_rules()
    if selector == "ALL":
        return {rule.code for rule in rules if preview or rule.default_enabled}
    return {
        rule.code
        for rule in rules
        if rule.code == selector or (rule.code.startswith(selector) and (preview or rule.default_enabled))
    }


def validate_selector(selector: str, where: str) -> None:
    known = [rule.code for rule in registry.all_rules()] + [NOT_CHECKED_CODE]
    if not _SELECTOR.fullmatch(selector) or not (selector == "ALL" or any(code.startswith(selector) for code in known)):
        raise ConfigError(f"unknown rule code or prefix {selector!r} in {where}")


def resolve_selection(layers: Sequence[Selection], preview: bool) -> tuple[str, ...]:
    enabled = {rule.code for rule in registry.all_rules() if preview or rule.default_enabled}
    for layer in layers:
        updates: dict[str, bool] = {}
        selectors = [(s, True) for s in (*(layer.select or ()), *layer.extend_select)] + [
            (s, False) for s in layer.ignore
        ]
        # Less specific first so more specific selectors override them; on a tie ignore wins.
        for selector, enable in sorted(selectors, key=lambda item: (_specificity(item[0]), not item[1])):
            for code in _matching(selector, preview) if enable else _matching(selector, True):
                updates[code] = enable
        if layer.select is not None:
            enabled = {code for code, enable in updates.items() if enable}
        else:
            enabled = (enabled | {c for c, e in updates.items() if e}) - {c for c, e in updates.items() if not e}
    return tuple(sorted(enabled))


def expand_codes(selectors: Iterable[str]) -> tuple[str, ...]:
    """Codes named by ignore-style selectors (every matching rule, preview or not)."""
    codes = {code for selector in selectors for code in _matching(selector, True)}
    codes.update(selector for selector in selectors if selector == NOT_CHECKED_CODE)
    return tuple(sorted(codes))


# ---------------------------------------------------------------- reading the file


def _string_list(table: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = table[key]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{key!r} must be a list of strings in {where}")
    return tuple(value)


def _codes(table: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    codes = _string_list(table, key, where)
    for code in codes:
        validate_selector(code, f"{key!r} of {where}")
    return codes


def _per_file_ignores(table: Mapping[str, Any], where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    value = table["per-file-ignores"]
    if not isinstance(value, dict):
        raise ConfigError(f"'per-file-ignores' must be a table of glob = [codes] in {where}")
    return tuple((glob, expand_codes(_codes(value, glob, f"'per-file-ignores' of {where}"))) for glob in sorted(value))


KNOWN_KEYS = (
    "select",
    "extend-select",
    "ignore",
    "per-file-ignores",
    "exclude",
    "extend-exclude",
    "include",
    "extend-include",
    "preview",
    "confirm",
)
CONFIRM_KEYS = {"args": list, "kwargs": dict, "inputs": str}


def _confirm(table: Mapping[str, Any], where: str) -> tuple[tuple[str, str], ...]:
    """`[tool.torchlint-inplace.confirm.ClassName]`: how --confirm builds and feeds that class."""
    value = table["confirm"]
    if not isinstance(value, dict):
        raise ConfigError(f"'confirm' must be a table of class name = {{ args, kwargs, inputs }} in {where}")
    entries = []
    for name, entry in sorted(value.items()):
        section = f"[tool.{TABLE}.confirm.{name}] of {where}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{section} must be a table with keys {', '.join(CONFIRM_KEYS)}")
        for key, item in entry.items():
            if key not in CONFIRM_KEYS:
                raise ConfigError(f"unknown key {key!r} in {section} (known keys: {', '.join(CONFIRM_KEYS)})")
            if not isinstance(item, CONFIRM_KEYS[key]):
                raise ConfigError(f"{key!r} must be a {CONFIRM_KEYS[key].__name__} in {section}")
        try:
            entries.append((name, json.dumps(entry, sort_keys=True)))
        except TypeError as error:  # TOML dates and times
            raise ConfigError(f"{section}: {error}") from None
    return tuple(entries)


def parse_table(table: Mapping[str, Any], path: Path) -> FileConfig:
    where = str(path)
    for key in table:
        if key not in KNOWN_KEYS:
            raise ConfigError(f"unknown key {key!r} in [tool.{TABLE}] of {where} (known keys: {', '.join(KNOWN_KEYS)})")
    preview = table.get("preview", False)
    if not isinstance(preview, bool):
        raise ConfigError(f"'preview' must be true or false in {where}")
    return FileConfig(
        path=path,
        selection=Selection(
            select=_codes(table, "select", where) if "select" in table else None,
            extend_select=_codes(table, "extend-select", where) if "extend-select" in table else (),
            ignore=_codes(table, "ignore", where) if "ignore" in table else (),
        ),
        per_file_ignores=_per_file_ignores(table, where) if "per-file-ignores" in table else (),
        exclude=_string_list(table, "exclude", where) if "exclude" in table else None,
        extend_exclude=_string_list(table, "extend-exclude", where) if "extend-exclude" in table else (),
        include=_string_list(table, "include", where) if "include" in table else None,
        extend_include=_string_list(table, "extend-include", where) if "extend-include" in table else (),
        preview=preview,
        confirm=_confirm(table, where) if "confirm" in table else (),
    )


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"invalid TOML in {path}: {error}") from None
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror or error}") from None


def _tool_table(document: dict[str, Any], path: Path) -> dict[str, Any] | None:
    table = document.get("tool", {}).get(TABLE) if isinstance(document.get("tool"), dict) else None
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"[tool.{TABLE}] must be a table in {path}")
    return table


def load_file(path: Path) -> FileConfig:
    """A config named with --config: a pyproject.toml's table, or a standalone toml's top level."""
    document = _read_toml(path)
    table = _tool_table(document, path) if path.name == "pyproject.toml" else document
    return parse_table(table or {}, path)


def find_config(start: Path) -> FileConfig | None:
    """The nearest pyproject.toml at or above the directory `start` that has our table."""
    return _ConfigFinder().nearest(start)


class _ConfigFinder:
    """`find_config` for many directories, reading each pyproject.toml at most once."""

    def __init__(self) -> None:
        self._found: dict[Path, FileConfig | None] = {}

    def nearest(self, directory: Path) -> FileConfig | None:
        if directory not in self._found:
            candidate = directory / "pyproject.toml"
            # os.path.isfile: False, not an error, where we may not look
            table = _tool_table(_read_toml(candidate), candidate) if os.path.isfile(candidate) else None
            if table is not None:
                self._found[directory] = parse_table(table, candidate)
            else:
                self._found[directory] = None if directory.parent == directory else self.nearest(directory.parent)
        return self._found[directory]


# ---------------------------------------------------------------- putting it together


def _validate_command_line(overrides: Overrides) -> None:
    for where, selectors in (
        ("--select", overrides.selection.select or ()),
        ("--extend-select", overrides.selection.extend_select),
        ("--ignore", overrides.selection.ignore),
    ):
        for selector in selectors:
            validate_selector(selector, where)


def _settings(file: FileConfig, overrides: Overrides, cwd: Path) -> Settings:
    preview = overrides.preview if overrides.preview is not None else file.preview
    root = file.path.parent if file.path is not None else cwd
    exclude = overrides.exclude if overrides.exclude is not None else file.exclude
    return Settings(
        root=str(root),
        select=resolve_selection([file.selection, overrides.selection], preview),
        per_file_ignores=file.per_file_ignores,
        exclude=DEFAULT_EXCLUDE if exclude is None else exclude,
        extend_exclude=(*file.extend_exclude, *overrides.extend_exclude),
        include=DEFAULT_INCLUDE if file.include is None else file.include,
        extend_include=file.extend_include,
        preview=preview,
        config_path=str(file.path) if file.path is not None else None,
        confirm=file.confirm,
    )


class Resolver:
    """The settings of each file of one run (a `Configuration`), from the command line's
    `Overrides` and the configuration files found above each file."""

    def __init__(self, overrides: Overrides | None = None, cwd: Path | None = None) -> None:
        self.overrides = overrides or Overrides()
        self.cwd = Path(os.path.abspath(cwd or Path.cwd()))
        _validate_command_line(self.overrides)
        self._finder = _ConfigFinder()
        self._by_directory: dict[Path, Settings] = {}
        self._fixed: Settings | None = None
        if self.overrides.isolated:
            self._fixed = _settings(FileConfig(path=None), self.overrides, self.cwd)
        elif self.overrides.config is not None:
            self._fixed = _settings(load_file(Path(os.path.abspath(self.overrides.config))), self.overrides, self.cwd)

    def for_path(self, path: Path | str) -> Settings:
        return self.for_directory(Path(os.path.abspath(path)).parent)

    def for_directory(self, directory: Path | str) -> Settings:
        if self._fixed is not None:
            return self._fixed
        folder = Path(os.path.abspath(directory))
        if folder not in self._by_directory:
            self._by_directory[folder] = _settings(
                self._finder.nearest(folder) or FileConfig(path=None), self.overrides, self.cwd
            )
        return self._by_directory[folder]


def resolve(overrides: Overrides, cwd: Path | None = None) -> Settings:
    """The settings of files in the directory `cwd` (default: the current directory)."""
    resolver = Resolver(overrides, cwd)
    return resolver.for_directory(resolver.cwd)
