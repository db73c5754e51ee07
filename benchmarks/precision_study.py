"""Precision study: how many findings the linter makes on real code nobody here wrote, per rule
and per thousand lines, with every finding written out so that each one can be read and judged.

    python benchmarks/precision_study.py [CORPUS ...] [--findings FILE] [--no-preview] [--jobs N]

A corpus is a directory (default: the installed torch package's sources). Each corpus is one
run with its own project, as a user would lint it, so calls resolve within that corpus only.
Default-on findings are those of a plain run; preview findings are those only `--preview` adds
(a second run with preview on). Lines are physical lines of the checked files, as `wc -l`
counts them. The findings file holds one `path:line:column: CODE [default|preview] message`
per finding, grouped by corpus, for reading; docs/precision.md records the verdicts.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from torchlint_inplace import api, config, discovery
from torchlint_inplace.diagnostics import NOT_CHECKED_CODE, Finding


@dataclass(frozen=True)
class CorpusResult:
    root: Path
    files: int
    lines: int
    seconds: float
    default: tuple[Finding, ...]
    preview_only: tuple[Finding, ...]


def torch_sources() -> Path:
    """The installed torch package's directory, found without importing torch (it is slow)."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        raise SystemExit("torch is not installed: name a corpus directory")
    return Path(spec.origin).parent


def _settings(root: Path, preview: bool) -> config.Settings:
    """The defaults a user gets with no config file, rooted at the corpus so that the default
    excludes (`site-packages`, `build`, ...) apply to paths inside it, not to where it lives."""
    return config.resolve(config.Overrides(isolated=True, preview=preview), cwd=root)


def _findings(files: Sequence[Path], settings: config.Settings, jobs: int) -> list[Finding]:
    """Uncached, so that every run measures the analysis as it is now."""
    return [finding for result in api.lint_paths(files, settings, jobs=jobs).files for finding in result.findings]


def _line_count(path: Path) -> int:
    with path.open("rb") as file:
        return sum(1 for _ in file)


def study(root: Path, preview: bool, jobs: int = 1) -> CorpusResult:
    root = Path(os.path.abspath(root))
    default_settings = _settings(root, preview=False)
    files = discovery.discover([root], default_settings)
    start = time.perf_counter()
    default = _findings(files, default_settings, jobs)
    preview_only: list[Finding] = []
    if preview:
        seen = set(default)
        preview_only = [
            finding for finding in _findings(files, _settings(root, preview=True), jobs) if finding not in seen
        ]
    seconds = time.perf_counter() - start
    return CorpusResult(root, len(files), sum(map(_line_count, files)), seconds, tuple(default), tuple(preview_only))


def _per_rule(findings: Sequence[Finding]) -> Counter[str]:
    return Counter(finding.code for finding in findings)


def summary(result: CorpusResult) -> str:
    kloc = result.lines / 1000 or 1
    lines = [
        f"== {result.root}",
        f"files {result.files}, lines {result.lines}, {result.seconds:.1f}s",
        f"default-on findings: {len(result.default)} ({len(result.default) / kloc:.3f} per 1,000 lines)",
    ]
    for code, count in sorted(_per_rule(result.default).items()):
        lines.append(f"  {code}: {count} ({count / kloc:.3f} per 1,000 lines)")
    lines.append(f"preview-only findings: {len(result.preview_only)}")
    for code, count in sorted(_per_rule(result.preview_only).items()):
        lines.append(f"  {code}: {count}")
    return "\n".join(lines)


def finding_lines(result: CorpusResult) -> list[str]:
    tagged = [(finding, "default") for finding in result.default] + [
        (finding, "preview") for finding in result.preview_only
    ]
    tagged.sort(key=lambda item: (item[1], item[0].sort_key()))
    return [
        f"{finding.path}:{finding.line}:{finding.span.start.column + 1}: {finding.code} [{tag}] {finding.message}"
        + (f" -- {finding.consequence}" if finding.code != NOT_CHECKED_CODE else "")
        for finding, tag in tagged
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "corpora", nargs="*", type=Path, help="directories to check (default: the installed torch package)"
    )
    parser.add_argument(
        "--findings", type=Path, default=Path("precision_findings.txt"), help="where every finding is written"
    )
    parser.add_argument("--no-preview", dest="preview", action="store_false", help="skip the second, preview run")
    parser.add_argument("--jobs", type=int, default=1, help="files checked in parallel")
    args = parser.parse_args(argv)
    corpora = args.corpora or [torch_sources()]
    written: list[str] = []
    for corpus in corpora:
        result = study(corpus, args.preview, args.jobs)
        print(summary(result), flush=True)
        written += [f"== {result.root}", *finding_lines(result)]
    args.findings.write_text("\n".join(written) + "\n", encoding="utf-8")
    print(f"findings written to {args.findings}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
