"""Recall on the real-world re-makes: how many of the reported bugs the default rules find.

    python scripts/recall.py [--batch NAME] [--cases] [--json FILE]

A case is one re-made public report: a file in `fixtures/realworld/`, or a folder there holding
a project (a package, or scripts beside their modules under a `pyproject.toml`). Its bugs are
its `# expect:` lines. A case is *found* when a default finding (a plain run of the CLI over the
case, as a user would lint it: `--isolated`, no preview, no cache) lands on one of those lines —
the culprit line, whatever the code. Its label is what its drivers do when run under torch, as
the test suite runs them: hazard lines run by a `raises_*` driver make it a raising case, by a
`silent_*` driver a silent one (a case with both counts in both). `--batch NAME` keeps only the
cases with a `Batch: NAME` line in one of their files (the batches re-made to measure recall).

Known misses (`# known-miss:`) and false positives are not read: the number is what the linter
reports, not what the fixtures say about it. Needs torch (the labels come from running).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REALWORLD = ROOT / "fixtures" / "realworld"
sys.path.insert(0, str(ROOT / "tests"))

from test_fixtures import (  # noqa: E402  (the suite's own fixture harness: one definition of a label)
    FIXTURES,
    _kind,
    drivers,
    expected_findings,
    fixture_units,
    lines_executed,
    load_fixture,
    run_driver,
)

BATCH_LINE = re.compile(r"^\s*Batch:\s*(?P<name>\S+)", re.MULTILINE)


@dataclass
class Case:
    name: str
    kinds: list[str]  # "raises" / "silent": what the drivers that run its hazard lines do
    bugs: list[str]  # `path:line` of each `# expect:` line
    found: list[str]  # those a default finding landed on
    batch: str | None

    @property
    def is_found(self) -> bool:
        return bool(self.found)


def _lint(unit: list[Path]) -> set[tuple[str, int]]:
    """(file, line) of every default finding of a plain CLI run over the case."""
    command = [
        sys.executable,
        "-m",
        "torchlint_inplace",
        "--isolated",
        "--no-cache",
        "--format",
        "json",
        *map(str, unit),
    ]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
    if result.returncode not in (0, 1):
        raise SystemExit(f"torchlint-inplace failed on {unit[0]}: {result.stderr.strip()}")
    report = json.loads(result.stdout)
    return {(str((ROOT / finding["filename"]).resolve()), finding["location"]["row"]) for finding in report["findings"]}


def _labels(torch, unit: list[Path], hazards: set[tuple[str, int]]) -> list[str]:
    kinds = set()
    for path in unit:
        module = load_fixture(path)
        for driver in drivers(path):
            kind = _kind(driver)
            if kind == "safe":
                continue
            with lines_executed(unit) as executed:
                run_driver(torch, getattr(module, driver), kind)
            if any(line in executed[file] for file, line in hazards):
                kinds.add(kind)
    return sorted(kinds)


def collect(batch: str | None) -> list[Case]:
    import torch

    cases = []
    for unit in fixture_units():
        if REALWORLD not in unit[0].parents:
            continue
        texts = {path: path.read_text(encoding="utf-8") for path in unit}
        names = {match["name"] for text in texts.values() for match in BATCH_LINE.finditer(text)}
        case_batch = min(names) if names else None
        if batch is not None and case_batch != batch:
            continue
        hazards = {(str(path.resolve()), line) for path, text in texts.items() for line, _ in expected_findings(text)}
        if not hazards:
            continue
        reported = _lint(unit)
        relative = unit[0].parent if len(unit) > 1 else unit[0]
        while relative.parent != REALWORLD and REALWORLD in relative.parents:
            relative = relative.parent
        show = lambda key: f"{Path(key[0]).relative_to(FIXTURES)}:{key[1]}"  # noqa: E731
        cases.append(
            Case(
                name=relative.relative_to(REALWORLD).as_posix(),
                kinds=_labels(torch, unit, hazards),
                bugs=sorted(map(show, hazards)),
                found=sorted(map(show, hazards & reported)),
                batch=case_batch,
            )
        )
    return cases


def summary(cases: list[Case]) -> dict[str, dict[str, int]]:
    table = {}
    for kind in ("raises", "silent"):
        of_kind = [case for case in cases if kind in case.kinds]
        table[kind] = {"found": sum(case.is_found for case in of_kind), "total": len(of_kind)}
    table["lines"] = {"found": sum(len(case.found) for case in cases), "total": sum(len(case.bugs) for case in cases)}
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", help="only the cases marked `Batch: NAME`")
    parser.add_argument("--cases", action="store_true", help="list every case with its verdict")
    parser.add_argument("--json", type=Path, help="also write the cases and totals as JSON here")
    options = parser.parse_args()
    cases = collect(options.batch)
    if options.cases:
        for case in cases:
            verdict = "found" if case.is_found else "MISSED"
            print(
                f"{verdict:7} {'+'.join(case.kinds) or 'unlabelled':14} {case.name}  ({len(case.found)}/{len(case.bugs)} lines)"
            )
    table = summary(cases)
    scope = f"batch {options.batch}" if options.batch else "fixtures/realworld"
    print(
        f"{scope}: {len(cases)} cases; raises found {table['raises']['found']}/{table['raises']['total']}, "
        f"silent found {table['silent']['found']}/{table['silent']['total']}; "
        f"culprit lines {table['lines']['found']}/{table['lines']['total']}"
    )
    if options.json is not None:
        options.json.write_text(
            json.dumps({"cases": [asdict(case) for case in cases], "totals": table}, indent=2) + "\n", encoding="utf-8"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
