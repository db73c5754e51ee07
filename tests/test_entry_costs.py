"""benchmarks/entry_costs.py: the engine methods it times still exist, and its rows count the
entries that found something (fixtures/tip007 has findings in functions and in forwards)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_entry_costs_counts_the_entries_that_find_something() -> None:
    script = REPO / "benchmarks" / "entry_costs.py"
    done = subprocess.run(
        [sys.executable, str(script), str(REPO / "fixtures" / "tip007")], capture_output=True, text=True, check=True
    )
    rows = {
        (cells[1], cells[2]): (int(cells[3]), int(cells[5]))
        for line in done.stdout.splitlines()
        if line.startswith("| ") and not line.startswith("| entry kind")
        for cells in [[cell.strip() for cell in line.split("|")]]
    }
    entries, found = rows[("module-level function", "the checked file")]
    assert entries >= found > 0
    entries, found = rows[("forward entry (instance built on its defaults)", "the checked file")]
    assert entries >= found > 0
