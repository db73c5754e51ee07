"""Which files of a corpus cost the most time and memory, and which caller files they read.

    python benchmarks/file_costs.py CORPUS [--top N] [--limit-mb MB]

Checks CORPUS in this process, one file after the other as one worker of `check --no-cache`
does (one project: what was learnt for a file stays for the next), and prints the N files whose
check took longest or grew the resident memory most, each with the caller files its analysis
read (`Engine.analyze` with the names they import) and their own cost. A watchdog thread stops
the run past `--limit-mb` resident, naming the file and the caller being analysed: a run that
would eat the machine (the installed torch at a71ed89, a worker past 18.5 GB) is found in
minutes, not killed by the system with nothing to show. That is how `Choice`s nested sixty deep
were traced to `torch/_dynamo/create_parameter_op.py`'s callers (docs/precision.md, ninth).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchlint_inplace import registry
from torchlint_inplace.analysis import engine
from torchlint_inplace.config import Resolver
from torchlint_inplace.discovery import discover
from torchlint_inplace.linting import Checker, RunOptions


def resident_mb() -> float:
    with open("/proc/self/statm") as statm:  # Linux: resident pages are the second field
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


@dataclass
class Cost:
    seconds: float = 0.0
    grown_mb: float = 0.0
    callers: list[tuple[str, float, float]] = field(default_factory=list)  # path, s, MB grown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--limit-mb", type=float, default=8000.0)
    options = parser.parse_args()
    costs: dict[str, Cost] = {}
    now = {"file": "", "caller": ""}
    analyze = engine.Engine.analyze

    def analyze_measured(self: engine.Engine, ctx: Any, reaching: frozenset[str] | None = None) -> Any:
        if reaching is None:
            return analyze(self, ctx, reaching)
        now["caller"], start, before = ctx.path, time.process_time(), resident_mb()
        try:
            return analyze(self, ctx, reaching)
        finally:
            now["caller"] = ""
            cost = costs.setdefault(now["file"], Cost())
            cost.callers.append((ctx.path, time.process_time() - start, resident_mb() - before))

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if resident_mb() > options.limit_mb:
                print(
                    f"stopped past {options.limit_mb:.0f} MB: checking {now['file']}, analysing caller {now['caller']}"
                )
                sys.stdout.flush()
                os._exit(3)

    engine.Engine.analyze = analyze_measured  # type: ignore[method-assign]
    threading.Thread(target=watch, daemon=True).start()
    settings = Resolver()
    files = discover([options.corpus], settings, lambda path, why: None)
    checker = Checker(RunOptions(tuple(registry.all_rules())))
    for path in files:
        now["file"] = str(path)
        start, before = time.process_time(), resident_mb()
        checker.check(path, settings.for_path(path))
        cost = costs.setdefault(str(path), Cost())
        cost.seconds, cost.grown_mb = time.process_time() - start, resident_mb() - before
    print(
        f"{options.corpus}: {len(files)} files, {sum(c.seconds for c in costs.values()):.1f} CPU s, {resident_mb():.0f} MB"
    )
    for title in ("seconds", "grown_mb"):
        print(f"\n| file | CPU s | MB grown | callers read (CPU s, MB) |  ← by {title}\n|---|---:|---:|---|")
        for checked, cost in sorted(costs.items(), key=lambda item: -float(getattr(item[1], title)))[: options.top]:
            callers = ", ".join(
                f"{os.path.relpath(p, options.corpus)} ({s:.1f}, {mb:+.0f})" for p, s, mb in cost.callers
            )
            print(
                f"| {os.path.relpath(checked, options.corpus)} | {cost.seconds:.1f} | {cost.grown_mb:+.0f} | {callers} |"
            )


if __name__ == "__main__":
    main()
