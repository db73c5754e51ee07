"""Where a cold run's analysis goes, by kind of entry point, and which kinds find anything.

    python benchmarks/entry_costs.py CORPUS

Checks CORPUS in this process, as `check --no-cache -j 1` does, with `Engine.entry_run` and
`Engine.forward_entry` timed (CPU). Each row is a kind of entry point (a class's `forward` on its
defaults, a method, a module-level function; of the checked file, or of a caller file read
for it) with how many ran, their CPU seconds, and how many of them reached a finding located in
the file being analysed: a kind that costs much and finds nothing is where a cut is safe to
look for (that is how the factories `analysis/builders.py` skips were found). A `forward` entry's
time includes its run, which also counts under `forward run`. Memo hits make later entries
cheaper, so the split depends on the order files are checked in.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torchlint_inplace import api
from torchlint_inplace.analysis import engine
from torchlint_inplace.analysis.project import key_of


def _kind(method: str, args: tuple[Any, ...]) -> str:
    if method == "forward_entry":
        return "forward entry (instance built on its defaults)"
    ref = args[0]
    if ref.node.name.value in ("forward", "__call__") and ref.cls is not None:
        return "forward run"
    return "method" if ref.cls is not None else "module-level function"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path)
    corpus = parser.parse_args().corpus
    rows: dict[tuple[str, bool], list[float]] = defaultdict(lambda: [0, 0.0, 0])  # count, CPU s, finding
    analyze = engine.Engine.analyze

    def analyze_noting_callers(self: engine.Engine, ctx: Any, reaching: frozenset[str] | None = None) -> Any:
        self.for_caller = reaching is not None  # type: ignore[attr-defined]
        return analyze(self, ctx, reaching)

    def timed(method: str) -> Callable[..., Any]:
        original = getattr(engine.Engine, method)

        def run(self: engine.Engine, ctx: Any, *args: Any) -> Any:
            start = time.process_time()
            runs = original(self, ctx, *args)
            here = key_of(ctx.path)
            found = any(key_of(m.path) == here for summary in engine._all(runs or []) for m in summary.mutations)
            row = rows[(_kind(method, args), self.for_caller)]  # type: ignore[attr-defined]
            row[0] += 1
            row[1] += time.process_time() - start
            row[2] += found
            return runs

        return run

    engine.Engine.analyze = analyze_noting_callers  # type: ignore[method-assign]
    for method in ("entry_run", "forward_entry"):
        setattr(engine.Engine, method, timed(method))
    start = time.process_time()
    api.lint_paths([corpus], jobs=1)
    total = time.process_time() - start
    print(f"{corpus}: {total:.1f} CPU s in all\n")
    print("| entry kind | of | entries | CPU s | reached a finding of its file |")
    print("|---|---|---:|---:|---:|")
    for (kind, caller), (count, seconds, found) in sorted(rows.items(), key=lambda item: -item[1][1]):
        print(
            f"| {kind} | {'a caller file' if caller else 'the checked file'} | {count:.0f} | {seconds:.1f} | {found:.0f} |"
        )


if __name__ == "__main__":
    main()
