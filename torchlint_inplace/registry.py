"""Finds the rule catalogue: every `Rule` subclass in the `torchlint_inplace.rules` package.

The catalogue lives in the top-level `rules/` folder of the repository and is installed as
`torchlint_inplace.rules` (see `package-dir` in pyproject.toml), so a plain `pip install .`
carries it along with the engine.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from .rule import Rule


@cache
def all_rules() -> tuple[type[Rule], ...]:
    from . import rules as package

    found: dict[str, type[Rule]] = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Rule) and value is not Rule and value.__module__ == module.__name__:
                found[value.code] = value
    return tuple(found[code] for code in sorted(found))


def rule_by_code(code: str) -> type[Rule] | None:
    return next((rule for rule in all_rules() if rule.code == code), None)
