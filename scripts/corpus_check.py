"""Lints and fixes copies of real corpora and reports what must be zero: crashes and fixes
that leave a file which no longer compiles.

    python scripts/corpus_check.py                      # the installed torch package's sources
    python scripts/corpus_check.py --limit 300          # its first 300 files (sorted), a quick run
    python scripts/corpus_check.py fixtures/ ../timm    # any directories

Each corpus is copied to a temporary directory (the original is never touched). There the
command runs twice, as a user would: a lint (`--format json`), then `--fix --unsafe-fixes`.
A crash is an exit code other than 0 or 1, a traceback, or an "internal error" TIP000 (an
exception of ours caught per file). Every file the fix changed is compiled again. Exits 1 when
any count that must be zero is not.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

COMMAND = [sys.executable, "-m", "torchlint_inplace", "--isolated", "--no-cache", "--preview", "--select", "ALL"]


@dataclass
class Figures:
    files: int
    findings: int
    crashes: list[str]
    fixes_applied: int
    files_fixed: int
    unparsable_fixes: list[str]
    lint_seconds: float
    fix_seconds: float


def torch_sources() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        sys.exit("torch is not installed; name a corpus directory")
    return Path(spec.origin).parent


def compiles(data: bytes, name: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(data, name, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def copy_corpus(corpus: Path, destination: Path, limit: int | None) -> dict[Path, bytes]:
    """The first `limit` Python files of `corpus` (all when None) copied under `destination`;
    returns each copy's original bytes."""
    sources = sorted(path for path in corpus.rglob("*.py") if path.is_file() and "__pycache__" not in path.parts)
    originals = {}
    for source in sources[:limit]:
        copy = destination / source.relative_to(corpus)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, copy)
        originals[copy] = copy.read_bytes()
    return originals


def run(arguments: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.perf_counter()
    # Run beside the copy, not inside it: its modules would shadow the standard library.
    result = subprocess.run(COMMAND + arguments, cwd=cwd, capture_output=True, text=True)
    return result, time.perf_counter() - started


def crashes_of(result: subprocess.CompletedProcess[str], findings: list[dict]) -> list[str]:
    crashes = [f"{f['filename']}: {f['message']}" for f in findings if f["code"] == "TIP000" and f["message"].startswith("internal error")]
    if result.returncode not in (0, 1) or "Traceback" in result.stderr:
        crashes.append(f"exit {result.returncode}: {result.stderr.strip()[-2000:]}")
    return crashes


def check_corpus(corpus: Path, limit: int | None, jobs: int | None) -> Figures:
    with tempfile.TemporaryDirectory() as temporary:
        copy = Path(temporary) / corpus.name
        originals = copy_corpus(corpus, copy, limit)
        job_options = ["--jobs", str(jobs)] if jobs else []
        linted, lint_seconds = run([*job_options, "--format", "json", copy.name], copy.parent)
        report = json.loads(linted.stdout) if linted.stdout.strip() else {"findings": []}
        fixed, fix_seconds = run([*job_options, "--fix", "--unsafe-fixes", "--format", "json", copy.name], copy.parent)
        fixed_report = json.loads(fixed.stdout) if fixed.stdout.strip() else {"fixed": 0, "findings": []}
        changed = [path for path, data in originals.items() if path.read_bytes() != data]
        return Figures(
            files=len(originals),
            findings=len(report["findings"]),
            crashes=crashes_of(linted, report["findings"]) + crashes_of(fixed, fixed_report["findings"]),
            fixes_applied=fixed_report.get("fixed", 0),
            files_fixed=len(changed),
            unparsable_fixes=[str(path.relative_to(copy)) for path in changed if not compiles(path.read_bytes(), str(path))],
            lint_seconds=lint_seconds,
            fix_seconds=fix_seconds,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpora", nargs="*", type=Path, help="directories to copy, lint and fix (default: the installed torch)")
    parser.add_argument("--limit", type=int, help="check only the first N Python files of each corpus (sorted by path)")
    parser.add_argument("--jobs", "-j", type=int, help="passed to torchlint-inplace (default: all cores)")
    args = parser.parse_args()
    failed = False
    for corpus in [path.resolve() for path in args.corpora] or [torch_sources()]:
        figures = check_corpus(corpus, args.limit, args.jobs)
        print(f"corpus: {corpus}")
        print(f"  files: {figures.files}, findings: {figures.findings}")
        print(f"  crashes: {len(figures.crashes)}")
        print(f"  fixes applied: {figures.fixes_applied} in {figures.files_fixed} files")
        print(f"  fixed files that do not compile: {len(figures.unparsable_fixes)}")
        print(f"  time: lint {figures.lint_seconds:.1f} s, fix {figures.fix_seconds:.1f} s")
        for problem in figures.crashes + figures.unparsable_fixes:
            print(f"    {problem}")
        failed |= bool(figures.crashes or figures.unparsable_fixes)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
