"""Derive the PyTorch facts the static analysis needs from the installed torch.

The analysis must run without torch, yet it must know which ops save which tensors
for backward, which calls mutate or alias their input, and so on. Hand-written
tables rot with every PyTorch release, so this script derives them from torch's own
metadata (torchgen's ``derivatives.yaml``, the aten operator schemas and tags, the
type stubs, ``inspect`` signatures) and, where metadata is silent, from running ops
and modules on small inputs. The result is committed as
``torchlint_inplace/data/torch_ops.json``; ``tests/test_torch_tables.py`` checks that it
still matches the installed torch.

Usage::

    python scripts/gen_torch_tables.py            # rewrite the JSON (needs torch)
    python scripts/gen_torch_tables.py --check    # exit 1 with a diff summary if stale

Keys of the JSON document
-------------------------
``torch_version``
    ``torch.__version__`` without the local build suffix (``+cpu``).
``regenerate``
    The command that rewrites the file.
``ops``
    Python-visible op name -> ``{"params": [...], "saves": {...}}``. Names are
    ``torch.<name>`` functions, ``Tensor.<name>`` methods and ``torch.nn.functional.<name>``
    functions (one entry, overloads merged), plus ``linalg.<name>`` / ``special.<name>`` /
    ``fft.<name>`` for the submodules. ``params`` lists the argument names: those of
    the primary aten overload first (the one named ``""``/``Tensor``/``input``), in
    positional order, then names that only other overloads have; for a Python-level
    function without aten schema, its ``inspect`` signature. ``saves`` maps what is
    saved for backward -- a parameter name, or ``"result"`` for any output of the op --
    to the inputs whose gradient needs it: it is saved when ANY of them requires grad.
    Only tensors that share storage with an argument or an output are recorded; the
    intermediates an op allocates itself cannot be mutated by the user. Sources:
    1. ``derivatives.yaml`` (via torchgen's ``load_derivatives``) for every op whose
       Default-dispatch formula autograd really runs (not CompositeImplicitAutograd
       ops, whose formulas only serve nested/mkldnn tensors): a saved input counts
       when it is a Tensor / Tensor? / Tensor[] argument saved as itself (not
       ``self.sym_sizes()``, ``self.scalar_type()``...). The condition mirrors torchgen's
       ``guard_for``: the ``var_names`` of the one formula using it when the generated
       code guards the save with ``should_compute_output``, else every differentiable
       input (always so for saved outputs: ``pow`` saves its result even when only
       ``self`` requires grad). Functional overloads merge by union; in-place
       overloads are left out (autograd saves a clone of their ``self``).
    2. A runtime probe for the other (CompositeImplicitAutograd) names -- ``matmul``,
       ``softmax``, ``linear``, ``layer_norm``... : each candidate with an aten schema or a
       Python definition in ``torch.nn.functional`` / ``torch.functional`` is called with
       the first argument template of ``OP_TEMPLATES`` that works, once per tensor
       argument with only that argument requiring grad, under
       ``torch.autograd.graph.saved_tensors_hooks``; packed tensors are matched to
       arguments/outputs by storage pointer. Ops whose output has no ``grad_fn``
       (``argmax``, ``eq``...) are recorded with empty ``saves``.
    The probe also runs on the names that have a formula (when it calls an overload
    with the same parameter names); disagreements are printed to stderr, the formula
    wins (the probe's templates cannot reach every argument, e.g. ``clamp``'s ``max``).
``inplace_methods``
    ``Tensor`` method ending in ``_`` that writes its own data -> out-of-place twin
    (the name without ``_`` when that is a ``Tensor`` method) or ``null``. Candidates:
    every public ``Tensor`` attribute ending in ``_`` whose aten schema marks the first
    argument as written (``Tensor(a!) self``), plus Python-only ones without schema.
    Excluded: methods tagged ``inplace_view`` (metadata only, see next key) and those
    that, when probed, leave ``_version`` unchanged (``requires_grad_``,
    ``share_memory_``: no data changes and autograd cannot notice).
``inplace_view_methods``
    aten ``inplace_view`` methods (``t_``, ``transpose_``, ``squeeze_``, ``unsqueeze_``,
    ``as_strided_``, ``set_``, ``resize_``, ``detach_``...) -> whether calling one bumps the
    version counter (``true``: a saved tensor then makes backward raise; ``false``:
    harmless to autograd; ``null``: could not be probed). They change no values.
``view_methods``
    ``Tensor`` methods returning a view of ``self``: some overload's schema returns
    ``Tensor(a)`` aliasing ``self`` without writing it, and a probe on a contiguous
    tensor (when an argument template fits) returns a different tensor object that
    shares ``self``'s storage. Methods that return ``self`` itself when nothing needs
    converting are not views; they are listed in ``self_returning_methods``.
``self_returning_methods``
    Alias-annotated methods that returned the very same object in the probe
    (``contiguous``, ``to``, ``float``, ``type_as``...): the result aliases the input only
    when no copy was needed.
``multi_view_methods``
    ``Tensor`` methods returning ``Tensor(a)[]`` aliasing ``self`` (``split``, ``chunk``...).
``unprobed_alias_methods``
    Methods whose schema returns an alias of ``self`` but that no template could call
    here (``cuda``, ``pin_memory``, sparse accessors such as ``indices``): a view or
    ``self`` itself, depending on the input.
``view_functions``
    ``torch.<name>`` functions whose name is also a view/multi-view method above
    (``torch.transpose(x, 0, 1)`` aliases ``x``).
``view_attributes``
    ``Tensor`` properties that return a tensor sharing storage with ``self``
    (``T``, ``mT``, ``data``, ``real``...), probed on a small complex tensor.
``inplace_functions``
    ``torch.<name>`` / ``torch.nn.functional.<name>`` ending in ``_`` that bump the
    version of their first argument when probed (or whose schema writes it) ->
    out-of-place twin in the same module, or ``null``.
``inplace_kwarg_functionals``
    ``torch.nn.functional`` function with an ``inplace`` parameter -> its positional index.
``inplace_modules``
    ``torch.nn`` module class with an ``inplace`` ``__init__`` parameter -> its positional
    index (``self`` excluded).
``modules``
    ``torch.nn`` module class -> ``{"saves": [...]}`` with ``"input"`` when the forward
    input's storage is saved for backward and ``"result"`` when the output's is,
    probed in training mode with default parameters (which require grad) and the
    first constructor template of ``MODULE_CTOR_TEMPLATES`` and input shape of
    ``MODULE_INPUT_SHAPES`` that work; modules taking several inputs (losses,
    attention) get that many same-shaped tensors, and only the first is "input"; a module
    no float input runs is tried on integer indices (``Embedding``).
    A module returning a tuple also has ``"outputs"``: its structure as nested lists,
    each tensor ``true`` when it is the one saved (LSTM: ``[true, [false, false]]``).
    A module whose output is its input, or a view of it (``Identity``, ``Flatten``), has
    ``"aliases_input": true``: writing its output in place writes the caller's tensor.
    A module that saves another of its inputs has ``"saved_arguments"``: their positions
    (``BCELoss`` saves its target, position 1).
``modules_not_probed``
    Module classes that no template could construct and run.
``inplace_module_saves``
    Each class of ``inplace_modules`` -> ``["result"]`` when, constructed with
    ``inplace=True`` (first ``MODULE_CTOR_TEMPLATES`` entry that works, training mode) and
    run on a non-leaf float input requiring grad, autograd packs the storage of the tensor
    it overwrote (the input, which is also the output): mutating that tensor again before
    backward then raises. ``[]`` when it packs nothing of that storage (``Hardswish``,
    ``Hardtanh``, ``SiLU``...: they save a clone of the input, which nobody else can
    write). ``null`` when no template made it write its input: it failed to run, or it
    ignores ``inplace`` (``AlphaDropout``, ``FeatureAlphaDropout``). In place, ``ELU`` / ``LeakyReLU``
    ... save their result although out of place they save their input (``modules``).
``inplace_function_saves``
    The same probe for the functions: each ``inplace_functions`` name (``relu_``,
    ``elu_``, ``hardtanh_``...; union over ``torch`` and ``torch.nn.functional`` where both
    define it) and each ``inplace_kwarg_functionals`` name called with ``inplace=True``
    (key: the functional's own name, ``elu``, ``relu``...). Arguments come from the first
    ``OP_TEMPLATES`` entry that runs and bumps the first argument's version; every tensor
    argument requires grad and the first (the one written) is made a non-leaf.
    ``["result"]``: the written tensor's storage is saved; ``[]``: not saved (also for
    ops without gradient, e.g. ``zero_``, ``fill_``); ``null``: no template ran it in place
    (integer-only ``gcd_``, sparse ``resize_as_sparse_``, ``addmv_``, ``index_put_``...).
``overloads``
    For ops whose overloads save different things or return several tensors: op name ->
    one entry per functional aten overload with a Default formula, ``{"params": [...],
    "tensors": [...], "outputs": [...], "saves": {...}}``: its argument names, those typed
    Tensor, its output names (``"result"`` for a single output) and what it saves (inputs
    by name, outputs by output name) -> the inputs that make it save. ``max(x)`` saves
    ``x``; ``max(x, dim)`` saves only its ``indices``. The analysis picks the overload a
    call's arguments fit, and falls back to the merged ``ops`` entry.
``integer_outputs``
    For ops returning several tensors: the outputs of integer dtype when called on a float
    tensor (``indices``): they never require grad.
``module_returning_functions``
    Functions of ``torch.nn.utils`` (and its ``parametrizations`` and ``prune``) that,
    called with a module, returned that very module: ``spectral_norm``, ``weight_norm``...
``module_parameters``
    ``torch.nn`` module classes that hold parameters when built with the first constructor
    template that works (``Linear``, ``Conv2d``, ``Embedding``...; not ``ReLU``, ``MaxPool2d``).
``inplace_module_conditions``
    Each class of ``inplace_modules`` that writes its input in place only sometimes ->
    ``{"training_only": bool, "identity": {arg: value}}``: whether it leaves its input
    alone in eval mode (``Dropout``), and constructor arguments whose value makes it an
    identity that writes nothing (``Dropout(p=0.0)``), probed by building each with
    ``inplace=True`` and checking the input's version.
``inplace_functional_conditions``
    The same for the ``inplace_kwarg_functionals`` (``dropout``: ``p=0.0`` writes nothing, nor
    does ``training=False``), probed with the ``inplace_function_saves`` templates.
``parameter_writing_modules``
    ``torch.nn`` module class -> the constructor argument that makes its forward rewrite its
    own parameters in place (``Embedding(max_norm=...)`` renormalises rows of its weight),
    probed by setting each argument whose default is None to 1.0 and checking the
    parameters' versions after a forward.
``out_functions``
    ``torch.<name>`` functions accepting ``out=`` (an aten overload with an ``out``
    argument, or ``out`` in the Python signature).
``tensor_functions``
    ``torch.<name>`` callables returning a single ``Tensor`` (any overload), from
    ``torch/_C/_VariableFunctions.pyi`` for builtins and return annotations for
    Python-level functions.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import inspect
import itertools
import io
import json
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

REPO_ROOT = Path(__file__).resolve().parent.parent
OUTPUT = REPO_ROOT / "torchlint_inplace" / "data" / "torch_ops.json"
REGENERATE = "python scripts/gen_torch_tables.py"

SUBMODULES = ("linalg", "special", "fft")



@dataclass(frozen=True)
class Operand:
    """A float tensor slot of an argument template (requires grad when probed)."""

    shape: tuple[int, ...]


T = Operand((3, 4))
W = Operand((5, 4))
M = Operand((4, 5))
S = Operand((4, 4))
V = Operand((4,))
B = Operand((2, 3, 4))
BM = Operand((2, 4, 5))
X = Operand((1, 2, 6, 6))
K = Operand((3, 2, 3, 3))

# Argument templates for the op probe: an Operand is a tensor, a list of Operands a
# tensor list, anything else is passed as is. The first template an op accepts is used.
OP_TEMPLATES: tuple[tuple[Any, ...], ...] = (
    (T,),
    (T, T),
    (T, -1),
    (T, M),
    (B, BM),
    (T, W),
    (S, S),
    (T, T, T),
    ([T, T],),
    ("ij,jk->ik", [T, M]),
    (T, (4,)),
    (T, V, V),
    (X,),
    (X, 2),
    (X, K),
    (T, 0, 1),
    (T, 0.5, True),
    (T, 2),
)
# Templates for probing in-place and view methods on a contiguous (3, 4) tensor.
METHOD_TEMPLATES: tuple[tuple[Any, ...], ...] = (
    (),
    (-1,),
    (0,),
    (0, 1),
    (1, 0, 2),
    (T,),
    ((4, 3),),
    ((3, 4),),
    (1, (2, 2)),
    ((4, 3), (1, 4)),
    (torch.float32,),
    (lambda v: v,),
    (T, lambda v, w: v),
)
MODULE_CTOR_TEMPLATES: tuple[tuple[int, ...], ...] = ((), (4,), (4, 4), (4, 4, 3))
MODULE_INPUT_SHAPES: tuple[tuple[int, ...], ...] = (
    (2, 4),
    (2, 4, 6),
    (2, 4, 6, 6),
    (2, 4, 6, 6, 6),
)
# Losses, attention and bilinear layers take several same-shaped inputs.
MODULE_INPUT_COUNTS = (1, 2, 3)
# Input values: away from zero (log, division), then inside (0, 1) for the probability losses
# (BCELoss refuses values above 1).
# Last, integer indices below the smallest constructor size: `Embedding` and `EmbeddingBag`
# take them, and keep them for their weight's gradient (a write to the token ids before
# backward raises).
MODULE_INDEX_RANGE = (0.0, 4.0)
MODULE_INPUT_RANGES: tuple[tuple[float, float], ...] = ((0.5, 1.5), (0.1, 0.9), MODULE_INDEX_RANGE)


# ---------------------------------------------------------------- shared helpers


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Probes call hundreds of ops; their deprecation chatter is not our output."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        yield


def public(name: str) -> bool:
    return not name.startswith("_")


def aten_schemas(name: str) -> list[torch.FunctionSchema]:
    return list(torch._C._jit_get_schemas_for_operator(f"aten::{name}"))


def op_tags(schema: torch.FunctionSchema) -> set[str]:
    packet = getattr(torch.ops.aten, schema.name.split("::", 1)[1])
    return {tag.name for tag in getattr(packet, schema.overload_name or "default").tags}


def is_out_overload(schema: torch.FunctionSchema) -> bool:
    return any(arg.is_out for arg in schema.arguments)


def writes_first_arg(schema: torch.FunctionSchema) -> bool:
    info = schema.arguments[0].alias_info if schema.arguments else None
    return bool(info and info.is_write)


def returns_alias_of_self(schema: torch.FunctionSchema) -> tuple[bool, bool]:
    """(a Tensor return aliases self, a Tensor[] return aliases self), writes excluded.

    ``view(Tensor(a) self) -> Tensor(a)`` shares the alias set; ``split(Tensor(a -> *) self)
    -> Tensor(a)[]`` moves self into the wildcard set its list elements belong to.
    """
    first = schema.arguments[0] if schema.arguments else None
    if first is None or first.name != "self" or first.alias_info is None or first.alias_info.is_write:
        return False, False
    mine = set(first.alias_info.before_set)
    single = listed = False
    for ret in schema.returns:
        if isinstance(ret.type, torch.ListType):
            listed |= "*" in first.alias_info.after_set
        elif ret.alias_info is not None and not ret.alias_info.is_write:
            single |= bool(mine & set(ret.alias_info.before_set))
    return single, listed


def takes_tensor(arg: torch.Argument) -> bool:
    """Tensor, Tensor? or Tensor[]: TorchScript's scalar/list overloads of ``aten::`` have none."""
    kind = arg.type
    while isinstance(kind, (torch.OptionalType, torch.ListType)):
        kind = kind.getElementType()
    return isinstance(kind, torch.TensorType)


def merged_params(schemas: list[torch.FunctionSchema]) -> list[str]:
    """Argument names, primary overload first; see the module docstring."""
    functional = [
        s for s in schemas
        if not is_out_overload(s) and not writes_first_arg(s) and any(takes_tensor(a) for a in s.arguments)
    ]
    ranked = sorted(
        functional or schemas,
        key=lambda s: (s.overload_name not in ("", "Tensor", "input"), schemas.index(s)),
    )
    names: list[str] = []
    for schema in ranked:
        names += [a.name for a in schema.arguments if not a.is_out and a.name not in names]
    return names


def python_names() -> dict[str, list[Callable[..., Any]]]:
    """Every public torch / F / Tensor / submodule name -> the callables bearing it."""
    found: dict[str, list[Callable[..., Any]]] = {}
    for sub in SUBMODULES:
        module = getattr(torch, sub)
        for name in dir(module):
            if public(name) and callable(getattr(module, name)):
                found.setdefault(f"{sub}.{name}", []).append(getattr(module, name))
    for owner in (torch, F, torch.Tensor):
        for name in dir(owner):
            value = getattr(owner, name, None)
            if public(name) and callable(value) and not inspect.isclass(value):
                found.setdefault(name, []).append(value)
    return found


def aten_name(python_name: str) -> str:
    return python_name.replace(".", "_", 1)


def make_tensor(operand: Operand, requires_grad: bool) -> torch.Tensor:
    return (torch.rand(operand.shape) + 0.5).requires_grad_(requires_grad)


def build_args(template: tuple[Any, ...], grad_slot: int | None) -> tuple[list[Any], list[torch.Tensor]]:
    """Instantiate a template; tensor slot ``grad_slot`` (or all when None) requires grad."""
    tensors: list[torch.Tensor] = []

    def tensor(operand: Operand) -> torch.Tensor:
        made = make_tensor(operand, grad_slot is None or grad_slot == len(tensors))
        tensors.append(made)
        return made

    args = [
        tensor(spec) if isinstance(spec, Operand)
        else [tensor(k) for k in spec] if isinstance(spec, list)
        else spec
        for spec in template
    ]
    return args, tensors


def slot_params(template: tuple[Any, ...], params: list[str]) -> list[str | None]:
    """Parameter name of each tensor slot of a template (positional mapping)."""
    names: list[str | None] = []
    for position, spec in enumerate(template):
        name = params[position] if position < len(params) else None
        if isinstance(spec, Operand):
            names.append(name)
        elif isinstance(spec, list):
            names += [name] * len(spec)
    return names


def tensors_in(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in tensors_in(item)]
    return []


def storage_of(tensor: torch.Tensor) -> int:
    """Storage identity; -1 for layouts without one (sparse), which never match."""
    if tensor.layout != torch.strided:
        return -1
    return tensor.untyped_storage().data_ptr()


def run_saving(call: Callable[[], Any]) -> tuple[Any, list[int]]:
    """Run ``call`` and return its result with the storages autograd packed for backward."""
    packed: list[int] = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        packed.append(storage_of(tensor))
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        result = call()
    return result, packed


# ---------------------------------------------------------------- ops: saves


def derivative_infos() -> list[tuple[Any, Any]]:
    """(NativeFunction, Default DifferentiabilityInfo) for each formula autograd really uses.

    Formulas of CompositeImplicitAutograd ops (``matmul``, ``linear``...) only serve other
    dispatch keys (nested, mkldnn); dense tensors decompose, so the probe decides those.
    """
    import torchgen
    from torchgen.gen import parse_native_yaml
    from torchgen.packaged.autograd.load_derivatives import load_derivatives

    packaged = Path(torchgen.__file__).parent / "packaged"
    native_yaml = str(packaged / "ATen" / "native" / "native_functions.yaml")
    tags_yaml = str(packaged / "ATen" / "native" / "tags.yaml")
    infos, _ = load_derivatives(str(packaged / "autograd" / "derivatives.yaml"), native_yaml, tags_yaml)
    natives = {str(f.func): f for f in parse_native_yaml(native_yaml, tags_yaml).native_functions}
    return [
        (natives[str(schema)], per_key["Default"])
        for schema, per_key in infos.items()
        if "Default" in per_key and not natives[str(schema)].has_composite_implicit_autograd_kernel
    ]


def save_conditions(info: Any) -> dict[str, set[str]]:
    """Saved tensor -> inputs whose requiring grad makes autograd save it.

    Mirrors ``guard_for`` in torchgen's ``gen_variable_type.py``: a saved input is
    guarded by ``should_compute_output`` of the single input whose formula uses it
    only when that is unambiguous; otherwise, and for every saved output, it is saved
    as soon as any differentiable input requires grad.
    """
    from torchgen.api.types import BaseCType, ListCType, OptionalCType, tensorListT, tensorT

    tensor_types = (
        BaseCType(tensorT),
        OptionalCType(BaseCType(tensorT)),
        BaseCType(tensorListT),
        ListCType(OptionalCType(BaseCType(tensorT))),
    )
    differentiable = {arg.name for arg in info.args_with_derivatives}
    arg_names = {arg.name for arg in info.func.func.arguments.flat_all}
    has_tensor_list = any(arg.type.is_list_like() for arg in info.func.func.arguments.flat_all if arg.type.is_tensor_like())
    unguarded = has_tensor_list or "backward" in info.name or len(differentiable) <= 1
    conditions: dict[str, set[str]] = {}
    for derivative in info.derivatives:
        for saved in derivative.saved_inputs:
            name = saved.nctype.name
            if name not in arg_names or saved.expr != name or saved.nctype.type not in tensor_types:
                continue
            users = [d for d in info.derivatives if saved in d.saved_inputs]
            guarded = (
                not unguarded
                and saved.nctype.type == BaseCType(tensorT)
                and len(users) == 1
                and len(users[0].var_names) == 1
            )
            conditions.setdefault(name, set()).update(derivative.var_names if guarded else differentiable)
        if derivative.saved_outputs:
            conditions.setdefault("result", set()).update(differentiable)
    return conditions


def yaml_saves() -> dict[str, dict[str, set[str]]]:
    """Python-level name -> saved name -> inputs that trigger saving, overloads merged.

    In-place overloads are left out: autograd saves a clone of their ``self`` and their
    result is ``self``, which ``inplace_methods`` already tells the analysis.
    """
    saves: dict[str, dict[str, set[str]]] = {}
    for native, info in derivative_infos():
        if native.func.name.name.inplace:
            continue
        entry = saves.setdefault(str(native.func.name.name.base), {})
        for saved, needing in save_conditions(info).items():
            entry.setdefault(saved, set()).update(needing)
    return saves


def probe_op_saves(func: Callable[..., Any], params: list[str]) -> dict[str, set[str]] | None:
    """Saved map of ``func`` from the first template it accepts; None if none fits."""
    for template in OP_TEMPLATES:
        names = slot_params(template, params)
        try:
            torch.manual_seed(0)
            args, _ = build_args(template, None)
            result = func(*args)
        except Exception:
            continue
        outputs = tensors_in(result)
        if not outputs or None in names:
            continue
        if not any(t.grad_fn is not None for t in outputs):
            return {}
        saves: dict[str, set[str]] = {}
        for slot, needing in enumerate(names):
            torch.manual_seed(0)
            args, tensors = build_args(template, slot)
            try:
                result, packed = run_saving(lambda: func(*args))
            except Exception:
                continue
            by_storage = {storage_of(t): "result" for t in tensors_in(result)}
            by_storage.update({storage_of(t): name for t, name in zip(tensors, names)})
            for ptr in packed:
                if ptr in by_storage:
                    saves.setdefault(by_storage[ptr], set()).add(needing)
        return saves
    return None


def probe_params(name: str, func: Callable[..., Any]) -> list[str] | None:
    """Names of ``func``'s arguments: its Python signature, else its aten schemas."""
    schemas = aten_schemas(aten_name(name))
    try:
        parameters = inspect.signature(func).parameters.values() if inspect.isfunction(func) else []
    except (TypeError, ValueError):
        parameters = []
    if parameters and not any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return [p.name for p in parameters if p.kind is not p.VAR_KEYWORD]
    return merged_params(schemas) if schemas else None


def derive_ops(log: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    formulas = yaml_saves()
    ops: dict[str, dict[str, Any]] = {}
    for name, funcs in sorted(python_names().items()):
        if name.endswith("_"):
            continue
        probe = first_probe(name, funcs)
        formula = formulas.get(aten_name(name))
        if formula is not None:
            params = merged_params(aten_schemas(aten_name(name)))
            saves = {k: v for k, v in formula.items() if k in params or k == "result"}
            probed = probe[1] if probe and probe[0] == params else None
            if probed is not None and probed != saves:
                log(f"probe differs from derivatives.yaml for {name}: yaml {sorted_saves(saves)} probe {sorted_saves(probed)}")
        elif probe is not None:
            params, saves = probe
        else:
            continue
        ops[name] = {"params": params, "saves": sorted_saves(saves)}
    return ops


def first_probe(name: str, funcs: list[Callable[..., Any]]) -> tuple[list[str], dict[str, set[str]]] | None:
    """(params, saves) from the first callable of ``name`` that an argument template fits.

    Only aten operators and the Python functions of ``torch.nn.functional`` /
    ``torch.functional`` are called: other callables may have side effects.
    """
    for func in funcs:
        in_functional_module = getattr(func, "__module__", "") in ("torch.nn.functional", "torch.functional")
        params = probe_params(name, func)
        if params is None or not (in_functional_module or aten_schemas(aten_name(name))):
            continue
        saves = probe_op_saves(func, params)
        if saves is not None:
            return params, saves
    return None


def sorted_saves(saves: dict[str, set[str]]) -> dict[str, list[str]]:
    return {key: sorted(needing) for key, needing in sorted(saves.items())}


# ---------------------------------------------------------------- mutation and aliasing


def probe_method(name: str) -> tuple[torch.Tensor, Any] | None:
    """Call ``Tensor.<name>`` on a fresh contiguous tensor with the first template that works."""
    for template in METHOD_TEMPLATES:
        torch.manual_seed(0)
        args, _ = build_args(template, -1)
        receiver = make_tensor(T, False)
        try:
            return receiver, getattr(receiver, name)(*args)
        except Exception:
            continue
    return None


def derive_inplace_methods() -> tuple[dict[str, str | None], dict[str, bool | None]]:
    writes: dict[str, str | None] = {}
    metadata: dict[str, bool | None] = {}
    for name in sorted(dir(torch.Tensor)):
        if not public(name) or not name.endswith("_") or name.endswith("__"):
            continue
        schemas = aten_schemas(name)
        if schemas and not any(writes_first_arg(s) for s in schemas):
            continue
        probe = probe_method(name)
        bumped = None if probe is None else probe[0]._version > 0
        if any("inplace_view" in op_tags(s) for s in schemas):
            metadata[name] = bumped
        elif bumped is not False:
            twin = name[:-1]
            writes[name] = twin if hasattr(torch.Tensor, twin) else None
    return writes, metadata


def derive_views() -> dict[str, list[str]]:
    views: list[str] = []
    multi: list[str] = []
    self_returning: list[str] = []
    unprobed: list[str] = []
    for name in sorted(dir(torch.Tensor)):
        if not public(name) or name.endswith("_") or not callable(getattr(torch.Tensor, name)):
            continue
        aliasing = [returns_alias_of_self(schema) for schema in aten_schemas(name)]
        if any(listed for _, listed in aliasing):
            multi.append(name)
        elif any(single for single, _ in aliasing):
            probe = probe_method(name)
            if probe is None:
                unprobed.append(name)
            elif probe[1] is probe[0]:
                self_returning.append(name)
            elif isinstance(probe[1], torch.Tensor) and storage_of(probe[1]) == storage_of(probe[0]):
                views.append(name)
    functions = sorted(n for n in views + multi if callable(getattr(torch, n, None)))
    return {
        "view_methods": views,
        "multi_view_methods": multi,
        "self_returning_methods": self_returning,
        "unprobed_alias_methods": unprobed,
        "view_functions": functions,
    }


def derive_view_attributes() -> list[str]:
    found = []
    for name, attr in sorted(vars(torch._C.TensorBase).items()) + sorted(vars(torch.Tensor).items()):
        if not public(name) or not inspect.isdatadescriptor(attr) or name in found:
            continue
        receiver = torch.randn(2, 3, dtype=torch.complex64)
        try:
            value = getattr(receiver, name)
        except Exception:
            continue
        if isinstance(value, torch.Tensor) and value is not receiver and storage_of(value) == storage_of(receiver):
            found.append(name)
    return sorted(found)


def bumps_first_arg(func: Callable[..., Any]) -> bool | None:
    for template in OP_TEMPLATES:
        torch.manual_seed(0)
        args, tensors = build_args(template, -1)
        try:
            func(*args)
        except Exception:
            continue
        return tensors[0]._version > 0
    return None


def derive_inplace_functions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for module in (torch, F):
        for name in sorted(dir(module)):
            func = getattr(module, name)
            if not public(name) or not name.endswith("_") or not callable(func) or inspect.isclass(func):
                continue
            schemas = aten_schemas(name)
            if any("inplace_view" in op_tags(s) for s in schemas):
                continue
            writes = bumps_first_arg(func)
            if writes is None:
                writes = any(writes_first_arg(s) for s in schemas)
            if writes:
                twin = name[:-1]
                found[name] = found.get(name) or (twin if hasattr(module, twin) else None)
    return dict(sorted(found.items()))


def inplace_index(func: Callable[..., Any], skip_self: bool) -> int | None:
    try:
        params = list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return None
    if skip_self:
        params = params[1:]
    return params.index("inplace") if "inplace" in params else None


def derive_inplace_kwargs() -> tuple[dict[str, int], dict[str, int]]:
    functionals = {
        name: index
        for name in sorted(dir(F))
        if public(name) and callable(getattr(F, name))
        and (index := inplace_index(getattr(F, name), skip_self=False)) is not None
    }
    modules = {
        name: index
        for name, cls in module_classes()
        if (index := inplace_index(cls.__init__, skip_self=True)) is not None
    }
    return functionals, modules


# ---------------------------------------------------------------- modules


def module_classes() -> list[tuple[str, type]]:
    return [
        (name, cls)
        for name, cls in sorted(vars(torch.nn).items())
        if public(name) and inspect.isclass(cls) and issubclass(cls, torch.nn.Module)
    ]


def output_structure(result: Any, packed: list[int], data: torch.Tensor) -> Any:
    """A tuple result as nested lists, each tensor ``true`` when autograd saved it: LSTM's
    ``(output, (h_n, c_n))`` is ``[true, [false, false]]`` on CPU."""
    if isinstance(result, torch.Tensor):
        return storage_of(result) in packed and storage_of(result) != storage_of(data)
    return [output_structure(item, packed, data) for item in result] if isinstance(result, (tuple, list)) else False


def probe_module(cls: type) -> dict[str, Any] | None:
    for ctor in MODULE_CTOR_TEMPLATES:
        try:
            torch.manual_seed(0)
            module = cls(*ctor)
        except Exception:
            continue
        for (low, high), shape, count in itertools.product(MODULE_INPUT_RANGES, MODULE_INPUT_SHAPES, MODULE_INPUT_COUNTS):
            torch.manual_seed(0)
            if (low, high) == MODULE_INDEX_RANGE:
                data = torch.randint(int(low), int(high), shape)  # indices cannot require grad
            else:
                data = (torch.rand(shape) * (high - low) + low).requires_grad_(True)
            others = [torch.rand(shape) * (high - low) + low for _ in range(count - 1)]
            try:
                result, packed = run_saving(lambda: module(data, *others))
            except Exception:
                continue
            outputs = tensors_in(result)
            if not outputs:
                continue
            saved = []
            if storage_of(data) in packed:
                saved.append("input")
            if any(storage_of(t) in packed and storage_of(t) != storage_of(data) for t in outputs):
                saved.append("result")
            entry: dict[str, Any] = {"saves": saved}
            saved_arguments = [index for index, other in enumerate(others, 1) if storage_of(other) in packed]
            if saved_arguments:
                entry["saved_arguments"] = saved_arguments
            if not isinstance(result, torch.Tensor):
                entry["outputs"] = output_structure(result, packed, data)
            elif storage_of(result) == storage_of(data) and not issubclass(cls, torch.nn.Sequential):
                entry["aliases_input"] = True  # a container's output is its layers' (an empty one's, its input)
            return entry
    return None


def derive_modules() -> tuple[dict[str, dict[str, Any]], list[str]]:
    probed: dict[str, dict[str, Any]] = {}
    not_probed: list[str] = []
    for name, cls in module_classes():
        entry = probe_module(cls)
        if entry is None:
            not_probed.append(name)
        else:
            probed[name] = entry
    return probed, not_probed


# ---------------------------------------------------------------- in-place saves


def non_leaf(tensor: torch.Tensor) -> torch.Tensor:
    """A copy of ``tensor`` with a grad_fn: autograd refuses in-place writes to leaves."""
    return tensor * 1


def probe_inplace_saves(call: Callable[[], Any], written: torch.Tensor) -> list[str] | None:
    """``["result"]`` if ``call`` writes ``written`` and packs its storage; None if it fails or writes nothing.

    A clone of the input that autograd packs has its own storage, so it does not count.
    """
    version = written._version
    try:
        _, packed = run_saving(call)
    except Exception:
        return None
    if written._version == version:
        return None
    return ["result"] if storage_of(written) in packed else []


def probe_inplace_module(cls: type) -> list[str] | None:
    for ctor, shape in itertools.product(MODULE_CTOR_TEMPLATES, MODULE_INPUT_SHAPES):
        torch.manual_seed(0)
        try:
            module = cls(*ctor, inplace=True)
        except Exception:
            continue
        data = non_leaf(make_tensor(Operand(shape), True))
        saved = probe_inplace_saves(lambda: module(data), data)
        if saved is not None:
            return saved
    return None


def probe_inplace_function(func: Callable[..., Any], **kwargs: Any) -> list[str] | None:
    for template in OP_TEMPLATES:
        if not isinstance(template[0], Operand):
            continue
        torch.manual_seed(0)
        args, _ = build_args(template, None)
        args[0] = non_leaf(args[0])
        saved = probe_inplace_saves(lambda: func(*args, **kwargs), args[0])
        if saved is not None:
            return saved
    return None


def merged_probes(probes: list[list[str] | None]) -> list[str] | None:
    """Union of the probes that ran (``torch.relu_`` and ``F.relu_``); None if none did."""
    ran = [saved for saved in probes if saved is not None]
    return sorted({item for saved in ran for item in saved}) if ran else None


def derive_inplace_saves(
    inplace_functions: dict[str, Any], inplace_functionals: dict[str, int], inplace_modules: dict[str, int]
) -> tuple[dict[str, list[str] | None], dict[str, list[str] | None]]:
    """(``inplace_module_saves``, ``inplace_function_saves``); see the module docstring."""
    module_saves = {name: probe_inplace_module(getattr(torch.nn, name)) for name in inplace_modules}
    function_saves = {
        name: merged_probes([
            probe_inplace_function(getattr(module, name)) for module in (torch, F) if hasattr(module, name)
        ])
        for name in inplace_functions
    }
    function_saves.update(
        (name, probe_inplace_function(getattr(F, name), inplace=True)) for name in inplace_functionals
    )
    return module_saves, dict(sorted(function_saves.items()))


# ---------------------------------------------------------------- ops: overloads


def derive_overloads() -> dict[str, list[dict[str, Any]]]:
    """Per-overload saves for the names whose overloads differ or return several tensors."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for native, info in derivative_infos():
        schema = native.func
        if schema.name.name.inplace or schema.is_out_fn():
            continue
        args = [arg for arg in schema.arguments.flat_all if arg.name != "out"]
        outputs = [ret.name or "result" for ret in schema.returns] if len(schema.returns) > 1 else ["result"]
        saves = save_conditions(info)
        entry_saves = {name: sorted(needing) for name, needing in saves.items() if name != "result"}
        if "result" in saves:
            saved_outputs = sorted({saved.nctype.name for d in info.derivatives for saved in d.saved_outputs})
            for output in saved_outputs if len(outputs) > 1 else ["result"]:
                if output in outputs:
                    entry_saves[output] = sorted(saves["result"])
        entry = {
            "params": [arg.name for arg in args],
            "tensors": [arg.name for arg in args if arg.type.is_tensor_like()],
            "outputs": outputs,
            "saves": dict(sorted(entry_saves.items())),
        }
        name = str(schema.name.name.base)
        if entry not in by_name.setdefault(name, []):
            by_name[name].append(entry)
    return {
        name: entries
        for name, entries in sorted(by_name.items())
        if name in python_names() and (len({json.dumps(e["saves"], sort_keys=True) for e in entries}) > 1 or any(len(e["outputs"]) > 1 for e in entries))
    }


def derive_integer_outputs(overloads: dict[str, list[dict[str, Any]]]) -> dict[str, list[str]]:
    """Outputs of integer dtype of the several-output ops, by calling each on a float tensor."""
    found: dict[str, list[str]] = {}
    for name, entries in overloads.items():
        outputs = next((e["outputs"] for e in entries if len(e["outputs"]) > 1), None)
        func = getattr(torch, name, None)
        if outputs is None or func is None:
            continue
        for extra in ((1,), (0,), ()):
            try:
                result = func(torch.rand(3, 4), *extra)
            except Exception:
                continue
            if isinstance(result, tuple) and len(result) == len(outputs):
                found[name] = [output for output, value in zip(outputs, result) if not value.is_floating_point()]
                break
    return found


# ---------------------------------------------------------------- modules: behaviour


def built_module(cls: type, **kwargs: Any) -> torch.nn.Module | None:
    for ctor in MODULE_CTOR_TEMPLATES:
        try:
            torch.manual_seed(0)
            return cls(*ctor, **kwargs)
        except Exception:
            continue
    return None


MODULE_FUNCTION_NAMESPACES = ("torch.nn.utils", "torch.nn.utils.parametrizations", "torch.nn.utils.prune")
MODULE_FUNCTION_TEMPLATES: tuple[tuple[Any, ...], ...] = ((), ("weight",), ("weight", 0.5))


def derive_module_returning_functions() -> list[str]:
    """Functions of ``torch.nn.utils`` that take a module and hand back that same object,
    reparametrised (``spectral_norm(nn.Conv2d(...))``): what they return is the module."""
    found = []
    for namespace in MODULE_FUNCTION_NAMESPACES:
        package = importlib.import_module(namespace)
        for name in sorted(dir(package)):
            function = getattr(package, name)
            if not public(name) or not inspect.isfunction(function) or not function.__module__.startswith("torch."):
                continue  # not `prune.abstractmethod`, which abc lends it
            for extra in MODULE_FUNCTION_TEMPLATES:
                module = torch.nn.Linear(4, 4)
                try:
                    result = function(module, *extra)
                except Exception:
                    continue
                if result is module:
                    found.append(f"{namespace}.{name}")
                break
    return found


def derive_module_parameters() -> list[str]:
    found = []
    for name, cls in module_classes():
        module = built_module(cls)
        if module is not None and any(True for _ in module.parameters()):
            found.append(name)
    return found


def version_bumps(module: torch.nn.Module, shape: tuple[int, ...], training: bool) -> int | None:
    module.train(training)
    data = non_leaf(make_tensor(Operand(shape), True))
    version = data._version
    try:
        module(data)
    except Exception:
        return None
    return data._version - version


def writes_input(module: torch.nn.Module, training: bool) -> bool | None:
    """Whether a forward bumps its input's version, on the input shape it takes with the fewest
    bumps in eval mode: an "unbatched" input goes through in-place reshapes of its own
    (`Dropout1d` unsqueezes a 2-D input in place), a batched one does not."""
    runs = [(eval_bumps, shape) for shape in MODULE_INPUT_SHAPES if (eval_bumps := version_bumps(module, shape, False)) is not None]
    if not runs:
        return None
    _, shape = min(runs, key=lambda run: run[0])
    bumps = version_bumps(module, shape, training)
    return None if bumps is None else bumps > 0


def derive_inplace_module_conditions(inplace_modules: dict[str, int]) -> dict[str, dict[str, Any]]:
    conditions: dict[str, dict[str, Any]] = {}
    for name in inplace_modules:
        cls = getattr(torch.nn, name)
        module = built_module(cls, inplace=True)
        if module is None or not writes_input(module, training=True):
            continue
        identity = {}
        for parameter in inspect.signature(cls.__init__).parameters.values():
            if isinstance(parameter.default, float) and not isinstance(parameter.default, bool) and parameter.default != 0.0:
                zeroed = built_module(cls, inplace=True, **{parameter.name: 0.0})
                if zeroed is not None and writes_input(zeroed, training=True) is False:
                    identity[parameter.name] = 0.0
        training_only = writes_input(module, training=False) is False
        if training_only or identity:
            conditions[name] = {"identity": identity, "training_only": training_only}
    return conditions


def function_writes(func: Callable[..., Any], **kwargs: Any) -> bool | None:
    """Whether ``func`` bumps its first argument's version with these keywords, on the first
    ``OP_TEMPLATES`` entry it runs on; None if none runs."""
    for template in OP_TEMPLATES:
        if not isinstance(template[0], Operand):
            continue
        torch.manual_seed(0)
        args, _ = build_args(template, None)
        args[0] = non_leaf(args[0])
        version = args[0]._version
        try:
            func(*args, **kwargs)
        except Exception:
            continue
        return args[0]._version != version
    return None


def derive_inplace_functional_conditions(inplace_functionals: dict[str, int]) -> dict[str, dict[str, Any]]:
    """The same for the functionals with an ``inplace`` flag: a float argument whose 0.0 makes
    the call write nothing (``F.dropout(x, p=0.0)``), and whether ``training=False`` does."""
    conditions: dict[str, dict[str, Any]] = {}
    for name in inplace_functionals:
        func = getattr(F, name)
        if not function_writes(func, inplace=True):
            continue
        parameters = inspect.signature(func).parameters
        identity = {
            parameter.name: 0.0
            for parameter in parameters.values()
            if isinstance(parameter.default, float) and parameter.default != 0.0
            and function_writes(func, inplace=True, **{parameter.name: 0.0}) is False
        }
        training_only = "training" in parameters and function_writes(func, inplace=True, training=False) is False
        if identity or training_only:
            conditions[name] = {"identity": identity, "training_only": training_only}
    return conditions


def derive_parameter_writing_modules() -> dict[str, str]:
    found: dict[str, str] = {}
    for name, cls in module_classes():
        try:
            parameters = inspect.signature(cls.__init__).parameters.values()
        except (TypeError, ValueError):
            continue
        for parameter in parameters:
            if parameter.default is not None or parameter.kind is not parameter.POSITIONAL_OR_KEYWORD:
                continue
            module = built_module(cls, **{parameter.name: 1.0})
            if module is None or not any(True for _ in module.parameters()):
                continue
            versions = [p._version for p in module.parameters()]
            for data in (torch.randint(0, 4, (2, 3)), torch.rand(2, 4)):
                try:
                    with torch.no_grad():
                        module(data)
                except Exception:
                    continue
                if [p._version for p in module.parameters()] != versions:
                    found[name] = parameter.name
                break
    return found


# ---------------------------------------------------------------- torch namespace


def torch_functions() -> list[tuple[str, Callable[..., Any]]]:
    return [
        (name, value)
        for name, value in sorted(vars(torch).items())
        if public(name) and callable(value) and not inspect.isclass(value) and not inspect.ismodule(value)
    ]


def is_python_level(func: Callable[..., Any]) -> bool:
    return inspect.isfunction(func)


def derive_out_functions() -> list[str]:
    found = []
    for name, func in torch_functions():
        if is_python_level(func):
            try:
                accepts = "out" in inspect.signature(func).parameters
            except (TypeError, ValueError):
                accepts = False
        else:
            accepts = any(is_out_overload(s) for s in aten_schemas(name))
        if accepts:
            found.append(name)
    return found


def stub_tensor_returns() -> set[str]:
    stub = Path(torch.__file__).parent / "_C" / "_VariableFunctions.pyi"
    tree = ast.parse(stub.read_text())
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.returns is not None and ast.unparse(node.returns) == "Tensor"
    }


def derive_tensor_functions() -> list[str]:
    from_stub = stub_tensor_returns()
    found = []
    for name, func in torch_functions():
        if is_python_level(func):
            try:
                annotation = inspect.signature(func).return_annotation
            except (TypeError, ValueError):
                continue
            returns_tensor = annotation in (torch.Tensor, "Tensor", "torch.Tensor")
        else:
            returns_tensor = name in from_stub
        if returns_tensor:
            found.append(name)
    return found


# ---------------------------------------------------------------- assembly and CLI


def build_tables(log: Callable[[str], None] = lambda message: None) -> dict[str, Any]:
    """All tables, as written to the JSON file. Deterministic for a given torch."""
    with quiet(), torch.random.fork_rng():
        inplace_methods, inplace_view_methods = derive_inplace_methods()
        inplace_functionals, inplace_modules = derive_inplace_kwargs()
        modules, modules_not_probed = derive_modules()
        inplace_functions = derive_inplace_functions()
        inplace_module_saves, inplace_function_saves = derive_inplace_saves(
            inplace_functions, inplace_functionals, inplace_modules
        )
        overloads = derive_overloads()
        tables = {
            "torch_version": torch.__version__.split("+")[0],
            "regenerate": REGENERATE,
            "ops": derive_ops(log),
            "inplace_methods": inplace_methods,
            "inplace_view_methods": inplace_view_methods,
            **derive_views(),
            "view_attributes": derive_view_attributes(),
            "inplace_functions": inplace_functions,
            "inplace_kwarg_functionals": inplace_functionals,
            "inplace_modules": inplace_modules,
            "modules": modules,
            "modules_not_probed": modules_not_probed,
            "inplace_module_saves": inplace_module_saves,
            "inplace_function_saves": inplace_function_saves,
            "overloads": overloads,
            "integer_outputs": derive_integer_outputs(overloads),
            "module_parameters": derive_module_parameters(),
            "module_returning_functions": derive_module_returning_functions(),
            "inplace_module_conditions": derive_inplace_module_conditions(inplace_modules),
            "inplace_functional_conditions": derive_inplace_functional_conditions(inplace_functionals),
            "parameter_writing_modules": derive_parameter_writing_modules(),
            "out_functions": derive_out_functions(),
            "tensor_functions": derive_tensor_functions(),
        }
    return tables


def render(tables: dict[str, Any]) -> str:
    return json.dumps(tables, indent=1, sort_keys=True) + "\n"


def diff_summary(committed: dict[str, Any], fresh: dict[str, Any]) -> list[str]:
    lines = []
    for key in sorted(set(committed) | set(fresh)):
        old, new = committed.get(key), fresh.get(key)
        if old == new:
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
            lines.append(f"{key}: {len(changed)} entries differ, e.g. {changed[:8]}")
        elif isinstance(old, list) and isinstance(new, list):
            lines.append(
                f"{key}: added {sorted(set(new) - set(old))[:8]}, removed {sorted(set(old) - set(new))[:8]}"
            )
        else:
            lines.append(f"{key}: {old!r} -> {new!r}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed file instead of writing")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    options = parser.parse_args(argv)
    started = time.perf_counter()
    tables = build_tables(log=lambda message: print(message, file=sys.stderr))
    if options.check:
        committed = json.loads(options.output.read_text()) if options.output.exists() else {}
        differences = diff_summary(committed, tables)
        for line in differences:
            print(line)
        return 1 if differences else 0
    options.output.write_text(render(tables))
    print(f"wrote {os.path.relpath(options.output)} in {time.perf_counter() - started:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
