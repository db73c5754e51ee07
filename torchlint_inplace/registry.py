"""Finds the rule catalogue: every `Rule` subclass in the `torchlint_inplace.rules` package.

The catalogue lives in the top-level `rules/` folder of the repository and is installed as
`torchlint_inplace.rules` (see `package-dir` in pyproject.toml), so a plain `pip install .`
carries it along with the engine. Two rules with one code are an error, never a silent
overwrite: a finding's code must name exactly one rule.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from types import ModuleType

from .rule import Rule


class DuplicateRuleCode(Exception):
    """Two rule classes claim the same code."""


def collect(package: ModuleType) -> tuple[type[Rule], ...]:
    """The `Rule` subclasses defined in the modules of `package`, sorted by code."""
    found: dict[str, type[Rule]] = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, Rule)
                and value is not Rule
                and value.__module__ == module.__name__
            ):
                if value.code in found:
                    first = found[value.code]
                    raise DuplicateRuleCode(
                        f"rule code {value.code} is used by both {first.__module__}.{first.__qualname__} and {module.__name__}.{value.__qualname__}"
                    )
                found[value.code] = value
    return tuple(found[code] for code in sorted(found))


CATALOGUE = "torchlint_inplace.rules"


@cache
def all_rules() -> tuple[type[Rule], ...]:
    return collect(importlib.import_module(CATALOGUE))


def codes() -> tuple[str, ...]:
    return tuple(rule.code for rule in all_rules())


def find(key: str) -> type[Rule] | None:
    """The rule with this code (any case) or name."""
    return next((rule for rule in all_rules() if key.upper() == rule.code or key == rule.name), None)
