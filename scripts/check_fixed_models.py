"""Do model zoos still run after `--fix --unsafe-fixes`? (the closing check of issue 4)

    python scripts/check_fixed_models.py --timm timm/ --torchvision torchvision/ --deps DIR [--preview]

Each argument is a zoo's package directory (`.../timm`, `.../torchvision`). It is copied twice
to a scratch folder (`--keep DIR` keeps them, to diff and rerun); one copy is linted and fixed
by scripts/corpus_check.py's `check_copy`, then scripts/confirm_models.py runs one model per
architecture family forward and backward on a small inferred input, from the original copy and
from the fixed one, each in its own process (the same stubs on both sides: it prints them).
Reported per zoo: the fix figures, the models that ran on each side (they must be equal), and
every model whose result changed — a model that ran before the fix and fails after it is a
fixer bug. Exits 1 when any model regressed, the fix crashed, or a fixed file does not compile.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus_check  # noqa: E402  (a sibling script)

CONFIRM_MODELS = Path(__file__).resolve().parent / "confirm_models.py"
ZOOS = ("timm", "torchvision")


def run_models(zoo: str, root: Path, options: list[str]) -> tuple[dict[str, str], str]:
    """confirm_models.py over the zoo importable from `root`: each model's result, and its
    closing lines (counts, failure reasons, stubs)."""
    results = root / f"{zoo}-results.json"
    done = subprocess.run(
        [sys.executable, str(CONFIRM_MODELS), f"--{zoo}", str(root), "--results", str(results), *options],
        capture_output=True,
        text=True,
        cwd=root,
    )
    if done.returncode != 0 or not results.exists():
        sys.exit(f"confirm_models.py failed on {root}:\n{done.stderr[-3000:]}")
    return json.loads(results.read_text(encoding="utf-8")), done.stdout.strip()


def ran(results: dict[str, str]) -> set[str]:
    return {name for name, result in results.items() if result.startswith("ok")}


def check_zoo(
    zoo: str, package: Path, scratch: Path, jobs: int | None, options: list[str], preview: bool = False
) -> bool:
    original, fixed = scratch / "original", scratch / "fixed"
    for side in (original, fixed):
        shutil.copytree(package, side / zoo, ignore=shutil.ignore_patterns("__pycache__"))
    figures = corpus_check.check_copy(fixed / zoo, jobs, preview)
    print(corpus_check.summary(package, figures), flush=True)
    before, before_log = run_models(zoo, original, options)
    after, after_log = run_models(zoo, fixed, options)
    regressed = sorted(ran(before) - ran(after))
    changed = sorted(
        name for name in before.keys() | after.keys() if before.get(name) != after.get(name) and name not in regressed
    )
    print(
        f"{zoo} models that ran forward+backward: original {len(ran(before))}/{len(before)}, fixed {len(ran(after))}/{len(after)}"
    )
    print(f"  original copy: {before_log}".replace("\n", "\n  "))
    print(f"  fixed copy: {after_log}".replace("\n", "\n  "))
    print(f"  ran before the fix, fail after it: {len(regressed)}")
    for name in regressed:
        print(f"    {name}: {after[name]}")
    for name in changed:
        print(f"  result changed: {name}: {before.get(name)} -> {after.get(name)}")
    return bool(regressed or figures.failed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for zoo in ZOOS:
        parser.add_argument(f"--{zoo}", type=Path, help=f"the {zoo} package directory")
    parser.add_argument("--deps", type=Path, help="a folder of extra pure dependencies (numpy), for confirm_models.py")
    parser.add_argument("--jobs", "-j", type=int, help="passed to torchlint-inplace (default: all cores)")
    parser.add_argument(
        "--preview", action="store_true", help="also fix the findings only --preview enables (more fixes exercised)"
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per model")
    parser.add_argument("--limit", type=int, help="at most this many models per zoo")
    parser.add_argument("--keep", type=Path, help="put the copies here (a new folder) instead of a temporary one")
    args = parser.parse_args()
    options = [
        "--timeout",
        str(args.timeout),
        *(["--deps", str(args.deps.resolve())] if args.deps else []),
        *(["--limit", str(args.limit)] if args.limit else []),
    ]
    with tempfile.TemporaryDirectory() as temporary:
        scratch = args.keep.resolve() if args.keep else Path(temporary)
        failed = False
        for zoo in ZOOS:
            if (package := getattr(args, zoo)) is not None:
                failed |= check_zoo(zoo, package.resolve(), scratch / zoo, args.jobs, options, args.preview)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
