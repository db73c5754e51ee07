"""Builds one driver on the device, finds inputs for its entries, and calls it forward + backward.

A `Harness` holds one driver with one set of constructor arguments: it builds fresh instances
with the same weights, lists the ways into the driver (`Entry`: `forward`, a method holding a
finding, a Function's `apply`, the function itself), tries synthetic input layouts on the
`meta` device first (under a time limit: allocating costs nothing there) and runs an entry
without any observer for the fix comparison. What to run and what it proves is `probe.py`'s.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FunctionType, ModuleType
from typing import Any

import torch
from torch import nn

from . import inputs
from .coverage import REFUSED_WRITE
from .inputs import Args, Kwargs, Layout, NotRun
from .request import Request
from .variants import flat_tensors, tensors

# How long one candidate shape may run on `meta`: allocating costs nothing there, so a forward
# that allocates until memory runs out never ends; the real device (and its limit) then decides.
META_TRIAL_S = 3.0


def _loss(output: object) -> torch.Tensor | None:
    parts = [t.float().sum() for t in tensors(output) if t.requires_grad and (t.is_floating_point() or t.is_complex())]
    return sum(parts[1:], parts[0]) if parts else None


def call_entry(instance: object, name: str, values: list[object]) -> object:
    return _forward_backward(getattr(instance, name), values)


def _forward_backward(function: Callable[..., Any], values: list[object]) -> object:
    output = function(*values)
    loss = _loss(output)
    if loss is not None:
        loss.backward()
    return output


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
