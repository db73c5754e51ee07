"""Checking files on several cores, with output identical to checking them one by one.

Each worker process has its own `linting.Checker` (its own `analysis.Project`, pre-pass and
cache view: a callee may be summarised once per worker). Results stream back in the order the
files were given, so reports do not depend on scheduling; a worker holds the syntax trees of
the files it reads, never the whole corpus's. Workers ignore Ctrl-C: the main process alone
answers it, and ends the pool on its way out.

A worker the system kills (out of memory) costs the file it was checking, and only that file:
`multiprocessing.Pool` would wait for its lost chunk forever (a transformers run at 596dde8 hung
so). The first file without a result is checked again alone; if that kills its worker too, it
is reported as not checked, and fresh workers go on with the rest.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from .config import Settings
from .diagnostics import not_checked
from .linting import Checker, FileResult, RunOptions

# Files per task: small enough to balance a few huge files, large enough to amortise the pipe.
CHUNK_SIZE = 4
WORKER_DIED = "the process checking this file was killed (out of memory?): the file is too costly to analyse"

_checker: Checker | None = None


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def check_in_parallel(files: Sequence[tuple[Path, Settings]], options: RunOptions, jobs: int) -> Iterator[FileResult]:
    """Each file's result, in the order given, from `jobs` worker processes."""
    done = 0
    while done < len(files):
        try:
            for result in _results(files[done:], options, min(jobs, len(files) - done), CHUNK_SIZE):
                yield result
                done += 1
        except BrokenProcessPool:
            path = str(files[done][0])
            try:
                yield from _results(files[done : done + 1], options, 1, 1)
            except BrokenProcessPool:
                yield FileResult(path, (not_checked(path, WORKER_DIED),))
            done += 1


def _results(
    files: Sequence[tuple[Path, Settings]], options: RunOptions, jobs: int, chunk: int
) -> Iterator[FileResult]:
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
    pool = ProcessPoolExecutor(jobs, mp_context=context, initializer=_start_worker, initargs=(options,))
    finished = False
    try:
        yield from pool.map(_check, files, chunksize=chunk)
        finished = True
    finally:
        # Ctrl-C, or a reader that stopped: the workers end now, not after the chunk they hold.
        for worker in [] if finished else list((getattr(pool, "_processes", None) or {}).values()):
            worker.terminate()
        # Waited for: a pool left to wind down alone races the interpreter's exit, whose hook
        # then writes to the pool's closed wake-up pipe ("OSError: Bad file descriptor").
        pool.shutdown(wait=True, cancel_futures=True)


def _start_worker(options: RunOptions) -> None:
    global _checker
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _checker = Checker(options)


def _check(file: tuple[Path, Settings]) -> FileResult:
    assert _checker is not None
    return _checker.check(*file)
