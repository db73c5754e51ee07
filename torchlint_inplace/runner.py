"""Checks one file: decode, parse once, analyse once, run every selected rule."""

from __future__ import annotations

import libcst as cst

from .analysis import analyze
from .diagnostics import Finding, not_checked
from .registry import all_rules


def check_source(path: str, text: str, select: frozenset[str] | None = None) -> list[Finding]:
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as error:
        return [not_checked(path, f"syntax error: {error.message}", error.raw_line, error.raw_column)]
    analysis = analyze(module, path)
    findings: list[Finding] = []
    for rule in all_rules():
        if select is None or rule.code in select:
            findings.extend(rule().check(analysis))
    return sorted(findings, key=Finding.sort_key)
