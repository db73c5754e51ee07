"""How often the culprit tracer names the culprit: every fixture driver run under `trace()`.

    python scripts/trace_recall.py [--realworld] [--cases] [--fail-fast]

A `raises_*` driver is *named* when the tracer's error (at backward, or autograd's refusal at
the write) puts the mutation at one of the fixture's `# expect:` lines — the write's call line or
the line that built the in-place module that ran it — and no internal frame (torch's, this
package's, runpy's, click's) appears in the explanation. A `silent_*` driver is *reported* when a
silent report's write is at an `# expect:` line. A `safe_*` driver must run clean, with no report
off the `# expect:` lines (a safe driver may run a hazard's function for its look-alike).
`--realworld` keeps the fixtures under fixtures/realworld/ (the re-made public reports);
`--cases` lists every driver's outcome. Exits 1 when a raising driver is not named; safe drivers
reported off their `# expect:` lines are counted (tests/test_runtime_tracer.py holds each one,
with its known gaps). Needs torch.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import torch  # noqa: E402
from test_fixtures import DRIVER_CASES, FIXTURES, _kind, load_fixture  # noqa: E402
from test_runtime_tracer import _expected_writes  # noqa: E402

import torchlint_inplace  # noqa: E402
from torchlint_inplace.runtime import InplaceCulpritError, InplaceRefusalError, trace  # noqa: E402

INTERNAL = (os.path.dirname(torch.__file__), os.path.dirname(torchlint_inplace.__file__), "runpy", "click")


def outcome(path: Path, name: str, fail_fast: bool) -> str:
    expected = set(_expected_writes(path))
    torch.manual_seed(0)
    tracer = trace(fail_fast=fail_fast)
    try:
        with tracer:
            getattr(load_fixture(path), name)()
    except InplaceCulpritError as error:
        sites = {
            (site.file, site.line)
            for write in error.writes
            for site in (write.site, write.built and write.built.site)
            if site
        }
        return _named(sites & expected, str(error), "at backward" if not error.at_write else "at the write (fail-fast)")
    except InplaceRefusalError as error:
        sites = {(site.file, site.line) for site in (error.culprit, error.built and error.built.site) if site}
        return _named(sites & expected, str(error), "refused at the write")
    except Exception as error:  # noqa: BLE001 (a driver's own failure is an outcome here)
        return f"error: {type(error).__name__}: {str(error).splitlines()[0][:80] if str(error) else ''}"
    named = [
        {(site.file, site.line) for site in (report.write, report.built and report.built.site) if site} & expected
        for report in tracer.reports
    ]
    if _kind(name) == "silent":
        return "reported" if any(named) else "not reported"
    return "reported (false)" if not all(named) else "clean"


def _named(hits: set, message: str, when: str) -> str:
    if not hits:
        return f"wrong line ({when})"
    if any(marker in message for marker in INTERNAL):
        return f"internal frames shown ({when})"
    return f"named {when}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--realworld", action="store_true", help="only fixtures/realworld/")
    parser.add_argument("--cases", action="store_true", help="list every driver's outcome")
    parser.add_argument("--fail-fast", action="store_true", help="trace the raising drivers in fail-fast mode")
    options = parser.parse_args()
    cases = [
        (path, name)
        for path, name in DRIVER_CASES
        if not options.realworld or path.is_relative_to(FIXTURES / "realworld")
    ]
    totals: dict[str, Counter[str]] = {kind: Counter() for kind in ("raises", "silent", "safe")}
    for path, name in cases:
        kind = _kind(name)
        result = outcome(path, name, options.fail_fast and kind == "raises")
        totals[kind][result] += 1
        if options.cases:
            print(f"{result:34} {path.relative_to(FIXTURES).as_posix()}::{name}")
    raises, silent, safe = totals["raises"], totals["silent"], totals["safe"]
    named = sum(count for result, count in raises.items() if result.startswith("named"))
    print(
        f"raising drivers: {named}/{sum(raises.values())} named ({', '.join(f'{count} {result}' for result, count in sorted(raises.items()))})"
    )
    print(f"silent drivers: {silent['reported']}/{sum(silent.values())} reported at the culprit line")
    print(f"safe drivers: {safe['clean']}/{sum(safe.values())} clean, no report off an expected line")
    # Safe drivers the tracer reports are held one by one, with their known gaps, by
    # tests/test_runtime_tracer.py (`TRACER_GAPS`): here they are counted, not failed on.
    return 0 if named == sum(raises.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
