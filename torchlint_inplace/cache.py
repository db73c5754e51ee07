"""The results cache: a second run over unchanged files reads their findings instead of analysing.

Entries live in `.torchlint_inplace_cache/` under the project root, which holds a `.gitignore`
of `*` so that it never shows up in `git status` (as ruff's cache does). An entry is found by a
key made of everything that decides a file's findings on its own: the tool version, the hash
of the torch op table, the effective settings, the file's path and its content. Its findings
also depend on other files — callee summaries and, for a file that writes its arguments, the
callers found by scanning its package — so the entry records what those files held when it was
made (content digests of its dependencies; for each package scanned for callers, its list of
files and which of them mention the file's module name, since a caller must name the module it
imports), and is used only while they still hold it. The key also names the analysis
function and rule classes in use, so a run with stand-ins never reads real entries.

Entries are JSON, never pickle: a cache directory that came with a checkout must not be able
to run code. A damaged entry is a miss. Internal errors are never cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import asdict
from importlib import resources
from pathlib import Path

from . import __version__, analysis, registry
from .config import Settings
from .diagnostics import Applicability, Edit, Finding, Fix, Position, Related, Severity, Span

CACHE_DIRECTORY = ".torchlint_inplace_cache"
FORMAT = 2  # bump when the entry layout changes
_IDENTIFIER = re.compile(r"\w+")


class ResultsCache:
    """One run's view of the cache; file digests are computed at most once per run."""

    def __init__(self, directory: Path, settings: Settings) -> None:
        self.directory = directory
        self._prefix = "\0".join((str(FORMAT), __version__, _torch_table_digest(), _code_identity(), repr(settings)))
        self._digests: dict[str, str | None] = {}
        self._roots: dict[str, tuple[list[str], dict[str, list[str]]]] = {}
        self._ready = False

    @classmethod
    def for_settings(cls, settings: Settings) -> "ResultsCache":
        return cls(Path(settings.root) / CACHE_DIRECTORY, settings)

    # ------------------------------------------------------------------ lookups

    def lookup(self, path: str, text: str) -> tuple[Finding, ...] | None:
        try:
            entry = json.loads(self._entry_path(path, text).read_text("utf-8"))
            if not self._still_valid(entry, Path(path).stem):
                return None
            return tuple(_finding_from_json(item) for item in entry["findings"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def store(self, path: str, text: str, findings: Iterable[Finding], dependencies: Iterable[str], scanned_roots: Iterable[str]) -> None:
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
            self._prepare()
            with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=self.directory, delete=False, suffix=".tmp") as stream:
                stream.write(payload)
            os.replace(stream.name, self._entry_path(path, text))
        except OSError:
            pass  # a read-only checkout still lints, only without a cache

    def _still_valid(self, entry: dict, stem: str) -> bool:
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
            files = [str(path) for path in sorted(Path(root).rglob("*.py"))]
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

    def _entry_path(self, path: str, text: str) -> Path:
        key = hashlib.blake2b(f"{self._prefix}\0{os.path.abspath(path)}\0".encode(), digest_size=20)
        key.update(text.encode("utf-8", "surrogatepass"))
        return self.directory / f"{key.hexdigest()}.json"

    def _prepare(self) -> None:
        if not self._ready:
            self.directory.mkdir(parents=True, exist_ok=True)
            ignore = self.directory / ".gitignore"
            if not ignore.exists():
                ignore.write_text("# Automatically created by torchlint-inplace.\n*\n", encoding="utf-8")
            self._ready = True


def _code_identity() -> str:
    """Which analysis and rules compute findings: a run with other ones (a plugin, a test's
    stand-ins) must not read this one's entries."""
    functions = [analysis.analyze, *registry.all_rules()]
    return ",".join(f"{function.__module__}.{function.__qualname__}" for function in functions)


def _torch_table_digest() -> str:
    data = resources.files("torchlint_inplace.data").joinpath("torch_ops.json").read_bytes()
    return hashlib.blake2b(data, digest_size=16).hexdigest()


# ----------------------------------------------------------------------------- findings as JSON


def _finding_to_json(finding: Finding) -> dict:
    return asdict(finding)


def _span(data: dict) -> Span:
    return Span(Position(**data["start"]), Position(**data["end"]))


def _finding_from_json(data: dict) -> Finding:
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
        fix=None if fix is None else Fix(fix["description"], tuple(Edit(_span(edit["span"]), edit["content"]) for edit in fix["edits"]), Applicability(fix["applicability"])),
        properties=data["properties"],
    )
