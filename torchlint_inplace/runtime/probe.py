"""The child side of `--confirm`: import one file, drive the classes around its findings, report.

Runs in a process forked by `forkserver.py` for one file and one device (user code executes only
there). The drivers of a finding's line are the `nn.Module` / `autograd.Function` class that
contains it and, when that does not prove it, the classes that use it — the caller whose tensor
a TIP005/TIP007 callee mutates is where the hazard shows — in the same file or the same
package. Each driver is built (`inputs.py`), run forward + backward under the culprit tracer
while the file's executed lines are recorded, and, for a finding whose line ran clean, run
again with the finding's fix applied — the fixer's own edit, imported as a second copy of the
file (`fixed.py`), or where the finding has no fix a run-time stand-in (`variants.py`) — to see
whether outputs or gradients change; the status says which of the two it compared with.

This module is the orchestration: which drivers run, in what order, and what their runs prove.
Finding the drivers is `drivers.py`'s, building, feeding and calling one is `harness.py`'s,
recording the lines a run covers is `coverage.py`'s; the statuses and their order are in
`statuses.py`, what the server asks in `request.py`.

Statuses are reported as they become known (one JSON object per driver on the result stream),
so a crash in a later driver keeps what earlier ones proved.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
from collections.abc import Callable
from types import ModuleType
from typing import TypeGuard

import torch
from torch import nn

from . import inputs
from .construction import recording_builds
from .coverage import Outcome, observed
from .drivers import Driver, callers, class_spans, import_file, owners
from .fixed import fixed_copy, standing_in
from .harness import Drivable, Entry, Harness, call_entry
from .inputs import Args, Kwargs, Layout, NotRun
from .request import Request
from .statuses import CHANGES, rank, stronger
from .variants import VARIANTS, results_differ, variant_applied

# Input magnitudes the fix comparison tries: a silent hazard can hide at small values (a clamp
# that clips nothing), so larger inputs get a second chance.
INPUT_SCALES = (1.0, 8.0)
# Allocation failures, by their message (torch's allocators raise RuntimeError, not MemoryError).
OUT_OF_MEMORY = re.compile(r"can't allocate memory|out of memory", re.IGNORECASE)


# ---------------------------------------------------------------- one driver


def drive(
    driver: Drivable, module: ModuleType, request: Request, outcome: Outcome, arguments: tuple[Args, Kwargs]
) -> None:
    """Build, feed and run one driver; raises NotRun with the reason when it cannot be done."""
    harness = Harness(driver, module, request, arguments)
    built: list[object] = []
    call = inputs.call_text(driver, harness.args, harness.kwargs)
    try:
        if observed(lambda: built.append(harness.build()), outcome):
            raise NotRun(f"{call} raised an in-place error while being built")
    except NotRun:
        raise
    except Exception as error:
        raise NotRun(f"{call} raised {_describe(error, request.memory_bytes)}") from error
    entries = harness.entries(built[0], sorted(request.codes))
    if not entries:
        raise NotRun(f"{driver.__name__} has no forward() and no public method holding a finding")
    for entry in entries:
        with recording_builds():  # a TIP004 finding is at the line that built the module
            layout = _run_entry(harness, entry, outcome)
            _compare_fixes(harness, entry, layout, outcome, request)


def _run_entry(harness: Harness, entry: Entry, outcome: Outcome) -> Layout | None:
    errors = []
    where = f"{harness.driver.__name__}.{entry.name}" if isinstance(harness.driver, type) else f"{entry.name}()"
    for layout in harness.layouts(entry):
        try:
            instance = harness.build()
            values, _ = harness.inputs(layout)
            torch.manual_seed(2)
            observed(functools.partial(call_entry, instance, entry.name, values), outcome)
            return layout
        except Exception as error:  # inputs that do not fit: try the next layout
            if _out_of_memory(error):  # other small inputs would only run out again
                raise NotRun(f"{where} raised {_describe(error, harness.request.memory_bytes)}") from error
            errors.append(_describe(error))
    raise NotRun(f"no synthetic input worked for {where} ({errors[0] if errors else 'no candidates'})")


# A finding's line, what its run is compared with (for the status), and that run at a scale.
Alternative = tuple[int, str, Callable[[float], "list[torch.Tensor | None] | None"]]


def _compare_fixes(harness: Harness, entry: Entry, layout: Layout | None, outcome: Outcome, request: Request) -> None:
    """For each finding whose line ran clean: do the results change once its fix is applied?"""
    alternatives = [
        alternative
        for line, codes in sorted(request.codes.items())
        if line in outcome.executed and line not in outcome.raised_at and line not in outcome.changed
        for code in codes
        if (alternative := _alternative(harness, entry, layout, request, outcome.file, line, code)) is not None
    ]
    for scale in INPUT_SCALES if alternatives else ():
        try:
            reference = harness.run(entry, layout, scale)
        except Exception:
            return
        for line, how, run in alternatives:
            if line in outcome.changed:
                continue
            try:
                fixed = run(scale)
            except Exception:
                continue
            if fixed is not None and results_differ(reference, fixed):
                outcome.changed[line] = f"{CHANGES} ({how})"


def _alternative(
    harness: Harness, entry: Entry, layout: Layout | None, request: Request, file: str, line: int, code: str
) -> Alternative | None:
    """How to run the driver with the fix of `code` at `line`: the finding's own fix applied to
    a copy of the file, else the code's run-time stand-in; None when there is neither."""
    fix = request.fixes.get(line, {}).get(code)
    if fix is not None:
        try:
            copy = fixed_copy(harness.module, fix)
            twin = harness.twin(copy) if copy is not None else None
        except Exception:  # the fixed file's own code raised on import: nothing to compare with
            return None
        if copy is None or twin is None:
            return None

        def with_fix(scale: float) -> list[torch.Tensor | None]:
            weights = harness.weights()
            with standing_in(harness.module, copy):
                return twin.run(entry, layout, scale, weights)

        return line, f"against its fix: {fix.description}", with_fix
    if code not in VARIANTS:
        return None

    def with_variant(scale: float) -> list[torch.Tensor | None] | None:
        with variant_applied(code, harness.module, file, line) as applied:
            return harness.run(entry, layout, scale) if applied else None

    return line, f"no fix to apply; against a {VARIANTS[code]}", with_variant


def _out_of_memory(error: BaseException) -> bool:
    return isinstance(error, MemoryError) or (
        isinstance(error, RuntimeError) and bool(OUT_OF_MEMORY.search(str(error)))
    )


def _describe(error: BaseException, memory_bytes: int | None = None) -> str:
    """The error's type and first line; for running out of memory, the limit that was hit."""
    text = str(error).strip().splitlines()
    described = f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
    if memory_bytes is not None and _out_of_memory(error):
        described += f" (memory limit {memory_bytes / 1024**3:g} GiB)"
    return described


# ---------------------------------------------------------------- the whole file


def probe(request: Request, emit: Callable[[dict[int, str]], None]) -> None:
    """Emits `{line: status}` updates; lines never mentioned are reported by the supervisor."""
    lines = sorted(request.codes)
    file = str(request.file)
    if request.device.startswith("cuda") and not torch.cuda.is_available():
        emit(dict.fromkeys(lines, "not run: CUDA is not available"))
        return
    try:
        module = import_file(request.file)
    except BaseException as error:  # SystemExit and KeyboardInterrupt from module code included
        emit(dict.fromkeys(lines, f"not run: importing the file raised {_describe(error, request.memory_bytes)}"))
        return
    tree = ast.parse(request.file.read_text(encoding="utf-8"))
    spans = {node.name: range(node.lineno, (node.end_lineno or node.lineno) + 1) for node in class_spans(tree)}
    best: dict[int, str] = {}
    reasons: dict[int, str] = {}

    def unproven(among: list[int]) -> list[int]:
        return [line for line in among if rank(best.get(line, "")) < rank(CHANGES)]

    def run(driver: Driver, speaks_for: list[int]) -> None:
        try:
            target = driver.load()
            if not _drivable(target):
                raise NotRun(f"{driver.name} is not an nn.Module, autograd.Function or function")
            variants = (
                inputs.constructor_variants(target, request.specs.get(driver.name))
                if _is_module(target)
                else [((), {})]
            )
        except NotRun as reason:
            reasons.update({line: f"not run: {reason}" for line in driver.owned})
            return
        except BaseException as error:  # sys.exit() and friends in a module the driver imports
            reasons.update({line: f"not run: loading {driver.name} raised {_describe(error)}" for line in driver.owned})
            return
        for number, arguments in enumerate(variants):
            if number and not unproven(speaks_for):
                break
            outcome = Outcome(file, speaks_for, spans, driver.name)
            failed = True
            try:
                drive(target, module, request, outcome, arguments)
                failed = False
            except NotRun as reason:
                reasons.update({line: f"not run: {reason}" for line in driver.owned if number == 0})
            except BaseException as error:  # sys.exit() and friends inside the user's forward
                reasons.update(
                    {
                        line: f"not run: {driver.name} raised {_describe(error, request.memory_bytes)}"
                        for line in driver.owned
                        if number == 0
                    }
                )
            update = {}
            for line in speaks_for:
                status = outcome.status(line, owned=line in driver.owned and not failed)
                if status is not None and stronger(best.get(line), status) != best.get(line):
                    best[line] = update[line] = status
            if update:
                emit(update)

    for driver in owners(tree, module, lines):
        run(driver, driver.owned)
    if remaining := unproven(lines):
        for driver in callers(request.file, tree, module, remaining):
            run(driver, remaining)
    leftover = {
        line: reasons.get(line, "not run: no nn.Module, autograd.Function or function holds or uses this line")
        for line in lines
        if line not in best
    }
    if leftover:
        emit(leftover)


def _is_module(target: object) -> TypeGuard[type[nn.Module]]:
    return isinstance(target, type) and issubclass(target, nn.Module)


def _drivable(target: object) -> TypeGuard[Drivable]:
    return (
        _is_module(target)
        or (isinstance(target, type) and issubclass(target, torch.autograd.Function))
        or inspect.isfunction(target)
    )
