"""What the analysis knows about PyTorch, read from the table generated from the installed torch.

The table (`torchlint_inplace/data/torch_ops.json`) is produced by `scripts/gen_torch_tables.py`
and checked against torch by the test suite; nothing here is hand-written knowledge about ops,
only the way the analysis looks it up.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any


@dataclass(frozen=True)
class OpFacts:
    params: tuple[str, ...]
    # saved thing ("self", "other", ..., "result", or an output's name) -> inputs whose gradient needs it
    saves: dict[str, tuple[str, ...]]
    tensors: frozenset[str] = frozenset()  # parameters typed Tensor (known for an overload)
    outputs: tuple[str, ...] = ("result",)


@dataclass(frozen=True)
class WriteConditions:
    """When an in-place module or functional really writes: not in eval mode (`training_only`),
    not when one of these arguments has this value (`identity`: `p=0.0`)."""

    training_only: bool
    identity: dict[str, object]


# A tuple a module returns, as nested lists; a leaf is whether that tensor is saved for backward.
OutputStructure = bool | list[Any]

# Factories build fresh tensors that do not require grad unless asked to.
FACTORY_PREFIXES = (
    "zeros",
    "ones",
    "empty",
    "full",
    "rand",
    "arange",
    "linspace",
    "logspace",
    "eye",
    "tensor",
    "as_tensor",
    "from_numpy",
)


@dataclass(frozen=True)
class TorchFacts:
    ops: dict[str, OpFacts]
    overloads: dict[str, tuple[OpFacts, ...]]
    integer_outputs: dict[str, frozenset[str]]
    inplace_methods: dict[str, str | None]
    inplace_view_methods: frozenset[str]  # `t_`, `set_`...: they bump the version counter
    view_methods: frozenset[str]
    multi_view_methods: frozenset[str]
    view_attributes: frozenset[str]
    inplace_functions: dict[str, str | None]
    inplace_kwarg_functionals: dict[str, int]
    inplace_modules: dict[str, int]
    module_saves: dict[str, frozenset[str]]
    # A module returning a tuple: its structure, `True` where the tensor is the saved one
    # (LSTM: `[True, [False, False]]`, its output saved, not `(h_n, c_n)`).
    module_outputs: dict[str, OutputStructure]
    # Modules whose output is their input or a view of it (Identity, Flatten)
    modules_aliasing_input: frozenset[str]
    # The positions of other inputs a module saves for backward (BCELoss its target, 1)
    module_saved_arguments: dict[str, frozenset[int]]
    module_parameters: frozenset[str]
    # In place the saves differ; None: the probe saw no write (the flag is ignored) or could not run
    inplace_module_saves: dict[str, frozenset[str] | None]
    inplace_function_saves: dict[str, frozenset[str] | None]
    inplace_module_conditions: dict[str, WriteConditions]
    inplace_functional_conditions: dict[str, WriteConditions]
    parameter_writing_modules: dict[str, str]
    tensor_functions: frozenset[str]
    module_returning_functions: frozenset[str]  # `torch.nn.utils.spectral_norm`: returns its module

    def is_factory(self, name: str) -> bool:
        return name.startswith(FACTORY_PREFIXES) and name in self.tensor_functions

    def overload(self, name: str, positional: Sequence[bool], keywords: Sequence[str]) -> OpFacts | None:
        """The overload of `name` a call fits: `positional` says which positional arguments are
        tensors, `keywords` names the others. None: no overload table, or no single fit."""
        candidates = self.overloads.get(name)
        if not candidates:
            return self.ops.get(name)
        fitting = [facts for facts in candidates if _fits(facts, positional, keywords)]
        if len(fitting) == 1:
            return fitting[0]
        return (
            self.ops.get(name) if not fitting or len({facts.saves.__repr__() for facts in fitting}) > 1 else fitting[0]
        )


def _fits(facts: OpFacts, positional: Sequence[bool], keywords: Sequence[str]) -> bool:
    if len(positional) > len(facts.params) or any(keyword not in facts.params for keyword in keywords):
        return False
    return all(
        (param in facts.tensors) == is_tensor for param, is_tensor in zip(facts.params, positional, strict=False)
    )


def _load(text: str) -> TorchFacts:
    data = json.loads(text)
    ops = {
        name: OpFacts(tuple(entry["params"]), {k: tuple(v) for k, v in entry["saves"].items()})
        for name, entry in data["ops"].items()
    }
    overloads = {
        name: tuple(
            OpFacts(
                tuple(entry["params"]),
                {k: tuple(v) for k, v in entry["saves"].items()},
                frozenset(entry["tensors"]),
                tuple(entry["outputs"]),
            )
            for entry in entries
        )
        for name, entries in data["overloads"].items()
    }
    return TorchFacts(
        ops=ops,
        overloads=overloads,
        integer_outputs={name: frozenset(outputs) for name, outputs in data["integer_outputs"].items()},
        inplace_methods=data["inplace_methods"],
        inplace_view_methods=frozenset(name for name, bumps in data["inplace_view_methods"].items() if bumps),
        view_methods=frozenset(data["view_methods"]),
        multi_view_methods=frozenset(data["multi_view_methods"]),
        view_attributes=frozenset(data["view_attributes"]),
        inplace_functions=data["inplace_functions"],
        inplace_kwarg_functionals=data["inplace_kwarg_functionals"],
        inplace_modules=data["inplace_modules"],
        module_saves={name: frozenset(entry["saves"]) for name, entry in data["modules"].items()},
        module_outputs={name: entry["outputs"] for name, entry in data["modules"].items() if "outputs" in entry},
        modules_aliasing_input=frozenset(name for name, entry in data["modules"].items() if entry.get("aliases_input")),
        module_saved_arguments={
            name: frozenset(entry["saved_arguments"])
            for name, entry in data["modules"].items()
            if "saved_arguments" in entry
        },
        module_parameters=frozenset(data["module_parameters"]),
        inplace_module_saves=_optional_sets(data["inplace_module_saves"]),
        inplace_function_saves=_optional_sets(data["inplace_function_saves"]),
        inplace_module_conditions=_conditions(data["inplace_module_conditions"]),
        inplace_functional_conditions=_conditions(data["inplace_functional_conditions"]),
        parameter_writing_modules=data["parameter_writing_modules"],
        tensor_functions=frozenset(data["tensor_functions"]),
        module_returning_functions=frozenset(data["module_returning_functions"]),
    )


def _optional_sets(table: dict[str, list[str] | None]) -> dict[str, frozenset[str] | None]:
    return {name: None if saves is None else frozenset(saves) for name, saves in table.items()}


def _conditions(table: dict[str, dict[str, Any]]) -> dict[str, WriteConditions]:
    return {name: WriteConditions(entry["training_only"], dict(entry["identity"])) for name, entry in table.items()}


@cache
def torch_facts() -> TorchFacts:
    return _load(resources.files("torchlint_inplace.data").joinpath("torch_ops.json").read_text("utf-8"))
