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

Statuses are reported as they become known (one JSON object per driver on the result stream),
so a crash in a later driver keeps what earlier ones proved.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import inspect
import os
import re
import signal
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, FunctionType, ModuleType
from typing import TYPE_CHECKING, Any, TypeGuard

import torch
from torch import nn

from ..diagnostics import Fix
from ..layout import package_root
from . import inputs
from .construction import recording_builds
from .fixed import fixed_copy, standing_in
from .inputs import Args, Kwargs, Layout, NotRun, Spec
from .report import InplaceCulpritError
from .tracer import trace
from .variants import VARIANTS, flat_tensors, results_differ, tensors, variant_applied

if TYPE_CHECKING:
    from _typeshed import TraceFunction

CONFIRMED, CHANGES, BENIGN, NOT_REACHED = "confirmed: raises", "confirmed: changes results", "benign", "not reached"
# When several drivers (or devices) speak for one line, the strongest evidence wins.
RANK = {CONFIRMED: 4, CHANGES: 3, BENIGN: 2, NOT_REACHED: 1}
# Autograd's refusals of an in-place write on the spot (a leaf, a view of one, a multi-output
# view) and a custom Function's broken contract: raised where the write happens.
REFUSED_WRITE = re.compile(
    r"in-place operation|is a view and is being modified inplace|modified by an inplace operation|marked as dirty"
)
OUTPUT_OF_FUNCTION = re.compile(r"Output \d+ of (\w+) is a view")
MAX_CALLERS = 8
# Input magnitudes the fix comparison tries: a silent hazard can hide at small values (a clamp
# that clips nothing), so larger inputs get a second chance.
INPUT_SCALES = (1.0, 8.0)
# How long one candidate shape may run on `meta`: allocating costs nothing there, so a forward
# that allocates until memory runs out never ends; the real device (and its limit) then decides.
META_TRIAL_S = 3.0
# Allocation failures, by their message (torch's allocators raise RuntimeError, not MemoryError).
OUT_OF_MEMORY = re.compile(r"can't allocate memory|out of memory", re.IGNORECASE)


def rank(status: str) -> int:
    """How strong the evidence is; `confirmed: changes results (how)` ranks as its kind."""
    return RANK.get(status.split(" (", 1)[0], 0)


def stronger(first: str | None, second: str) -> str:
    return second if first is None or rank(second) > rank(first) else first


@dataclass
class Request:
    file: Path
    codes: dict[int, list[str]]  # finding line -> rule codes on it
    device: str
    specs: dict[str, Spec] = field(default_factory=dict)
    fixes: dict[int, dict[str, Fix]] = field(default_factory=dict)  # finding line -> code -> its fix
    memory_bytes: int | None = None  # the child's address-space limit, to name when it runs out


# ---------------------------------------------------------------- importing and finding drivers


def import_file(path: Path) -> ModuleType:
    """Imports `path`, as part of its package when it sits in one (relative imports work)."""
    root = package_root(path)
    if root is None:
        sys.path.insert(0, str(path.parent))
        spec = importlib.util.spec_from_file_location("__confirmed__", path)
        if spec is None or spec.loader is None:  # a `.py` path always has a source loader
            raise ImportError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    sys.path.insert(0, str(root.parent))
    return importlib.import_module(_dotted(Path(os.path.abspath(path)), root.parent))


def _dotted(path: Path, base: Path) -> str:
    return ".".join(path.relative_to(base).with_suffix("").parts).removesuffix(".__init__")


@dataclass
class Driver:
    """A class or function to run, and the finding lines it answers for even when it does not
    reach them (its own; none for a caller)."""

    load: Callable[[], object]  # returns the class or function (importing its module first)
    name: str
    owned: list[int]


def _class_spans(tree: ast.Module) -> list[ast.ClassDef]:
    return [node for node in tree.body if isinstance(node, ast.ClassDef)]


def _top_level(tree: ast.Module) -> list[ast.ClassDef | ast.FunctionDef]:
    return [node for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))]


def _inside(node: ast.stmt, line: int) -> bool:
    return node.lineno <= line <= (node.end_lineno or node.lineno)


def _names_of_lines(tree: ast.Module, lines: list[int]) -> set[str]:
    """What a caller has to mention to reach the lines: their top-level class or function."""
    return {
        node.name
        for node in tree.body
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and any(_inside(node, line) for line in lines)
    }


def _mentions(node: ast.ClassDef, names: set[str]) -> bool:
    return any(
        (isinstance(n, ast.Name) and n.id in names) or (isinstance(n, ast.Attribute) and n.attr in names)
        for n in ast.walk(node)
    )


def owners(tree: ast.Module, module: ModuleType, lines: list[int]) -> list[Driver]:
    """The top-level class or function holding each line."""
    drivers = []
    for node in _top_level(tree):
        inside = [line for line in lines if _inside(node, line)]
        if inside:
            drivers.append(Driver(functools.partial(_attribute, module, node.name), node.name, inside))
    return drivers


def callers(path: Path, tree: ast.Module, module: ModuleType, lines: list[int]) -> Iterator[Driver]:
    """Classes in the file, then in the rest of its package, that use what holds the lines."""
    names = _names_of_lines(tree, lines)
    if not names:
        return
    found = 0
    for node in _class_spans(tree):
        if node.name not in names and _mentions(node, names):
            found += 1
            yield Driver(functools.partial(_attribute, module, node.name), node.name, [])
    root = package_root(path)
    if root is None:
        return
    word = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names))) + r")\b")
    for other in sorted(root.rglob("*.py")):
        if other == path or found >= MAX_CALLERS:
            continue
        try:
            text = other.read_text(encoding="utf-8")
            if not word.search(text):
                continue
            other_tree = ast.parse(text)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue
        dotted = _dotted(other, root.parent)
        for node in _class_spans(other_tree):
            if found < MAX_CALLERS and _mentions(node, names):
                found += 1
                yield Driver(functools.partial(_imported_attribute, dotted, node.name), node.name, [])


def _attribute(module: ModuleType, name: str) -> object:
    return getattr(module, name, None)


def _imported_attribute(dotted: str, name: str) -> object:
    return _attribute(importlib.import_module(dotted), name)


# ---------------------------------------------------------------- running under observation


class Outcome:
    """What one driver's runs showed about the requested lines of the file."""

    def __init__(self, file: str, requested: list[int], spans: dict[str, range], driver: str) -> None:
        self.file = file
        self.requested = set(requested)
        self.spans = spans  # top-level class -> its lines, to blame a Function's broken contract
        self.driver = driver
        self.raised_at: set[int] = set()
        self.executed: set[int] = set()
        self.changed: dict[int, str] = {}  # line -> its `confirmed: changes results (how)` status

    def status(self, line: int, owned: bool) -> str | None:
        if line in self.raised_at:
            return CONFIRMED
        if line in self.changed:
            return self.changed[line]
        if line in self.executed:
            return BENIGN
        return NOT_REACHED if owned else None

    def blame_refusal(self, error: RuntimeError) -> None:
        """Autograd refused an in-place write on the spot. It names no line when a custom
        Function broke its contract (reported after `forward` returned, or at the caller's
        later write to the Function's output): then the Function's executed lines are blamed."""
        lines = [
            frame.lineno
            for frame in traceback.extract_tb(error.__traceback__)
            if frame.filename == self.file and frame.lineno is not None
        ]
        if lines:
            self.raised_at.add(lines[-1])
        named = OUTPUT_OF_FUNCTION.search(str(error))
        culprit = named.group(1) if named else self.driver if not lines and "marked as dirty" in str(error) else None
        span = self.spans.get(culprit or "", range(0))
        self.raised_at |= {line for line in self.requested & self.executed if line in span}


def observed(call: Callable[[], object], outcome: Outcome) -> bool:
    """Runs `call` under the tracer, recording the file's executed lines. An in-place error is
    recorded at the file's line it names (True is returned); any other exception propagates."""
    file = outcome.file

    def tracer(frame: FrameType, event: str, arg: object) -> TraceFunction | None:
        if frame.f_code.co_filename != file:
            return None
        if event == "line":
            outcome.executed.add(frame.f_lineno)
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        with trace():
            call()
    except InplaceCulpritError as error:
        outcome.raised_at |= {line for write in error.writes for line in write.lines_in(file)}
        return True
    except RuntimeError as error:
        if not REFUSED_WRITE.search(str(error)):
            raise
        outcome.blame_refusal(error)
        return True
    finally:
        sys.settrace(previous)
    return False


def _loss(output: object) -> torch.Tensor | None:
    parts = [t.float().sum() for t in tensors(output) if t.requires_grad and (t.is_floating_point() or t.is_complex())]
    return sum(parts[1:], parts[0]) if parts else None


def _call_entry(instance: object, name: str, values: list[object]) -> object:
    return _forward_backward(getattr(instance, name), values)


def _forward_backward(function: Callable[..., Any], values: list[object]) -> object:
    output = function(*values)
    loss = _loss(output)
    if loss is not None:
        loss.backward()
    return output


# ---------------------------------------------------------------- one driver


@dataclass
class Entry:
    """A way into the driver: `forward`, a method holding a finding, a Function's `apply`, or
    the function itself; `name` is looked up on what `Harness.build` returns."""

    name: str
    slots: list[inputs.Slot]


# What a driver is: an nn.Module or autograd.Function class, or a plain function.
Drivable = type[nn.Module] | type[torch.autograd.Function] | FunctionType


class Harness:
    """Builds one driver (with one set of constructor arguments) on the device, finds inputs
    for its entries, and runs them."""

    def __init__(self, driver: Drivable, module: ModuleType, request: Request, arguments: tuple[Args, Kwargs]) -> None:
        self.driver = driver
        self.module = module
        self.request = request
        self.device = request.device
        self.spec = request.specs.get(driver.__name__)
        self.is_module = isinstance(driver, type) and issubclass(driver, nn.Module)
        self.args, self.kwargs = arguments
        # A plain function's inputs do not require grad: a helper may rightly write into a
        # buffer its callers own (they pass clones), and its own graph-building code still runs.
        self.grad = isinstance(driver, type)

    def inputs(self, layout: Layout | None, scale: float = 1.0) -> tuple[list[object], list[torch.Tensor]]:
        values = self.values(layout, scale)
        return inputs.with_grad(values) if self.grad else (values, [])

    def build(self, device: str | None = None) -> object:
        """A fresh instance with the same weights each time; a Function's class; the module
        holding a plain function."""
        torch.manual_seed(0)
        driver = self.driver
        if not (isinstance(driver, type) and issubclass(driver, nn.Module)):
            return driver if isinstance(driver, type) else self.module
        with torch.device(device or self.device):
            return driver(*self.args, **self.kwargs)

    def entries(self, instance: object, lines: list[int]) -> list[Entry]:
        driver = self.driver
        if not isinstance(instance, nn.Module):  # what `build` gives for all but an nn.Module class
            if isinstance(driver, type):  # autograd.Function
                return [Entry("apply", inputs.slots(driver.forward, skip=1))]
            return [Entry(driver.__name__, inputs.slots(driver, skip=0))]
        found = []
        if type(instance).forward is not nn.Module.forward:
            found.append(Entry("forward", inputs.slots(instance.forward, skip=0)))
        for name, function in vars(self.driver).items():
            code = getattr(function, "__code__", None)
            if (
                name.startswith("_")
                or name == "forward"
                or code is None
                or code.co_filename != str(self.module.__file__)
            ):
                continue
            last = max((line for _, _, line in code.co_lines() if line), default=code.co_firstlineno)
            if any(code.co_firstlineno <= line <= last for line in lines):
                found.append(Entry(name, inputs.slots(getattr(instance, name), skip=0)))
        return found

    def values(self, layout: Layout | None, scale: float = 1.0) -> list[object]:
        """Fresh inputs (the same ones each time): from the config's expression, or a layout."""
        torch.manual_seed(1)
        if layout is None:
            assert self.spec is not None and self.spec.inputs, "`layouts` yields None only for configured inputs"
            namespace = {"torch": torch, "nn": nn, **vars(self.module)}
            with torch.device(self.device):
                value = eval(self.spec.inputs, namespace)  # the user's own configured expression
            values = list(value) if isinstance(value, tuple) else [value]
        else:
            values = layout.build(self.device)
        return [v * scale if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]

    def layouts(self, entry: Entry) -> Iterator[Layout | None]:
        """The configured inputs; else layouts that ran on `meta` first, then the rest (all of
        them on the real device when the class cannot even be built on `meta`)."""
        if entry.name == "forward" and self.spec is not None and self.spec.inputs:
            yield None
            return
        try:
            meta = self.build("meta")
        except Exception:
            meta = None
        leading = None
        if self.is_module:
            built = meta if meta is not None else self.build()
            leading = inputs.first_layer(built) if isinstance(built, nn.Module) else None
        candidates = list(inputs.layouts(entry.slots, leading))
        try:
            fitting = [
                layout
                for layout in candidates[: inputs.META_TRIALS]
                if meta is not None and self._runs_on_meta(meta, entry, layout)
            ]
        except _TooLong:  # meta cannot tell: the candidates run on the real device instead
            fitting = []
        yield from fitting
        if not fitting:
            yield from candidates[: inputs.REAL_TRIALS]

    @staticmethod
    def _runs_on_meta(instance: object, entry: Entry, layout: Layout) -> bool:
        try:
            values, _ = inputs.with_grad(layout.build("meta"))
            with torch.device("meta"), _time_limit(META_TRIAL_S):
                getattr(instance, entry.name)(*values)
        except RuntimeError as error:
            return bool(REFUSED_WRITE.search(str(error)))
        except Exception:
            return False
        return True

    def twin(self, copy: ModuleType) -> Harness:
        """The same driver, built with the same arguments, from `copy` of the file (with a fix
        applied); a driver from another file stays itself (see `fixed.standing_in`)."""
        driver = (
            getattr(copy, self.driver.__name__, None)
            if getattr(self.driver, "__module__", None) == self.module.__name__
            else self.driver
        )
        if driver is None:
            raise NotRun(f"{self.driver.__name__} is gone once the fix is applied")
        return Harness(driver, copy, self.request, (self.args, self.kwargs))

    def weights(self) -> dict[str, Any] | None:
        """A fresh instance's state, for a twin to load: both runs then start from the same weights."""
        instance = self.build()
        return instance.state_dict() if isinstance(instance, nn.Module) else None

    def run(
        self, entry: Entry, layout: Layout | None, scale: float = 1.0, weights: dict[str, Any] | None = None
    ) -> list[torch.Tensor | None]:
        """Forward + backward without any observer: outputs, parameter and input gradients."""
        instance = self.build()
        if weights is not None and isinstance(instance, nn.Module):
            instance.load_state_dict(weights)
        values, leaves = self.inputs(layout, scale)
        torch.manual_seed(2)
        output = _forward_backward(getattr(instance, entry.name), values)
        parameters = list(instance.parameters()) if isinstance(instance, nn.Module) else []
        return [*flat_tensors(output), *(p.grad for p in parameters), *(leaf.grad for leaf in leaves)]


class _TooLong(BaseException):
    """A meta trial ran past META_TRIAL_S (a BaseException: user code's `except Exception` lets it by)."""


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    def expire(signum: int, frame: object) -> None:
        raise _TooLong

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


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
            observed(functools.partial(_call_entry, instance, entry.name, values), outcome)
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
    spans = {node.name: range(node.lineno, (node.end_lineno or node.lineno) + 1) for node in _class_spans(tree)}
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
