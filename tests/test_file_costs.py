"""benchmarks/file_costs.py: each file's row names the caller files its analysis read (in
fixtures/tip007, layers.py writes what model.py passes it), and the watchdog stops a run past
its memory limit, naming the file being checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "file_costs.py"
CORPUS = REPO / "fixtures" / "tip007"


def test_rows_name_the_caller_files_read() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(CORPUS), "--top", "100"], capture_output=True, text=True, check=True
    )
    rows = {
        cells[1]: cells[4]
        for line in done.stdout.splitlines()
        if line.startswith("| ") and not line.startswith("| file")
        for cells in [[cell.strip() for cell in line.split("|")]]
    }
    assert "project/model.py" in rows["project/layers.py"]
    assert rows["project/model.py"] == ""


def test_the_watchdog_stops_a_run_past_its_limit() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(CORPUS), "--limit-mb", "1"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 3
    assert done.stdout.startswith("stopped past 1 MB: checking ")
