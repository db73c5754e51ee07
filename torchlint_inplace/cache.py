"""The results cache: a second run over unchanged files reads their findings instead of analysing.

Entries live in `.torchlint_inplace_cache/` at the root of the project that holds each file
(the nearest folder above it with a pyproject.toml, setup.py, setup.cfg or .git: see
`layout.project_root`), never in the directory the command was run from; a file in no
project has its entries in the user's cache directory (`$XDG_CACHE_HOME/torchlint-inplace`,
by default `~/.cache/torchlint-inplace`), so that linting a loose script leaves no folder
beside it. The cache folder holds a `.gitignore` of `*` so that it never shows up in
`git status` (as ruff's cache does). An entry is found by a key made of everything that
decides a file's findings on its own: the tool version, a digest of the linter's own code
(every file of the package, the torch op table and the rule catalogue among them, and the
source files of the rules in use), the file's settings, its path and its content: editing
the analysis and running again never shows old results. Its findings
also depend on other files — callee summaries and, for a file that writes its arguments, the
callers found by scanning its package — so the entry records what those files held when it was
made (content digests of its dependencies; for each package scanned for callers, its list of
files and which of them mention the file's module name, since a caller must name the module it
imports), and is used only while they still hold it.

Entries are JSON, never pickle: a cache directory that came with a checkout must not be able
to run code. A damaged entry is a miss. Internal errors are never cached.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path
from typing import Any

from . import __version__, layout, registry
from .config import Settings
from .diagnostics import Applicability, Edit, Finding, Fix, Position, Related, Severity, Span

CACHE_DIRECTORY = ".torchlint_inplace_cache"
FORMAT = 3  # bump when the entry layout or the key changes
_IDENTIFIER = re.compile(r"\w+")
_CODE_SUFFIXES = (".py", ".json")


def user_cache_directory() -> Path:
    """Where entries of files in no project go (the XDG base directory convention)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "torchlint-inplace"


class ResultsCache:
    """One run's view of the cache; file digests are computed at most once per run.

    `rules` are the rule classes in use: their source files join the digest of the linter's
    own code, so a run with other rules (a plugin, a test's stand-ins) never reads these entries."""

    def __init__(self, rules: Sequence[type]) -> None:
        self._prefix = "\0".join((str(FORMAT), __version__, code_digest(tuple(rules))))
        self._digests: dict[str, str | None] = {}
        self._roots: dict[str, tuple[list[str], dict[str, list[str]]]] = {}
        self._directories: dict[str, Path] = {}
        self._ready: set[Path] = set()

    def directory(self, path: str) -> Path:
        """The cache folder that holds `path`'s entries: its project's, else the user's."""
        folder = os.path.dirname(os.path.abspath(path))
        if folder not in self._directories:
            root = layout.project_root(path)
            self._directories[folder] = root / CACHE_DIRECTORY if root is not None else user_cache_directory()
        return self._directories[folder]

    # ------------------------------------------------------------------ lookups

    def lookup(self, path: str, text: str, settings: Settings) -> tuple[Finding, ...] | None:
        try:
            entry = json.loads(self._entry_path(path, text, settings).read_text("utf-8"))
            if not self._still_valid(entry, Path(path).stem):
                return None
            return tuple(_finding_from_json(item) for item in entry["findings"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def store(
        self,
        path: str,
        text: str,
        settings: Settings,
        findings: Iterable[Finding],
        dependencies: Iterable[str],
        scanned_roots: Iterable[str],
    ) -> None:
        entry = {
            "dependencies": {dependency: self.digest(dependency) for dependency in sorted(dependencies)},
            "roots": {root: self.callers_digest(root, Path(path).stem) for root in sorted(scanned_roots)},
            "findings": [_finding_to_json(finding) for finding in findings],
        }
        try:
            payload = json.dumps(entry)
        except (TypeError, ValueError):
            return  # a finding property JSON cannot hold: analyse this file again next time
        try:
            directory = self._prepare(path)
            with tempfile.NamedTemporaryFile(
                "w", encoding="utf-8", dir=directory, delete=False, suffix=".tmp"
            ) as stream:
                stream.write(payload)
            os.replace(stream.name, self._entry_path(path, text, settings))
        except OSError:
            pass  # a read-only checkout still lints, only without a cache

    def _still_valid(self, entry: dict[str, Any], stem: str) -> bool:
        return all(self.digest(path) == digest for path, digest in entry["dependencies"].items()) and all(
            self.callers_digest(root, stem) == digest for root, digest in entry["roots"].items()
        )

    # ------------------------------------------------------------------ digests

    def digest(self, path: str) -> str | None:
        """The content digest of a file (None when it is gone), once per run."""
        if path not in self._digests:
            try:
                self._digests[path] = hashlib.blake2b(Path(path).read_bytes(), digest_size=16).hexdigest()
            except OSError:
                self._digests[path] = None
        return self._digests[path]

    def callers_digest(self, root: str, module: str) -> str:
        """Who may import `module` from inside `root`: the package's files, and those that name
        the module (`from .layers import ...`, `from pkg import layers`, `import pkg.layers as l`
        all hold the token). The callers themselves are dependencies, digested by content."""
        files, naming = self._package_index(root)
        combined = hashlib.blake2b(digest_size=16)
        combined.update("\0".join(files).encode())
        combined.update(b"\1" + "\0".join(naming.get(module, ())).encode())
        return combined.hexdigest()

    def _package_index(self, root: str) -> tuple[list[str], dict[str, list[str]]]:
        """The package's files, and for each module name in it the files holding that token."""
        if root not in self._roots:
            files = [
                str(path) for path in layout.caller_files(Path(root))
            ]  # the files the analysis' caller search reads
            modules = {Path(path).stem for path in files}
            naming: dict[str, list[str]] = {}
            for path in files:
                try:
                    tokens = set(_IDENTIFIER.findall(Path(path).read_text("utf-8", errors="replace")))
                except OSError:
                    continue
                for module in tokens & modules:
                    naming.setdefault(module, []).append(path)
            self._roots[root] = (files, naming)
        return self._roots[root]

    # ------------------------------------------------------------------ layout

    def _entry_path(self, path: str, text: str, settings: Settings) -> Path:
        key = hashlib.blake2b(f"{self._prefix}\0{settings!r}\0{os.path.abspath(path)}\0".encode(), digest_size=20)
        key.update(text.encode("utf-8", "surrogatepass"))
        return self.directory(path) / f"{key.hexdigest()}.json"

    def _prepare(self, path: str) -> Path:
        directory = self.directory(path)
        if directory not in self._ready:
            directory.mkdir(parents=True, exist_ok=True)
            ignore = directory / ".gitignore"
            if not ignore.exists():
                ignore.write_text("# Automatically created by torchlint-inplace.\n*\n", encoding="utf-8")
            self._ready.add(directory)
        return directory


def _package_folders() -> list[Path]:
    """The engine's folder and the rule catalogue's (apart in an editable install)."""
    rules = importlib.import_module(registry.CATALOGUE)
    return [Path(__file__).resolve().parent, *(Path(folder).resolve() for folder in rules.__path__)]


@lru_cache(maxsize=8)
def code_digest(rules: tuple[type, ...]) -> str:
    """A digest of the code that computes findings: every Python and JSON file of the package
    (engine, analysis, torch tables, rules), and the name and source file of each rule in
    `rules` (a rule defined where no source file is known is told apart by its name alone)."""
    files = {path for folder in _package_folders() for path in folder.rglob("*") if path.suffix in _CODE_SUFFIXES}
    files.update(source for rule in rules if (source := _source_file(rule)) is not None)
    digest = hashlib.blake2b(digest_size=16)
    digest.update("\0".join(f"{rule.__module__}.{rule.__qualname__}" for rule in rules).encode())
    for path in sorted(files):
        digest.update(b"\0" + path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _source_file(rule: type) -> Path | None:
    try:
        source = inspect.getsourcefile(rule)
    except (TypeError, OSError):
        return None
    return Path(source).resolve() if source is not None else None


# ----------------------------------------------------------------------------- findings as JSON


def _finding_to_json(finding: Finding) -> dict[str, Any]:
    return asdict(finding)


def _span(data: dict[str, Any]) -> Span:
    return Span(Position(**data["start"]), Position(**data["end"]))


def _finding_from_json(data: dict[str, Any]) -> Finding:
    fix = data["fix"]
    return Finding(
        path=data["path"],
        code=data["code"],
        name=data["name"],
        message=data["message"],
        severity=Severity(data["severity"]),
        span=_span(data["span"]),
        consequence=data["consequence"],
        related=tuple(Related(item["path"], _span(item["span"]), item["message"]) for item in data["related"]),
        help=data["help"],
        fix=None
        if fix is None
        else Fix(
            fix["description"],
            tuple(Edit(_span(edit["span"]), edit["content"]) for edit in fix["edits"]),
            Applicability(fix["applicability"]),
        ),
        properties=data["properties"],
    )
