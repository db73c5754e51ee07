"""Synthetic constructor arguments and inputs for `--confirm` (child side; imports torch).

A class is built from the `[tool.torchlint-inplace.confirm]` table when it names the class,
else from defaults (small integers for required size-like arguments). Its inputs come from the
table's input expression, else from what the code says about each parameter: the first layer
that consumes the input gives rank, channels and dtype (`Conv1d/2d/3d`, `Linear`, `Embedding`,
`LSTM/GRU`, `LayerNorm`); an annotation of `int`/`float`/`bool` gives a number; a parameter used
as a mask (`masked_fill(mask, ...)`, `x[mask]`, `torch.where(mask, ...)`) gets a bool tensor and
one used as class indices (`cross_entropy(..., target)`) a long tensor. Shapes nothing pins
down are searched on the `meta` device, where a forward costs no arithmetic.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

SMALL_INT = 4
# What a required constructor argument gets, by annotation (unannotated ones are taken as sizes).
CONSTRUCTOR_DEFAULTS = {int: SMALL_INT, "int": SMALL_INT, float: 0.5, "float": 0.5, bool: False, "bool": False}
# Shapes tried for the first tensor argument when no first layer says what it looks like.
CANDIDATE_SHAPES = (
    (2, SMALL_INT),
    (2, 3, SMALL_INT),
    (2, SMALL_INT, 6, 6),
    (2, SMALL_INT, 6),
    (SMALL_INT,),
    (2, SMALL_INT, 4, 4, 4),
)
# Input combinations tried on `meta` before one runs for real; a few more on CPU if meta cannot run the code.
META_TRIALS, REAL_TRIALS = 96, 8
# Constructor argument sets tried per class (defaults, then boolean options flipped).
MAX_VARIANTS = 5

MASK_METHODS = frozenset({"masked_fill", "masked_fill_", "masked_scatter", "masked_scatter_", "masked_select"})
TARGET_FUNCTIONS = frozenset({"cross_entropy", "nll_loss", "one_hot", "gather", "embedding"})
MASK_WORDS = ("mask", "pad", "keep", "drop", "valid", "ignore", "visited")
INDEX_WORDS = ("target", "label", "idx", "index", "indices", "ids", "token", "class")

# Positional and keyword arguments of a constructor call, and any function the probe calls.
Args = tuple[object, ...]
Kwargs = dict[str, object]
Function = Callable[..., Any]


class NotRun(Exception):
    """A class could not be built or fed; the message is the reason shown to the user."""


@dataclass(frozen=True)
class Spec:
    """One class's entry of `[tool.torchlint-inplace.confirm]`."""

    args: Args = ()
    kwargs: tuple[tuple[str, object], ...] = ()
    inputs: str | None = None  # a Python expression (torch and the module's names in scope)


def spec_from_json(data: dict[str, Any]) -> Spec:
    return Spec(tuple(data.get("args", ())), tuple(sorted(data.get("kwargs", {}).items())), data.get("inputs"))


# ---------------------------------------------------------------- constructors


def required_parameters(function: Function, skip: int) -> list[inspect.Parameter]:
    parameters = list(inspect.signature(function).parameters.values())[skip:]
    positional = (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.KEYWORD_ONLY,
    )
    return [p for p in parameters if p.default is p.empty and p.kind in positional]


def constructor_variants(cls: type[object], spec: Spec | None) -> list[tuple[Args, Kwargs]]:
    """The arguments to build `cls` with: the configured or default ones first, then the same
    with one boolean option flipped each (`squash=True`, `exclude_bn0=True`): code that only runs
    on a branch a flag selects is reached only so."""
    args, kwargs = constructor_arguments(cls, spec)
    if spec is not None and (spec.args or spec.kwargs):
        return [(args, kwargs)]
    variants = [(args, kwargs)]
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    positional = [p for p in parameters if p.default is p.empty and p.kind is not p.KEYWORD_ONLY]
    for parameter in parameters:
        flag = parameter.default if parameter.default is not parameter.empty else None
        if parameter.annotation in (bool, "bool") or isinstance(flag, bool):
            flipped = not flag if isinstance(flag, bool) else True
            if parameter in positional:
                changed = list(args)
                changed[positional.index(parameter)] = flipped
                variants.append((tuple(changed), kwargs))
            elif parameter.kind is not parameter.POSITIONAL_ONLY:
                variants.append((args, {**kwargs, parameter.name: flipped}))
    return variants[:MAX_VARIANTS]


def constructor_arguments(cls: type[object], spec: Spec | None) -> tuple[Args, Kwargs]:
    if spec is not None and (spec.args or spec.kwargs):
        return spec.args, dict(spec.kwargs)
    args: list[object] = []
    kwargs: Kwargs = {}
    for parameter in required_parameters(cls.__init__, skip=1):
        annotation = int if parameter.annotation is parameter.empty else parameter.annotation
        if annotation not in CONSTRUCTOR_DEFAULTS:
            raise NotRun(
                f"cannot build constructor argument `{parameter.name}: {_spelling(parameter.annotation)}` of {cls.__name__} (give it in [tool.torchlint-inplace.confirm.{cls.__name__}])"
            )
        if parameter.kind is parameter.KEYWORD_ONLY:
            kwargs[parameter.name] = CONSTRUCTOR_DEFAULTS[annotation]
        else:
            args.append(CONSTRUCTOR_DEFAULTS[annotation])
    return tuple(args), kwargs


def _spelling(annotation: object) -> str:
    return getattr(annotation, "__name__", None) or str(annotation)


def call_text(cls: Function, args: Args, kwargs: Kwargs) -> str:
    return f"{cls.__name__}({', '.join([*map(repr, args), *(f'{k}={v!r}' for k, v in kwargs.items())])})"


# ---------------------------------------------------------------- what each parameter is


@dataclass(frozen=True)
class Slot:
    """One required parameter of the called function and what kind of value it takes."""

    name: str
    kind: str  # "tensor", "mask", "index", or "value" (a fixed Python value)
    value: object = None


def _uses(function: Function) -> tuple[set[str], set[str]]:
    """Names used as masks and as class indices in the function's own source."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return set(), set()
    masks: set[str] = set()
    indices: set[str] = set()

    def names(node: ast.AST) -> set[str]:
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if callee in MASK_METHODS and node.args:
                masks |= names(node.args[0])
            elif callee == "where" and node.args:
                masks |= names(node.args[0])
            elif callee in TARGET_FUNCTIONS and len(node.args) > 1:
                indices |= names(node.args[1]) if callee != "one_hot" else names(node.args[0])
            for keyword in node.keywords:
                if keyword.arg in ("target", "index", "mask"):
                    (masks if keyword.arg == "mask" else indices).update(names(keyword.value))
        elif isinstance(node, ast.Subscript):
            index = node.slice
            parts = index.elts if isinstance(index, ast.Tuple) else [index]
            for part in parts:
                if isinstance(part, ast.Name):
                    masks.add(part.id)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
            masks |= names(node.operand)
    return masks, indices


def slots(function: Function, skip: int) -> list[Slot]:
    masks, indices = _uses(function)
    result = []
    for parameter in required_parameters(function, skip):
        annotation = parameter.annotation
        name = parameter.name
        if annotation in CONSTRUCTOR_DEFAULTS:
            result.append(Slot(name, "value", CONSTRUCTOR_DEFAULTS[annotation]))
        elif (
            annotation is not parameter.empty
            and isinstance(annotation, type)
            and not issubclass(annotation, torch.Tensor)
        ):
            raise NotRun(f"cannot build argument `{name}: {annotation.__name__}` of {function.__qualname__}")
        elif name in indices or (name not in masks and any(word in name.lower() for word in INDEX_WORDS)):
            result.append(Slot(name, "index"))
        elif name in masks or any(word in name.lower() for word in MASK_WORDS):
            result.append(Slot(name, "mask"))
        else:
            result.append(Slot(name, "tensor"))
    return result


# ---------------------------------------------------------------- shapes


@dataclass(frozen=True)
class Leading:
    """What the first consuming layer says about the first tensor input."""

    shapes: tuple[tuple[int, ...], ...]
    integer_range: int | None = None  # Embedding: indices below this


# Spatial sizes tried for a convolutional input, smallest first: networks that downsample 5
# times need 32, patch embeddings with a fixed grid need their own size (`img_size`) or 224.
SPATIAL_SIZES = (8, 32, 64, 224)


def _declared_size(module: nn.Module) -> tuple[int, ...] | None:
    """An `img_size` / `image_size` / `input_size` the model (or a submodule) states."""
    for layer in module.modules():
        for name in ("img_size", "image_size", "input_size"):
            size = getattr(layer, name, None)
            if isinstance(size, int) and size > 0:
                return (size,)
            if isinstance(size, (tuple, list)) and size and all(isinstance(n, int) and n > 0 for n in size):
                return tuple(size)
    return None


def first_layer(module: nn.Module) -> Leading | None:
    for layer in module.modules():
        if isinstance(layer, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
            rank = layer.weight.dim() - 2
            declared = _declared_size(module)
            sizes = (
                [declared * rank if len(declared) == 1 else declared[-rank:]]
                if declared and len(declared) in (1, rank)
                else []
            )
            sizes += [(size,) * rank for size in SPATIAL_SIZES]
            return Leading(tuple(dict.fromkeys((2, layer.in_channels, *spatial) for spatial in sizes)))
        if isinstance(layer, nn.Linear):  # features, or a sequence of them
            return Leading(((2, layer.in_features), (2, 3, layer.in_features)))
        if isinstance(layer, nn.Embedding):
            return Leading(((2, 5),), integer_range=layer.num_embeddings)
        if isinstance(layer, (nn.LSTM, nn.GRU, nn.RNN)):
            return Leading(((2, 5, layer.input_size) if layer.batch_first else (5, 2, layer.input_size),))
        if isinstance(layer, nn.LayerNorm):
            return Leading(((2, *layer.normalized_shape), (2, 3, *layer.normalized_shape)))
    return None


def _companion_shapes(kind: str, first: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Shapes worth trying for a later parameter, given the first tensor's shape."""
    if kind == "index":
        return list(dict.fromkeys([first[:1], first[:-1] or (1,)]))
    shapes = [
        first,
        first[:-1],
        (*first[:-1], 1),
        first[:2],
        first[:1],
        (first[0], first[-1]),
        (first[0], 1, first[-1]),
        (first[-1],),
    ]
    if kind == "tensor":
        shapes += [(first[0], 3, first[-1]), (first[0], SMALL_INT, first[-1])]
    return [shape for shape in dict.fromkeys(shapes) if shape]


@dataclass(frozen=True)
class Layout:
    """A choice of shape for every tensor-like slot; builds fresh tensors on demand."""

    slots: tuple[Slot, ...]
    shapes: tuple[tuple[int, ...] | None, ...]
    integer_range: int | None

    def build(self, device: str | torch.device) -> list[object]:
        values: list[object] = []
        first = next((i for i, slot in enumerate(self.slots) if slot.kind != "value"), None)
        for position, (slot, shape) in enumerate(zip(self.slots, self.shapes, strict=True)):
            if slot.kind == "value":
                values.append(slot.value)
                continue
            assert shape is not None, "`layouts` gives every tensor-like slot a shape"
            if slot.kind == "mask":
                values.append(torch.rand(shape, device=device) > 0.5)
            elif slot.kind == "index":
                values.append(torch.randint(0, SMALL_INT, shape, device=device))
            elif position == first and self.integer_range:  # token ids for an Embedding
                values.append(torch.randint(0, self.integer_range, shape, device=device))
            else:
                values.append(torch.randn(shape, device=device))
        return values


def with_grad(values: list[object]) -> tuple[list[object], list[torch.Tensor]]:
    """Float tensors become non-leaf results of a leaf that requires grad, as a module's input
    usually is: in-place writes on them are legal, and gradients reach the leaves, returned too
    (their .grad is compared)."""
    leaves: list[torch.Tensor] = []
    fed: list[object] = []
    for value in values:
        if isinstance(value, torch.Tensor) and value.is_floating_point() and not value.requires_grad:
            leaves.append(value.detach().requires_grad_())
            fed.append(leaves[-1] * 1.0)
        else:
            fed.append(value)
    return fed, leaves


def layouts(function_slots: list[Slot], leading: Leading | None) -> Iterator[Layout]:
    tensor_positions = [i for i, slot in enumerate(function_slots) if slot.kind != "value"]
    if not tensor_positions:
        yield Layout(tuple(function_slots), (None,) * len(function_slots), None)
        return
    first_shapes = list(leading.shapes if leading else ()) + [
        s for s in CANDIDATE_SHAPES if not leading or s not in leading.shapes
    ]
    integer_range = leading.integer_range if leading else None
    for first in first_shapes:
        options = [[first]] + [_companion_shapes(function_slots[i].kind, first) for i in tensor_positions[1:]]
        for combination in itertools.product(*options):
            shapes: list[tuple[int, ...] | None] = [None] * len(function_slots)
            for position, shape in zip(tensor_positions, combination, strict=True):
                shapes[position] = shape
            yield Layout(tuple(function_slots), tuple(shapes), integer_range)
