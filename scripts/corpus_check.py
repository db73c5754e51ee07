"""Lints and fixes a copy of real corpora and reports what must be zero: crashes, and fixes
that leave a file which no longer compiles.

    python scripts/corpus_check.py                        # the installed torch package's sources
    python scripts/corpus_check.py --limit 300            # its first 300 files (sorted), a quick run
    python scripts/corpus_check.py fixtures/ ../timm      # any directories
    python scripts/corpus_check.py --jobs 1 --findings torch.txt   # one core; keep the findings

Each corpus's Python files are copied to a temporary directory (the original is never touched).
There the command runs as a user runs it: a lint (`--format json`), then `--fix --unsafe-fixes`.
The lint fills the results cache, so the fix run analyses again only the files it fixes — the
corpus is analysed once, and the findings are those of the unfixed files, with their lines.
A crash is an exit code other than 0 or 1, a traceback, an "internal error" TIP000 (an
exception of ours caught per file), or a file left unfixed after an internal error while
relinting it. Every file the fix wrote is read back and compiled. Exits 1 when any count that
must be zero is not.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from torchlint_inplace.fixes.apply import compiles
from torchlint_inplace.source import NotReadable, read

COMMAND = [sys.executable, "-m", "torchlint_inplace", "--isolated"]
RELINT_ERROR = "internal error while relinting"
DROPPED_FIX = "would not compile; not applied"


@dataclass
class Pass:
    """One run of the command: its JSON report, stderr, exit code and cost."""

    report: dict
    stderr: str
    returncode: int
    wall_seconds: float
    cpu_seconds: float  # user + system of the command and its workers

    def crashes(self) -> list[str]:
        found = [
            f"{f['filename']}: {f['message']}"
            for f in self.report["findings"]
            if f["code"] == "TIP000" and f["message"].startswith("internal error")
        ]
        found += [line for line in self.stderr.splitlines() if RELINT_ERROR in line]
        if self.returncode not in (0, 1) or "Traceback" in self.stderr:
            found.append(f"exit {self.returncode}: {self.stderr.strip()[-2000:]}")
        return found


@dataclass
class Figures:
    files: int
    lint: Pass
    fix: Pass
    written: list[str]
    uncompilable: list[str] = field(default_factory=list)  # written files that no longer compile

    @property
    def crashes(self) -> list[str]:
        return self.lint.crashes() + self.fix.crashes()

    @property
    def dropped_fixes(self) -> list[str]:
        """Fixes the fixer refused because the result would not compile (its safety net caught
        a wrong edit: not a corruption, but a fix worth looking at)."""
        return [line for line in self.fix.stderr.splitlines() if DROPPED_FIX in line]

    @property
    def failed(self) -> bool:
        return bool(self.crashes or self.uncompilable)


def torch_sources() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        sys.exit("torch is not installed; name a corpus directory")
    return Path(spec.origin).parent


def python_files(tree: Path) -> list[Path]:
    return sorted(path for path in tree.rglob("*.py") if path.is_file() and "__pycache__" not in path.parts)


def copy_corpus(corpus: Path, destination: Path, limit: int | None = None) -> None:
    """The first `limit` Python files of `corpus` (all when None) copied under `destination`."""
    for source in python_files(corpus)[:limit]:
        copy = destination / source.relative_to(corpus)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, copy)


def run(arguments: list[str], cwd: Path) -> Pass:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(COMMAND + arguments, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    report = json.loads(result.stdout) if result.stdout.strip() else {"fixed": 0, "findings": []}
    return Pass(report, result.stderr, result.returncode, wall, cpu)


def still_compiles(path: Path) -> bool:
    try:
        return compiles(read(path).text, str(path))
    except NotReadable:
        return False


def check_copy(copy: Path, jobs: int | None = None, preview: bool = False) -> Figures:
    """Lints, then fixes with --unsafe-fixes, the tree `copy` in place (it must be a copy);
    the command runs beside it, not inside it, where its modules would shadow the stdlib."""
    originals = {path: path.read_bytes() for path in python_files(copy)}
    options = [*(["--jobs", str(jobs)] if jobs else []), *(["--preview"] if preview else []), "--format", "json"]
    lint = run([*options, copy.name], copy.parent)
    fix = run([*options, "--fix", "--unsafe-fixes", copy.name], copy.parent)
    written = [path for path, data in originals.items() if path.read_bytes() != data]
    return Figures(
        files=len(originals),
        lint=lint,
        fix=fix,
        written=[str(path.relative_to(copy.parent)) for path in written],
        uncompilable=[str(path.relative_to(copy.parent)) for path in written if not still_compiles(path)],
    )


def finding_lines(report: dict, root: Path) -> list[str]:
    """`path:line:column code message` per finding (1-based column), paths under `root`."""
    return [
        f"{root / f['filename']}:{f['location']['row']}:{f['location']['column']} {f['code']} {f['message'].splitlines()[0]}"
        for f in report["findings"]
    ]


def summary(corpus: Path, figures: Figures) -> str:
    lint, fix = figures.lint, figures.fix
    lines = [
        f"corpus: {corpus}",
        f"  files: {figures.files}, findings: {len(lint.report['findings'])}",
        f"  crashes: {len(figures.crashes)}",
        f"  fixes applied: {fix.report.get('fixed', 0)}, files written: {len(figures.written)}, findings remaining: {len(fix.report['findings'])}",
        f"  fixes dropped because the result would not compile: {len(figures.dropped_fixes)}",
        f"  written files that do not compile: {len(figures.uncompilable)}",
        f"  time: lint {lint.wall_seconds:.1f} s wall / {lint.cpu_seconds:.1f} s CPU, fix {fix.wall_seconds:.1f} s wall / {fix.cpu_seconds:.1f} s CPU",
    ]
    return "\n".join(
        lines + [f"    {problem}" for problem in figures.crashes + figures.dropped_fixes + figures.uncompilable]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "corpora", nargs="*", type=Path, help="directories to copy, lint and fix (default: the installed torch)"
    )
    parser.add_argument("--limit", type=int, help="check only the first N Python files of each corpus (sorted by path)")
    parser.add_argument("--jobs", "-j", type=int, help="passed to torchlint-inplace (default: all cores)")
    parser.add_argument(
        "--preview", action="store_true", help="also report and fix the findings only --preview enables"
    )
    parser.add_argument(
        "--findings", type=Path, help="write the lint's findings here, one `path:line:col code message` a line"
    )
    args = parser.parse_args()
    failed = False
    found: list[str] = []
    for corpus in [path.resolve() for path in args.corpora] or [torch_sources()]:
        with tempfile.TemporaryDirectory() as temporary:
            copy = Path(temporary) / corpus.name
            copy_corpus(corpus, copy, args.limit)
            figures = check_copy(copy, args.jobs, args.preview)
        print(summary(corpus, figures), flush=True)
        found += finding_lines(figures.lint.report, corpus.parent)
        failed |= figures.failed
    if args.findings:
        args.findings.write_text("".join(line + "\n" for line in found), encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
