"""SARIF 2.1.0 for GitHub code scanning and other SARIF viewers.

GitHub needs: the rule catalogue with help text in tool.driver.rules, results pointing at
repository-relative URIs under %SRCROOT%, and partialFingerprints so an alert keeps its
identity when unrelated lines above it move.
"""

from __future__ import annotations

import hashlib
import json
import os
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from .. import __version__, registry
from ..diagnostics import NOT_CHECKED_CODE, NOT_CHECKED_NAME, Finding, Severity, Span
from ..rule import Rule
from .base import Report

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
INFORMATION_URI = "https://pypi.org/project/torchlint-inplace/"
SOURCE_ROOT = "%SRCROOT%"
TAGS = ["pytorch", "autograd", "correctness"]

_NOT_CHECKED_SUMMARY = "A file could not be checked: syntax error, not UTF-8, unreadable or too large."
_NOT_CHECKED_WHY = "Nothing in this file was analysed, so hazards in it would go unreported."


def _level(severity: Severity) -> str:
    return "error" if severity is Severity.ERROR else "warning"


def _descriptor(
    code: str, name: str, severity: Severity, summary: str, why: str, fix_doc: str = "", examples: str = ""
) -> dict[str, Any]:
    return {
        "id": code,
        "name": name,
        "shortDescription": {"text": summary},
        "fullDescription": {"text": why},
        "help": {
            "text": "\n\n".join(part for part in (summary, why, fix_doc) if part),
            "markdown": "\n\n".join(part for part in (summary, why, examples, fix_doc) if part),
        },
        "defaultConfiguration": {"level": _level(severity)},
        "properties": {"tags": TAGS},
    }


def _rule_descriptor(rule: type[Rule]) -> dict[str, Any]:
    summary, why, fix_doc = (textwrap.dedent(part).strip() for part in (rule.summary, rule.why, rule.fix_doc))
    bad, good = (textwrap.dedent(part).strip("\n") for part in (rule.bad, rule.good))
    examples = f"Flagged:\n\n```python\n{bad}\n```\n\nFixed:\n\n```python\n{good}\n```"
    return _descriptor(rule.code, rule.name, rule.severity, summary, why, fix_doc, examples)


def _rule_descriptors(findings: list[Finding]) -> list[dict[str, Any]]:
    """TIP000, every rule of the catalogue, and any code a finding carries that neither knows
    (so that every result has a ruleIndex even if the catalogue and the findings disagree)."""
    descriptors = [
        _descriptor(NOT_CHECKED_CODE, NOT_CHECKED_NAME, Severity.ERROR, _NOT_CHECKED_SUMMARY, _NOT_CHECKED_WHY),
        *(_rule_descriptor(rule) for rule in registry.all_rules()),
    ]
    known = {descriptor["id"] for descriptor in descriptors}
    for finding in findings:
        if finding.code not in known:
            known.add(finding.code)
            descriptors.append(_descriptor(finding.code, finding.name, finding.severity, finding.name, finding.name))
    return descriptors


def _physical_location(report: Report, path: str, span: Span) -> dict[str, Any]:
    relative = report.relative_path(path)
    if relative is not None:
        artifact = {"uri": quote(relative), "uriBaseId": SOURCE_ROOT}
    else:
        artifact = {"uri": Path(os.path.abspath(path)).as_uri()}
    cell, start = report.in_cell(path, span.start)
    end = report.in_cell(path, span.end)[1]
    region: dict[str, Any] = {
        "startLine": start.line,
        "startColumn": start.column + 1,
        "endLine": end.line,
        "endColumn": end.column + 1,
    }
    if cell is not None:  # a notebook: the lines are those of this cell
        region["properties"] = {"cell": cell}
    return {"artifactLocation": artifact, "region": region}


def _line_hash(finding: Finding, report: Report) -> str:
    """Hash of what identifies the alert to a reader: rule, file and the flagged line's text.

    Line numbers are left out so that edits above the finding keep the alert's identity; the
    `:N` suffix (as in GitHub's own fingerprints) separates identical lines in one file.
    """
    line_text = (report.source_line(finding.path, finding.line) or "").strip()
    key = "\0".join((finding.code, report.display_path(finding.path), line_text))
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _result(finding: Finding, report: Report, rule_index: int, fingerprint: str) -> dict[str, Any]:
    return {
        "ruleId": finding.code,
        "ruleIndex": rule_index,
        "level": _level(finding.severity),
        "message": {"text": finding.message},
        "locations": [{"physicalLocation": _physical_location(report, finding.path, finding.span)}],
        "relatedLocations": [
            {
                "id": index,
                "physicalLocation": _physical_location(report, related.path, related.span),
                "message": {"text": related.message},
            }
            for index, related in enumerate(finding.related, start=1)
        ],
        "partialFingerprints": {"primaryLocationLineHash": fingerprint},
        "properties": {
            "consequence": finding.consequence,
            "help": finding.help,
            **({"conditions": finding.conditions} if finding.conditions else {}),
            **({"confirmation": finding.confirmation} if finding.confirmation is not None else {}),
        },
    }


def document(report: Report) -> dict[str, Any]:
    findings = list(report.findings)
    rules = _rule_descriptors(findings)
    rule_index = {descriptor["id"]: index for index, descriptor in enumerate(rules)}
    occurrences: Counter[str] = Counter()
    results = []
    for finding in findings:
        line_hash = _line_hash(finding, report)
        occurrences[line_hash] += 1
        results.append(_result(finding, report, rule_index[finding.code], f"{line_hash}:{occurrences[line_hash]}"))
    driver = {
        "name": "torchlint-inplace",
        "informationUri": INFORMATION_URI,
        "version": __version__,
        "semanticVersion": __version__,
        "rules": rules,
    }
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": driver},
                "originalUriBaseIds": {SOURCE_ROOT: {"uri": Path(os.path.abspath(report.root)).as_uri() + "/"}},
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }


def write(report: Report, stream: TextIO, color: bool) -> None:
    json.dump(document(report), stream, indent=2)
    stream.write("\n")
