"""Whole-run timings of torchlint-inplace against the LibCST parse floor and other LibCST linters.

    python benchmarks/bench.py [CORPUS] [--repeat N] [--external-bin DIR] [--verify-prepass]

CORPUS defaults to the installed torch package's sources. It is copied to a scratch directory
first (so that one file can be edited for the "one file changed" run, and so that the default
`site-packages` exclude does not apply); every run is a fresh process, timed by wall clock,
with its peak resident memory from `wait4`. Each row is the median of N runs. Rows:

- LibCST parse only, 1 process: `libcst.parse_module` over the same files — the floor for any
  LibCST linter (and Python's `ast.parse`, for scale);
- torchlint-inplace cold with `--jobs 1` and with all cores (`--no-cache`);
- warm: the cache filled, nothing changed; and one file changed (a comment appended);
- TorchFix and Fixit, when their executables are in `--external-bin` (or on PATH).

`--verify-prepass` instead runs the full analysis on every file the pre-pass skips and fails
if any finding turns up (the corpus-wide version of tests/test_prepass.py).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing import Pool
from pathlib import Path

from torchlint_inplace import api, config, registry, source
from torchlint_inplace.analysis import prepass
from torchlint_inplace.discovery import discover
from torchlint_inplace.parallel import default_jobs

TOOL = [sys.executable, "-m", "torchlint_inplace", "--isolated", "--exit-zero", "--quiet", "--format", "concise"]


@dataclass(frozen=True)
class Run:
    seconds: float
    cpu_seconds: float  # user + system, workers included: what contention on the machine does not inflate
    peak_mb: float


@dataclass(frozen=True)
class Row:
    name: str
    runs: list[Run]

    @property
    def seconds(self) -> float:
        return statistics.median(run.seconds for run in self.runs)

    @property
    def cpu_seconds(self) -> float:
        return statistics.median(run.cpu_seconds for run in self.runs)

    @property
    def peak_mb(self) -> float:
        return max(run.peak_mb for run in self.runs)


# As installed for users: bytecode caches written and read (some sandboxes turn them off, which
# makes every run recompile the tool's and LibCST's sources: 0.2 s, a third of a warm run).
ENVIRONMENT = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def timed(command: Sequence[str], cwd: Path) -> Run:
    """One fresh process: wall time and the peak RSS of its largest process (workers included)."""
    with tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=errors, env=ENVIRONMENT)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode not in (0, 1):
            errors.seek(0)
            raise SystemExit(
                f"{' '.join(map(str, command))} failed ({process.returncode}):\n{errors.read().decode(errors='replace')[-2000:]}"
            )
    return Run(seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


def repeat(name: str, command: Sequence[str], cwd: Path, times: int, before=None) -> Row:
    runs = []
    for index in range(times):
        if before is not None:
            before(index)
        runs.append(timed(command, cwd))
        print(f"  {name}: {runs[-1].seconds:.1f} s wall, {runs[-1].cpu_seconds:.1f} s CPU", file=sys.stderr, flush=True)
    return Row(name, runs)


# ----------------------------------------------------------------------------- the floor


def parse_only(list_file: str, parser: str) -> None:
    """Parse every listed file in this process, as a LibCST linter must before anything else."""
    import ast

    import libcst

    parse = libcst.parse_module if parser == "libcst" else ast.parse
    for line in Path(list_file).read_text("utf-8").splitlines():
        try:
            parse(source.read(Path(line)).text)
        except Exception:  # noqa: BLE001 — a file the parser rejects still cost its attempt
            pass


# ----------------------------------------------------------------------------- the pre-pass check


def _verify_one(path: str) -> tuple[str, bool, list[str]]:
    text = source.read(Path(path)).text
    if not prepass.verdict(path, text).skippable:
        return path, False, []
    every_rule = config.Settings(root="/", select=registry.codes(), preview=True)
    findings = api.lint_source(text, path, every_rule, prepass=False)
    return path, True, [f"{f.line}:{f.span.start.column + 1} {f.code} {f.message}" for f in findings]


def verify_prepass(files: list[Path], jobs: int) -> int:
    with Pool(jobs) as pool:
        results = pool.map(_verify_one, map(str, files), chunksize=4)
    skipped = [result for result in results if result[1]]
    wrong = [result for result in skipped if result[2]]
    print(
        f"pre-pass skipped {len(skipped)} of {len(files)} files; the full analysis finds something in {len(wrong)} of them"
    )
    for path, _, findings in wrong:
        print(f"UNSOUND {path}: " + "; ".join(findings))
    return 1 if wrong else 0


# ----------------------------------------------------------------------------- main


def default_corpus() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        raise SystemExit("torch is not installed: give a corpus directory")
    return Path(spec.origin).parent


def copy_corpus(corpus: Path, scratch: Path) -> Path:
    target = scratch / corpus.name
    shutil.copytree(
        corpus,
        target,
        ignore=lambda folder, names: [
            n for n in names if not (n.endswith((".py", ".pyi")) or (Path(folder) / n).is_dir())
        ],
    )
    return target


def external(name: str, directory: str | None) -> str | None:
    if directory is not None and (Path(directory) / name).exists():
        return str(Path(directory) / name)
    return shutil.which(name)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", nargs="?", type=Path)
    parser.add_argument("--repeat", type=int, default=3, help="runs per row (median); default 3")
    parser.add_argument("--external-repeat", type=int, default=1, help="runs for TorchFix / Fixit; default 1")
    parser.add_argument("--external-bin", help="directory holding the torchfix and fixit executables (a venv's bin/)")
    parser.add_argument("--jobs", type=int, default=default_jobs(), help="'all cores' for the parallel rows")
    parser.add_argument(
        "--verify-prepass", action="store_true", help="check the pre-pass against the full analysis instead"
    )
    parser.add_argument("--parse-only", nargs=2, metavar=("LIST", "PARSER"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.parse_only:
        parse_only(*args.parse_only)
        return 0
    corpus = (args.corpus or default_corpus()).resolve()
    with tempfile.TemporaryDirectory(prefix="torchlint-bench-") as scratch_name:
        scratch = Path(scratch_name)
        tree = copy_corpus(corpus, scratch)
        settings = config.resolve(config.Overrides(isolated=True), cwd=scratch)
        files = list(discover([tree], settings))
        lines = sum(source.read(path).text.count("\n") for path in files)
        if args.verify_prepass:
            return verify_prepass(files, args.jobs)
        list_file = scratch / "files.txt"
        list_file.write_text("\n".join(map(str, files)), "utf-8")
        work = scratch / "work"  # the cache lives under the working directory, the project root
        work.mkdir()
        n = args.repeat
        print(
            f"corpus {corpus}: {len(files)} files, {lines / 1000:.0f} kLOC; {os.cpu_count()} cores (parallel rows use {args.jobs}); median of {n}",
            file=sys.stderr,
        )
        rows = [
            repeat(
                "LibCST parse only, 1 process",
                [sys.executable, __file__, "--parse-only", str(list_file), "libcst"],
                work,
                n,
            ),
            repeat(
                "ast parse only, 1 process", [sys.executable, __file__, "--parse-only", str(list_file), "ast"], work, n
            ),
            repeat("torchlint-inplace cold, --jobs 1", [*TOOL, "--no-cache", "--jobs", "1", str(tree)], work, n),
            repeat(
                f"torchlint-inplace cold, --jobs {args.jobs}",
                [*TOOL, "--no-cache", "--jobs", str(args.jobs), str(tree)],
                work,
                n,
            ),
        ]
        warm_command = [*TOOL, "--jobs", str(args.jobs), str(tree)]
        timed(warm_command, work)  # fill the cache
        rows.append(repeat("warm cache, nothing changed", warm_command, work, n))
        edited = sorted(files, key=lambda path: path.stat().st_size)[len(files) // 2]  # a typical file

        def edit(index: int) -> None:
            with edited.open("a", encoding="utf-8") as stream:
                stream.write(f"\n# benchmark edit {index}\n")

        rows.append(repeat("warm cache, one file changed", warm_command, work, n, before=edit))
        for name, command in (("TorchFix", ["torchfix"]), ("Fixit", ["fixit", "lint"])):
            executable = external(command[0], args.external_bin)
            if executable is not None:
                rows.append(repeat(name, [executable, *command[1:], str(tree)], work, args.external_repeat))
        print_table(rows, corpus, len(files), lines, args.jobs, n)
    return 0


def print_table(rows: list[Row], corpus: Path, files: int, lines: int, jobs: int, n: int) -> None:
    by_name = {row.name: row for row in rows}
    floor = rows[0].seconds
    cold_one = by_name["torchlint-inplace cold, --jobs 1"].seconds
    cold_all = by_name[f"torchlint-inplace cold, --jobs {jobs}"].seconds
    print(f"corpus: {corpus} ({files} files, {lines / 1000:.0f} kLOC); {os.cpu_count()} cores; median of {n} runs\n")
    print("| run | wall s | CPU s | wall vs parse floor | vs cold --jobs 1 | vs cold all cores | peak MB |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row.name} | {row.seconds:.2f} | {row.cpu_seconds:.2f} | {row.seconds / floor:.2f}x | {row.seconds / cold_one:.1%} | {row.seconds / cold_all:.1%} | {row.peak_mb:.0f} |"
        )
    print()
    print(
        f"- cold, 1 process, vs LibCST parse floor: {cold_one / floor:.2f}x wall, {by_name['torchlint-inplace cold, --jobs 1'].cpu_seconds / rows[0].cpu_seconds:.2f}x CPU (goal <= 1.0x)"
    )
    for name in ("TorchFix", "Fixit"):
        if name in by_name:  # they use every core by default: compare with ours on every core, and CPU with CPU
            other = by_name[name]
            ours = by_name[f"torchlint-inplace cold, --jobs {jobs}"]
            print(
                f"- {name} / torchlint-inplace cold all cores: {other.seconds / ours.seconds:.1f}x wall, {other.cpu_seconds / ours.cpu_seconds:.1f}x CPU (goal >= 10x)"
            )
    print(f"- all cores ({jobs}) speedup over 1 process: {cold_one / cold_all:.2f}x (goal >= 1.7x on 2 cores)")
    print(
        f"- warm, nothing changed: {by_name['warm cache, nothing changed'].seconds / cold_all:.1%} of cold (goal <= 5%)"
    )
    print(
        f"- warm, one file changed: {by_name['warm cache, one file changed'].seconds / cold_all:.1%} of cold (goal <= 10%)"
    )
    print(
        f"- peak memory: {max(row.peak_mb for row in rows if row.name.startswith(('torchlint', 'warm'))):.0f} MB (goal < 500 MB)"
    )


if __name__ == "__main__":
    sys.exit(main())
