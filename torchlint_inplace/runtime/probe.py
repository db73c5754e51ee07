"""The child side of `--confirm`: import one file, build the classes that own findings, run them.

Runs in a subprocess started by `confirm.py` (user code executes only there). Each class owning
a finding is instantiated (defaults; small integers for required `int`-like arguments), fed
synthetic inputs (shaped after the first layer that consumes them, else a short list of
candidate shapes), and run forward + backward on CPU under the culprit tracer, while the lines
of the file that execute are recorded. Output: JSON `{line: status}` written to a file.

    python -m torchlint_inplace.runtime.probe FILE OUTPUT_JSON LINE...
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import json
import re
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import torch
from torch import nn

from .report import InplaceCulpritError
from .tracer import trace

SMALL_INT = 4
# What a required constructor argument gets, by annotation (unannotated ones are taken as sizes).
CONSTRUCTOR_DEFAULTS = {int: SMALL_INT, "int": SMALL_INT, float: 0.5, "float": 0.5, bool: False, "bool": False}
# Shapes tried for every tensor argument when no first layer says what the input looks like.
CANDIDATE_SHAPES = ((2, SMALL_INT), (2, 3, SMALL_INT), (2, SMALL_INT, 6, 6), (2, SMALL_INT, 6), (SMALL_INT,), (2, SMALL_INT, 4, 4, 4))
# Autograd's refusals of an in-place write on the spot (a leaf, a view of one, a multi-output view).
REFUSED_WRITE = re.compile(r"in-place operation|is a view and is being modified inplace|modified by an inplace operation|marked as dirty")

CONFIRMED, BENIGN, NOT_REACHED = "confirmed: raises", "benign", "not reached"


class NotRun(Exception):
    """A class could not be built or fed; the message is the reason shown to the user."""


def owning_classes(path: Path, lines: list[int]) -> dict[str, list[int]]:
    """Top-level class name -> the finding lines inside it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    owners: dict[str, list[int]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            inside = [line for line in lines if node.lineno <= line <= (node.end_lineno or node.lineno)]
            if inside:
                owners[node.name] = inside
    return owners


def import_file(path: Path) -> ModuleType:
    """Imports `path`, as part of its package when it sits in one (relative imports work)."""
    root, folder = None, path.parent
    while (folder / "__init__.py").exists():
        root, folder = folder, folder.parent
    if root is None:
        spec = importlib.util.spec_from_file_location("__confirmed__", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    sys.path.insert(0, str(root.parent))
    dotted = ".".join(path.relative_to(root.parent).with_suffix("").parts)
    return importlib.import_module(dotted.removesuffix(".__init__"))


def _required(signature: inspect.Signature, skip: int) -> list[inspect.Parameter]:
    parameters = list(signature.parameters.values())[skip:]
    return [p for p in parameters if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def instantiate(cls: type[nn.Module]) -> nn.Module:
    arguments = []
    for parameter in _required(inspect.signature(cls.__init__), skip=1):
        annotation = int if parameter.annotation is parameter.empty else parameter.annotation
        if annotation not in CONSTRUCTOR_DEFAULTS:
            raise NotRun(f"cannot build constructor argument `{parameter.name}: {parameter.annotation}` of {cls.__name__}")
        arguments.append(CONSTRUCTOR_DEFAULTS[annotation])
    try:
        return cls(*arguments)
    except Exception as error:
        raise NotRun(f"{cls.__name__}({', '.join(map(str, arguments))}) raised {type(error).__name__}: {error}") from error


def first_layer_inputs(module: nn.Module) -> list[torch.Tensor]:
    """Inputs for the first layer that consumes them, shaped by that layer's own parameters."""
    for layer in module.modules():
        if isinstance(layer, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
            spatial = (8,) * (layer.weight.dim() - 2)
            return [torch.randn(2, layer.in_channels, *spatial)]
        if isinstance(layer, nn.Linear):  # features, or a sequence of them
            return [torch.randn(2, layer.in_features), torch.randn(2, 3, layer.in_features)]
        if isinstance(layer, nn.Embedding):
            return [torch.randint(0, layer.num_embeddings, (2, 5))]
        if isinstance(layer, (nn.LSTM, nn.GRU)):
            return [torch.randn(2, 5, layer.input_size) if layer.batch_first else torch.randn(5, 2, layer.input_size)]
        if isinstance(layer, nn.LayerNorm):
            return [torch.randn(2, *layer.normalized_shape)]
    return []


def input_candidates(module: nn.Module, count: int) -> Iterator[tuple[torch.Tensor, ...]]:
    if count == 0:
        yield ()
        return
    for inferred in first_layer_inputs(module):
        yield tuple(inferred.clone() for _ in range(count))
    for shape in CANDIDATE_SHAPES:
        yield tuple(torch.randn(shape) for _ in range(count))


def _scalar(output: object) -> torch.Tensor | None:
    tensors = output if isinstance(output, (tuple, list)) else (output,)
    parts = [t.float().sum() for t in tensors if isinstance(t, torch.Tensor) and t.requires_grad]
    return sum(parts) if parts else None


class Outcome:
    def __init__(self) -> None:
        self.raised_at: set[int] = set()
        self.executed: set[int] = set()


def _line_in(error: BaseException, file: str) -> int | None:
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename == file]
    return frames[-1].lineno if frames else None


def run_once(call: Callable[[], object], file: str, outcome: Outcome) -> None:
    """Forward + backward under the tracer, recording executed lines; raises what is not ours."""

    def tracer(frame, event, arg):
        if frame.f_code.co_filename != file:
            return None
        if event == "line":
            outcome.executed.add(frame.f_lineno)
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        with trace():
            loss = _scalar(call())
            if loss is not None:
                loss.backward()
    except InplaceCulpritError as error:
        outcome.raised_at |= {write.line for write in error.writes if write.file == file}
    except RuntimeError as error:
        line = _line_in(error, file)
        if not REFUSED_WRITE.search(str(error)) or line is None:
            raise
        outcome.raised_at.add(line)
    finally:
        sys.settrace(previous)


def exercise(cls: type, file: str, outcome: Outcome) -> None:
    if isinstance(cls, type) and issubclass(cls, torch.autograd.Function):
        count = len(_required(inspect.signature(cls.forward), skip=1))
        candidates = (tuple(t.requires_grad_() for t in inputs) for inputs in input_candidates(nn.Module(), count))
        calls = (lambda inputs=inputs: cls.apply(*inputs) for inputs in candidates)
    else:
        module = instantiate(cls)
        count = len(_required(inspect.signature(module.forward), skip=0))
        calls = (lambda inputs=inputs: module(*inputs) for inputs in input_candidates(module, count))
    errors = []
    for call in calls:
        try:
            run_once(call, file, outcome)
            return
        except Exception as error:  # a shape that does not fit: try the next candidate
            errors.append(f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")
    raise NotRun(f"no synthetic input worked for {cls.__name__} ({errors[0] if errors else 'no candidates'})")


def probe(path: Path, lines: list[int]) -> dict[int, str]:
    statuses: dict[int, str] = {}
    try:
        module = import_file(path)
    except Exception as error:
        return {line: f"not run: importing the file raised {type(error).__name__}: {error}" for line in lines}
    file = str(path)
    owners = owning_classes(path, lines)
    for name, owned in owners.items():
        cls = getattr(module, name, None)
        if not (isinstance(cls, type) and issubclass(cls, (nn.Module, torch.autograd.Function))):
            statuses.update({line: f"not run: {name} is not an nn.Module or autograd.Function" for line in owned})
            continue
        outcome = Outcome()
        torch.manual_seed(0)
        try:
            exercise(cls, file, outcome)
        except NotRun as reason:
            statuses.update({line: f"not run: {reason}" for line in owned})
            continue
        for line in owned:
            statuses[line] = CONFIRMED if line in outcome.raised_at else BENIGN if line in outcome.executed else NOT_REACHED
    for line in lines:
        statuses.setdefault(line, "not run: outside any nn.Module or autograd.Function class")
    return statuses


def main(argv: list[str]) -> int:
    path, output, *lines = argv
    statuses = probe(Path(path).resolve(), [int(line) for line in lines])
    Path(output).write_text(json.dumps({str(line): status for line, status in statuses.items()}), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
