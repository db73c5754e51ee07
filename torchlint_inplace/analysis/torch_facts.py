"""What the analysis knows about PyTorch, read from the table generated from the installed torch.

The table (`torchlint_inplace/data/torch_ops.json`) is produced by `scripts/gen_torch_tables.py`
and checked against torch by the test suite; nothing here is hand-written knowledge about ops,
only the way the analysis looks it up.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources


@dataclass(frozen=True)
class OpFacts:
    params: tuple[str, ...]
    # saved thing ("self", "other", ..., "result") -> inputs whose gradient needs it
    saves: dict[str, tuple[str, ...]]


# Factories build fresh tensors that do not require grad unless asked to.
FACTORY_PREFIXES = ("zeros", "ones", "empty", "full", "rand", "arange", "linspace", "logspace", "eye", "tensor", "as_tensor", "from_numpy")


@dataclass(frozen=True)
class TorchFacts:
    ops: dict[str, OpFacts]
    inplace_methods: dict[str, str | None]
    view_methods: frozenset[str]
    multi_view_methods: frozenset[str]
    view_attributes: frozenset[str]
    self_returning_methods: frozenset[str]  # `contiguous`, `to`: return `self` when nothing needs copying
    inplace_functions: dict[str, str | None]
    inplace_kwarg_functionals: dict[str, int]
    inplace_modules: dict[str, int]
    module_saves: dict[str, frozenset[str]]
    # In place the saves differ; None: the probe saw no write (the flag is ignored) or could not run
    inplace_module_saves: dict[str, frozenset[str] | None]
    inplace_function_saves: dict[str, frozenset[str] | None]
    out_functions: frozenset[str]
    tensor_functions: frozenset[str]

    def is_factory(self, name: str) -> bool:
        return name.startswith(FACTORY_PREFIXES) and name in self.tensor_functions


def _load(text: str) -> TorchFacts:
    data = json.loads(text)
    ops = {
        name: OpFacts(tuple(entry["params"]), {k: tuple(v) for k, v in entry["saves"].items()})
        for name, entry in data["ops"].items()
    }
    return TorchFacts(
        ops=ops,
        inplace_methods=data["inplace_methods"],
        view_methods=frozenset(data["view_methods"]),
        multi_view_methods=frozenset(data["multi_view_methods"]),
        view_attributes=frozenset(data["view_attributes"]),
        self_returning_methods=frozenset(data["self_returning_methods"]),
        inplace_functions=data["inplace_functions"],
        inplace_kwarg_functionals=data["inplace_kwarg_functionals"],
        inplace_modules=data["inplace_modules"],
        module_saves={name: frozenset(entry["saves"]) for name, entry in data["modules"].items()},
        inplace_module_saves=_optional_sets(data["inplace_module_saves"]),
        inplace_function_saves=_optional_sets(data["inplace_function_saves"]),
        out_functions=frozenset(data["out_functions"]),
        tensor_functions=frozenset(data["tensor_functions"]),
    )


def _optional_sets(table: dict[str, list[str] | None]) -> dict[str, frozenset[str] | None]:
    return {name: None if saves is None else frozenset(saves) for name, saves in table.items()}


@cache
def torch_facts() -> TorchFacts:
    return _load(resources.files("torchlint_inplace.data").joinpath("torch_ops.json").read_text("utf-8"))
