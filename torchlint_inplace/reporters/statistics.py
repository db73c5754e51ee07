"""`--statistics`: one row per rule instead of the findings, as `ruff --statistics` prints them.

`[*]` marks a rule all of whose findings have a safe fix, `[~]` one some of whose do, `[ ]` one
none of whose do; the text ends with the run's total and what the fixes can do (the summary
line's words). The JSON rows carry the counts instead of the markers.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import TextIO

from ..diagnostics import Applicability
from .base import Report
from .text import fixability, found


def write(report: Report, stream: TextIO, machine: bool, quiet: bool) -> None:
    findings = report.findings
    counts = Counter(finding.code for finding in findings)
    names = {finding.code: finding.name for finding in findings}
    safe = Counter(f.code for f in findings if f.fix is not None and f.fix.applicability is Applicability.SAFE)
    unsafe = Counter(f.code for f in findings if f.fix is not None and f.fix.applicability is Applicability.UNSAFE)
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    if machine:
        data = [
            {
                "code": code,
                "name": names[code],
                "count": count,
                "fixable": safe[code] > 0,
                "fixable_count": safe[code],
                "unsafe_fixable_count": unsafe[code],
            }
            for code, count in rows
        ]
        stream.write(json.dumps(data, indent=2) + "\n")
        return
    count_width = max((len(str(count)) for _, count in rows), default=1)
    code_width = max((len(code) for code, _ in rows), default=1)
    for code, count in rows:
        marker = "[*]" if safe[code] == count else "[~]" if safe[code] else "[ ]"
        stream.write(f"{count:>{count_width}}\t{code:<{code_width}}\t{marker} {names[code]}\n")
    if rows and not quiet:
        fixes = fixability(findings)
        stream.write(f"{found(findings)}." + (f" {fixes}." if fixes else "") + "\n")
