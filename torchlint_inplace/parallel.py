"""Checking files on several cores, with output identical to checking them one by one.

Each worker process has its own `runner.Checker` (its own `analysis.Project`, pre-pass and cache
view: a callee may be summarised once per worker). Results stream back in
the order the files were given, so reports do not depend on scheduling; a worker holds the
syntax trees of the files it reads, never the whole corpus's.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from . import runner
from .config import Settings

# Files per task: small enough to balance a few huge files, large enough to amortise the pipe.
CHUNK_SIZE = 4

_checker: runner.Checker | None = None


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def check_in_parallel(paths: Sequence[Path], settings: Settings, jobs: int, use_cache: bool) -> Iterator[runner.FileResult]:
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
    with context.Pool(min(jobs, len(paths)), initializer=_start_worker, initargs=(settings, use_cache)) as pool:
        yield from pool.imap(_check, paths, chunksize=CHUNK_SIZE)


def _start_worker(settings: Settings, use_cache: bool) -> None:
    global _checker
    _checker = runner.Checker(settings, use_cache)


def _check(path: Path) -> runner.FileResult:
    assert _checker is not None
    return _checker.check(path)
