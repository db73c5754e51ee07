"""Checking files on several cores, with output identical to checking them one by one.

Each worker process has its own `linting.Checker` (its own `analysis.Project`, pre-pass and
cache view: a callee may be summarised once per worker). Results stream back in the order the
files were given, so reports do not depend on scheduling; a worker holds the syntax trees of
the files it reads, never the whole corpus's. Workers ignore Ctrl-C: the main process alone
answers it, and ends the pool on its way out.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Iterator, Sequence
from pathlib import Path

from .config import Settings
from .linting import Checker, FileResult, RunOptions

# Files per task: small enough to balance a few huge files, large enough to amortise the pipe.
CHUNK_SIZE = 4

_checker: Checker | None = None


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def check_in_parallel(files: Sequence[tuple[Path, Settings]], options: RunOptions, jobs: int) -> Iterator[FileResult]:
    """Each file's result, in the order given, from `jobs` worker processes."""
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
    with context.Pool(min(jobs, len(files)), initializer=_start_worker, initargs=(options,)) as pool:
        yield from pool.imap(_check, files, chunksize=CHUNK_SIZE)


def _start_worker(options: RunOptions) -> None:
    global _checker
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _checker = Checker(options)


def _check(file: tuple[Path, Settings]) -> FileResult:
    assert _checker is not None
    return _checker.check(*file)
