"""The shared analysis: one pass per file that every rule reads.

The file is indexed once (imports, classes, functions, module-level names); its entry points
(top-level code, the `forward` of classes nobody in the file builds, functions nothing calls)
are run through the abstract interpreter, which follows calls into the file's classes and
functions and into other project files, and reports every in-place write it can explain. When
a write in the file depends on what callers pass (a function writing its argument, a factory
building an in-place module), the files that import it are read as callers too, and theirs
where the callers only hand the question on (a transform module in one file wrapping the checked
file's helper, the script that reads its input again in another).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from pathlib import Path

import libcst as cst

from ..layout import package_root
from ..recursion import deep_recursion
from .engine import Engine
from .model import FileAnalysis, Form, Mutation
from .project import MAX_CALLER_FILES, FileContext, Project, key_of


def analyze(module: cst.Module, path: str, project: Project | None = None, preview: bool = False) -> FileAnalysis:
    project = project or Project()
    ctx = project.context(path, module)
    project.dependencies, project.scanned_roots = set(), set()
    engine = Engine(project)
    # The interpreter recurses once per link of an expression chain (`x + x + ...`, `x.a.b...`).
    with deep_recursion():
        found = engine.analyze(ctx)
        registries = project.registries_of(ctx)
        through = engine.steps_unknown(ctx)
        if registries or through or engine.needs_callers(ctx):
            found.extend(_from_callers(project, ctx, engine.writes_arguments(ctx), registries, through))
    mutations = _one_per_write(mutation for mutation in found if key_of(mutation.path) == key_of(path))
    dependencies = frozenset(project.dependencies - {key_of(path)})
    return FileAnalysis(path, module, mutations, preview, dependencies, frozenset(project.scanned_roots))


# How many files away from the checked one its callers are read: a helper written in place
# (`functional.py`), the transform module calling it (`transforms.py`), the script that reads the
# tensor again. Each level reads at most MAX_CALLER_FILES callers, nearest first, those reached
# through a package's `__init__.py` included: timm's layers are imported through
# `timm/layers/__init__.py` by every model file, and reading four of them for every layer file
# cost timm 45%.
CALLER_LEVELS = 2


def _from_callers(
    project: Project, ctx: FileContext, writes_arguments: bool, registries: list[FileContext], through: bool
) -> list[Mutation]:
    """What the checked file's callers prove about it. Where it writes its arguments, whose
    owner may be further up: a caller whose own runs with it write their arguments or use ones
    nobody passed (a model built elsewhere) passes the question on to its importers, and a
    package's `__init__.py` that imports it is read through
    (its importers are callers of the same level: `import torchaudio` reaches
    `torchaudio/transforms.py`). Other questions (an in-place module built here, an argument
    used as an object) are answered by the nearest callers: following them further cost timm
    85% for nothing found. Classes the file registers (`@NECKS.register_module()`) are built
    by the callers of the registry's file, through the packages exporting its builders
    (`from mmdet.models import build_neck`). `through`: packages are read through on other
    questions too (a trainer stepping the optimizer its script gives it, `import config`)."""
    checked = key_of(ctx.path)
    found: list[Mutation] = []
    seen = {checked} | {key_of(registry.path) for registry in registries}
    frontier = deque([ctx, *registries])
    through_packages = writes_arguments or bool(registries) or through
    for _ in range(CALLER_LEVELS if writes_arguments else 1):
        passing: list[FileContext] = []
        read = 0  # callers of this level, at most MAX_CALLER_FILES with those through packages
        while frontier and read < MAX_CALLER_FILES:
            callee = frontier.popleft()
            # an `__init__.py` read through: inside its package, only files binding the module
            through = callee is not ctx and Path(callee.path).name == "__init__.py"
            for caller, names in project.importers(callee, package_root(callee.path) if through else None):
                if key_of(caller.path) in seen or read == MAX_CALLER_FILES:
                    continue
                seen.add(key_of(caller.path))
                engine = Engine(project)
                found.extend(engine.analyze(caller, names))
                if Path(caller.path).name != "__init__.py":
                    read += 1
                if Path(caller.path).name == "__init__.py" and through_packages:
                    frontier.append(caller)  # after the importers of this file: nearest first
                elif writes_arguments and engine.hands_on(caller, through=checked):
                    passing.append(caller)
        frontier = deque(passing)
    return found


def _one_per_write(mutations: Iterable[Mutation]) -> list[Mutation]:
    """One finding per write: a proven one over one only suspected, an unconditional one over a
    conditional one, an error over silent damage, else the first met."""
    chosen: dict[tuple[int, Form], Mutation] = {}
    for mutation in mutations:
        key = (id(mutation.node), mutation.form)
        known = chosen.get(key)
        if known is None or _rank(mutation) < _rank(known):
            chosen[key] = mutation
    return list(chosen.values())


def _rank(mutation: Mutation) -> tuple[bool, bool, bool, int]:
    return (not mutation.certain, mutation.conditional, mutation.silent, len(mutation.condition))


__all__ = ["FileAnalysis", "FileContext", "Form", "Mutation", "Project", "analyze"]
