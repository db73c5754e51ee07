"""Runs `torchlint-inplace --fix --unsafe-fixes` over a copy of a real corpus and checks the result.

    python scripts/fix_corpus.py            # the installed torch package's sources
    python scripts/fix_corpus.py DIR        # any directory

The corpus is copied to a temporary directory (the original is never touched), fixed there, and
every written file is compiled again. Prints fixes applied, files written, files that no longer
compile (must be 0: the fixer checks before writing) and the time taken; exits 1 if any file broke.
"""

from __future__ import annotations

import argparse
import filecmp
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path


def torch_sources() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        sys.exit("torch is not installed; give a directory")
    return Path(spec.origin).parent


def compiles(path: Path) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", nargs="?", type=Path, help="directory to copy and fix (default: the installed torch)")
    parser.add_argument("--preview", action="store_true", help="also fix the findings only --preview reports (more fixes exercised)")
    args = parser.parse_args()
    corpus = (args.corpus or torch_sources()).resolve()
    with tempfile.TemporaryDirectory() as temporary:
        copy = Path(temporary) / corpus.name
        shutil.copytree(corpus, copy, ignore=shutil.ignore_patterns("*.so", "*.so.*", "*.a", "*.dylib", "*.pyc", "__pycache__"))
        originals = {path: compiles(path) for path in copy.rglob("*.py")}
        command = [sys.executable, "-m", "torchlint_inplace", "--fix", "--unsafe-fixes", "--show-fixes", "--isolated", "--format", "concise", "--quiet", *(["--preview"] if args.preview else []), copy.name]
        started = time.perf_counter()
        result = subprocess.run(command, cwd=copy.parent, capture_output=True, text=True)  # not inside: its modules would shadow the stdlib
        elapsed = time.perf_counter() - started
        if result.returncode not in (0, 1):
            print(result.stderr, file=sys.stderr)
            return 2
        written = [path for path in originals if not filecmp.cmp(path, corpus / path.relative_to(copy), shallow=False)]
        broken = [path for path in written if originals[path] and not compiles(path)]
        applied = int(match.group(1)) if (match := re.search(r"^Fixed (\d+) errors?:", result.stderr, re.MULTILINE)) else 0
        rejected = result.stderr.count("would not compile; not applied")
        remaining = len([line for line in result.stdout.splitlines() if line.strip()])
        print(f"corpus: {corpus} ({len(originals)} Python files)")
        print(f"fixes applied: {applied}")
        print(f"files written: {len(written)}")
        print(f"fixes dropped because the result would not compile: {rejected}")
        print(f"findings remaining: {remaining}")
        print(f"files that no longer compile: {len(broken)}")
        for path in broken:
            print(f"  {path.relative_to(copy)}")
        print(f"time: {elapsed:.1f} s")
        return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
