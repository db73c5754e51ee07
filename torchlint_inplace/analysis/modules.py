"""torch.nn modules as values: built from their constructor's arguments, applied to tensors.

What a module does comes from the tables generated from torch: whether it writes its input in
place (an `inplace` flag that is true, and, for dropout, only in training and only when `p` is
not 0), what it saves for backward, whether it holds parameters, whether its forward rewrites
its own weight (`Embedding(max_norm=...)`). The flag may come from anywhere construction code
gets it: a literal, a default, `**params`, a `partial`, a configuration value nobody passed
(then the module writes under that condition). Where the in-place behaviour was decided (the
literal a user edits, else the call that built the module) is kept: findings point there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, cast

import libcst as cst

from ..diagnostics import Related
from .arguments import Args
from .conditions import TRAINING, Assumption, Condition
from .model import Form
from .state import Site, State
from .torch_facts import OutputStructure, WriteConditions
from .values import (
    NOT_TENSOR,
    Const,
    DictVal,
    Grad,
    Module,
    Sym,
    Val,
    Value,
    collapse,
    fresh_storage,
    is_tensor,
    options_of,
    with_graph,
)
from .vocabulary import WEIGHT_SAVED_FOR_INPUT_GRAD

if TYPE_CHECKING:
    from .protocols import Interpreter

_CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict"})
ALWAYS: Condition = frozenset()


class ModuleFactory:
    def __init__(self, interp: Interpreter) -> None:
        self.i = interp
        self.facts = interp.facts

    # ----------------------------------------------------------------- construction

    def construct(self, kind: str, call: cst.Call | None, args: Args, state: State) -> Module:
        origin = call
        if kind in _CONTAINERS:
            return self.container(kind, args, origin)
        writes, culprit, flag = self.inplace_flag(kind, args, call, state)
        config: list[tuple[str, Value]] = []
        for name in self.facts.inplace_module_conditions.get(kind, _NO_CONDITIONS).identity:
            value = args.get(name, 0 if name == "p" else None)
            if value is not None:
                config.append((name, value))
        writer = self.facts.parameter_writing_modules.get(kind)
        if writer is not None:
            value = args.get(writer)
            if value is not None and not (isinstance(value, Const) and value.value is None):
                config.append((writer, value))
                # Only a call-less instance (its class's defaults) has no call, and then no arguments.
                culprit = culprit or Site(self.i.ctx.path, cast(cst.Call, call))
        params = fresh_storage() if kind in self.facts.module_parameters else frozenset()
        return Module(kind, kind, writes, culprit, flag, params=params, config=tuple(config), origin=origin)

    def container(self, kind: str, args: Args, origin: cst.CSTNode | None) -> Module:
        items: list[Value] = []
        keys: list[str] | None = None
        for value in args.positional:
            value = collapse(value)
            if kind == "ModuleDict" or isinstance(value, DictVal):
                if isinstance(value, DictVal):
                    keys = keys or []
                    for key, item in value.entries:
                        keys.append(str(key))
                        items.append(item)
                continue
            if isinstance(value, Val) and value.items is not None and not value.is_tensor and kind != "Sequential":
                items.extend(value.items)
            else:
                items.append(value)
        module_items = tuple(item for item in items)
        params = frozenset().union(*(item.params for item in module_items if isinstance(item, Module)))
        written = isinstance(origin, cst.Call) and not any(arg.star for arg in origin.args)
        exact = written and len(module_items) == len(args.positional) and keys is None
        return Module(
            kind,
            kind,
            items=module_items,
            keys=tuple(keys) if keys is not None else None,
            params=params,
            origin=origin,
            exact=exact,
        )

    def inplace_flag(
        self, kind: str, args: Args, call: cst.Call | None, state: State
    ) -> tuple[Condition | None, Site | None, cst.CSTNode | None]:
        """Whether the module writes its input, under which condition, where that was decided
        (a `Site`), and the literal to switch off."""
        index = self.facts.inplace_modules.get(kind)
        if index is None or self.facts.inplace_module_saves.get(kind, frozenset()) is None:
            return None, None, None  # no flag, or one the module ignores (AlphaDropout)
        flag = args.get("inplace", index)
        if flag is None:
            return None, None, None
        condition = self.truth_condition(flag, "inplace")
        if condition is None:
            return None, None, None
        literal = next(
            (option for _, option in options_of(flag) if isinstance(option, Const) and option.value is True), None
        )
        if literal is not None and literal.origin is not None:
            # The literal a user edits: the finding points at the call it is written in (else at
            # the literal itself: a `partial`, a dict of arguments), and its fix switches it off.
            written_here = call is not None and any(arg.value is literal.origin for arg in call.args)
            node = call if call is not None and written_here else literal.origin
            return condition, Site(literal.origin_path or self.i.ctx.path, node), literal.origin
        return condition, Site(self.i.ctx.path, call) if call is not None else None, None

    def truth_condition(self, value: Value, name: str) -> Condition | None:
        """The condition under which a flag is true: always, never (None), or a configuration."""
        found: list[Condition] = []
        for condition, option in options_of(value):
            if isinstance(option, Const):
                if option.value:
                    found.append(condition)
            elif isinstance(option, Sym):
                default = option.default
                against = default is not None and not default.value
                found.append(
                    condition
                    | {Assumption(option.text, "", True, repr(default.value) if default is not None else None, against)}
                )
            elif isinstance(option, Val) and not option.is_tensor:
                found.append(condition)  # unknown: it may be true
        if not found:
            return None
        return min(found, key=len)

    def with_attribute(
        self, module: Module, attr: str, value: Value, statement: cst.CSTNode, state: State
    ) -> Module | None:
        """`m.inplace = True`: the module rebuilt with that attribute (None: not one that matters)."""
        if attr != "inplace" or module.kind is None or module.kind not in self.facts.inplace_modules:
            return None
        condition = self.truth_condition(value, "inplace")
        literal = value.origin if isinstance(value, Const) and value.value is True else None
        return replace(module, writes=condition, culprit=Site(self.i.ctx.path, statement), flag=literal)

    # ----------------------------------------------------------------- application

    def write_condition(self, module: Module, state: State) -> Condition | None:
        """When applying the module writes its input: its flag's condition, and the table's
        (dropout writes only in training, and nothing with `p=0`)."""
        if module.writes is None:
            return None
        condition = module.writes
        conditions = self.facts.inplace_module_conditions.get(module.kind or "")
        if conditions is None:
            return condition
        for name in conditions.identity:
            value = module.setting(name)
            identity = conditions.identity[name]
            parts = self.nonzero_condition(value, name, identity)
            if parts is None:
                return None
            condition = condition | parts
        if conditions.training_only:
            mode = state.assumed.get((TRAINING, ""))
            if mode is not None and not mode.holds:
                return None
            condition = condition | {Assumption(TRAINING, "", True)}
        return condition

    def nonzero_condition(self, value: Value | None, name: str, identity: object) -> Condition | None:
        """The condition under which `value` differs from the `identity` argument value."""
        if value is None:
            return ALWAYS
        found: list[Condition] = []
        for condition, option in options_of(value):
            if isinstance(option, Const):
                if option.value != identity:
                    found.append(condition)
            elif isinstance(option, Sym):
                default = option.default
                against = default is not None and default.value == identity
                found.append(
                    condition
                    | {
                        Assumption(
                            option.text,
                            f"!= {identity!r}",
                            True,
                            repr(default.value) if default is not None else None,
                            against,
                        )
                    }
                )
            else:
                found.append(condition)
        return min(found, key=len) if found else None

    def apply_torch(self, module: Module, call: cst.Call, args: Args, state: State, label: str) -> Value:
        value = collapse(args.positional[0]) if args.positional else NOT_TENSOR
        if module.kind == "Sequential" and module.items is not None:
            return self.i.calls.apply_sequence(module, call, args, state)
        if module.kind in _CONTAINERS:
            return NOT_TENSOR
        if not is_tensor(value):
            if args.tensors():
                return self.i.calls.opaque_result(args, state)
            return NOT_TENSOR
        assert isinstance(value, Val)
        kind = module.kind or ""
        saves = self.facts.module_saves.get(kind, frozenset())
        condition = self.input_write(module, state)
        writes = condition is not None
        first = call.args[0].value if call.args else call
        if writes:
            assert condition is not None
            # In place, what is saved differs: ELU keeps the tensor it overwrote, Hardswish a copy.
            saves = self.facts.inplace_module_saves.get(kind) or frozenset()
            site, calls = self.culprit_site(module, call, label)
            self.i.write(
                Form.INPLACE_ACTIVATION,
                call,
                first,
                value,
                state,
                f"`{label}` with inplace=True rewrites",
                hidden_from_reader=True,
                site=site,
                condition=condition,
                calls=calls,
                flag=module.flag,
                written=args.input_text,
            )
            result = value
        elif kind in self.facts.modules_aliasing_input:
            result = value  # `nn.Identity()` hands back the caller's tensor: a write to it writes theirs
        else:  # out of place, or an inplace flag the module ignores (AlphaDropout)
            # A module that saves its input does so for its own weights: its output requires grad.
            grad = Grad.MAYBE if ("input" in saves or module.params) and self.i.grad_enabled else None
            result = self.i.new_tensor([value], grad=grad)
        if self.i.autocast is not None:
            result = replace(result, dtype=self.i.autocast)
        structure = self.facts.module_outputs.get(kind)
        outputs, saved = self.outputs(structure, result) if structure is not None and not writes else (result, [result])
        made: set[int] = set()
        if self.i.grad_enabled:
            if "input" in saves and not writes:
                # Saved for the module's own weight gradient, whatever the input is. (In place,
                # autograd saves a copy of the input it is about to overwrite.)
                argument = self.i.ctx.code_of(call.args[0].value) if call.args else "its input"
                made.add(self.i.save(state, value, label, argument, call).order)
            for position in self.facts.module_saved_arguments.get(kind, ()):
                # `criterion(output, label)`: BCELoss keeps the label its gradient is taken against
                other = collapse(args.positional[position]) if position < len(args.positional) else NOT_TENSOR
                if isinstance(other, Val) and other.is_tensor and not writes:
                    text = self.i.ctx.code_of(call.args[position].value) if position < len(call.args) else "its target"
                    made.add(self.i.save(state, other, label, text, call).order)
            if "result" in saves and (value.grad > Grad.NO or module.params):
                # A module with weights saves its output for their gradient whatever its input (LSTM)
                certain = value.grad > Grad.UNKNOWN or bool(module.params)
                for tensor in saved:
                    made.add(self.i.save(state, tensor, label, "its result", call, certain=certain).order)
            made |= self.save_parameters(module, label, call, state, value)
        self.rewrite_own_weight(module, call, label, state)
        if not made:
            return outputs
        return (
            replace(result, graph=result.graph | frozenset(made))
            if outputs is result
            else with_graph(outputs, frozenset(made))
        )

    def outputs(self, structure: OutputStructure, like: Val) -> tuple[Value, list[Val]]:
        """The tuple a module returns (`output, (h_n, c_n) = lstm(x)`), each tensor its own, and
        those autograd saves."""
        if isinstance(structure, list):
            parts = [self.outputs(item, like) for item in structure]
            return Val(items=tuple(part for part, _ in parts)), [tensor for _, saved in parts for tensor in saved]
        tensor = replace(like, storages=fresh_storage())
        return tensor, [tensor] if structure else []

    def save_parameters(self, module: Module, label: str, call: cst.Call, state: State, value: Val) -> set[int]:
        """A module with parameters keeps them (or what its weight gradient needs) in the graph:
        an optimizer step before the backward through it rewrites what the graph expects."""
        if not module.params or not self.i.grad_enabled:
            return set()
        if module.kind in WEIGHT_SAVED_FOR_INPUT_GRAD and value.grad is Grad.NO:
            return set()  # `nn.Linear(3, 1)(torch.randn(2, 3))`: only the input is kept, for the weight's gradient
        return {self.i.save(state, value, label, "its parameters", call, storages=module.params).order}

    def rewrite_own_weight(self, module: Module, call: cst.Call, label: str, state: State) -> None:
        """`Embedding(max_norm=...)` renormalises rows of its weight in place on every call."""
        writer = self.facts.parameter_writing_modules.get(module.kind or "")
        if writer is None or module.setting(writer) is None or not module.params:
            return
        weight = Val(module.params, Grad.LEAF, origin=module.origin)
        records = [record for record in state.saves_of(weight) if record.what != "its parameters"]
        if not records:
            return
        site, calls = self.culprit_site(module, call, label)
        previous = {storage: state.saves.get(storage) for storage in module.params}
        for storage in module.params:  # the leaf check does not apply: it writes under no_grad
            state.saves[storage] = frozenset(records)
        self.i.write(
            Form.INPLACE_ACTIVATION,
            call,
            call.func,
            Val(module.params, Grad.MAYBE, origin=module.origin),
            state,
            f"`{label}` with {writer}= renormalises the weight of",
            site=site,
            calls=calls,
        )
        for storage, records_before in previous.items():
            if records_before is not None:
                state.saves[storage] = records_before

    def input_write(self, module: Module, state: State) -> Condition | None:
        """When a torch module writes its input in place (None: never)."""
        condition = self.write_condition(module, state)
        kind = module.kind or ""
        in_place = self.facts.inplace_module_saves.get(kind, self.facts.module_saves.get(kind, frozenset()))
        return condition if condition is not None and in_place is not None else None

    def culprit_site(
        self, module: Module, call: cst.Call, label: str
    ) -> tuple[Site | None, tuple[Callable[[], Related], ...]]:
        """Findings on an in-place module point at where its behaviour was decided, with the call
        that ran it as a related location."""
        culprit = module.culprit
        if not isinstance(culprit, Site) or culprit.node is call:
            return None, ()
        span_of, path = self.i.ctx.span_of, self.i.ctx.path
        return culprit, (lambda: Related(path, span_of(call), f"`{label}` runs here"),)


_NO_CONDITIONS = WriteConditions(False, {})
