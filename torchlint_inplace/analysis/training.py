"""TIP009: an optimizer step between a forward and a later backward through its graph.

`opt.step()` rewrites, in place, the parameters the optimizer was built with. A loss computed
*before* the step through those parameters (its graph saved them, or what their gradient
needs) and backpropagated *after* it raises at that backward: two losses built from one
forward with a step between their backwards (GAN, actor-critic), a generator output computed
once outside a loop that steps the generator. Each loss knows the saves its graph went through
(`Val.graph`); each step knows which parameter storages it rewrote, or, for an optimizer the
analysis cannot see, that it may rewrite any graph an earlier `backward(retain_graph=True)` kept
alive. A loss recomputed after the step saves the new versions and is fine.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import libcst as cst

from ..diagnostics import Related
from .hazards import Hazard, step_reason
from .imports import dotted
from .model import Form, Reason
from .state import ArgumentBackward, PendingWrite, SaveRecord, Site, State, Step, next_order
from .syntax import keyword_of, literal
from .values import SNAPSHOT, Module, Optimizer, Params, Val, Value, collapse, graph_of, tensors_in

if TYPE_CHECKING:
    from .arguments import Args
    from .protocols import Interpreter


class TrainingLoop:
    def __init__(self, interp: Interpreter) -> None:
        self.i = interp

    def optimizer(self, args: Args) -> Optimizer:
        """`optim.Adam(net.parameters(), lr)`, param groups, `itertools.chain(...)`, lists of them."""
        params = args.get("params", 0)
        return Optimizer(parameter_storages(params) if params is not None else None)

    def backward(
        self, loss: Value, call: cst.Call, state: State, retain: bool | None = None, loss_text: str | None = None
    ) -> None:
        """`loss.backward()` at `call`; replayed from a callee (`retain` given), the call of the
        callee and the caller's expression for the loss."""
        graph = graph_of(loss)
        state.escaped |= graph
        if retain is None:
            flag = next((arg for arg in call.args if keyword_of(arg) == "retain_graph"), None)
            retain = flag is not None and literal(flag.value) is not False
        recorder = self.i.recorder
        if recorder is not None:  # a backward of what the caller passed: the caller replays it
            slots = recorder.slots_of(frozenset().union(*(tensor.storages for tensor in tensors_in(loss))))
            if slots:
                recorder.summary.training.append(ArgumentBackward(slots[0], retain))
        if graph and state.steps:
            self.report(loss, call, graph, state, loss_text)
        if retain:
            state.retained |= graph
        else:
            state.freed |= graph - state.retained

    def report(
        self, loss: Value, call: cst.Call, graph: frozenset[int], state: State, loss_text: str | None = None
    ) -> None:
        records = {
            record.order: record for records in state.saves.values() for record in records if record.order in graph
        }
        if loss_text is None:
            loss_text = self.i.ctx.code_of(call.func.value) if isinstance(call.func, cst.Attribute) else "the loss"
        path, span_of = self.i.ctx.path, self.i.ctx.span_of
        for step in state.steps:
            earlier = [
                record for order, record in sorted(records.items())
                if order < step.order and order not in state.freed and self.rewrites(step, record, state)
            ]  # fmt: skip
            if not earlier:
                continue
            first = earlier[0]

            def explain(first: SaveRecord = first, reload: bool = step.reload) -> Reason:
                return step_reason(path, loss_text, span_of(first.node), span_of(call), reload)

            hazard = Hazard(True, explain)
            self.i.emit(
                Form.OPTIMIZER_STEP,
                step.site,
                f"`{self.i.ctx.code_of(step.site.node)}` updates parameters in place",
                hazard,
                condition=step.condition,
            )

    @staticmethod
    def rewrites(step: Step, record: SaveRecord, state: State) -> bool:
        if step.storages is None:
            return record.order in state.retained  # an optimizer we cannot see: only graphs kept alive
        return bool(record.storages & step.storages)

    def step(self, optimizer: Value, call: cst.Call, state: State) -> None:
        optimizer = collapse(optimizer)
        storages = optimizer.storages if isinstance(optimizer, Optimizer) else None
        self.take(Step(Site(self.i.ctx.path, call), next_order(), storages, state.condition), state)

    def load(self, module: Module, call: cst.Call, state: State) -> None:
        """`model.load_state_dict(weights)` copies into the parameters in place, as a step
        does: a loss computed through them before it cannot be backpropagated after (MAML's
        reset of the fast weights before the meta-backward). The `state_dict()` snapshots kept
        of them are not marked: loading one of them back (the usual restore) changes nothing."""
        self.record(Step(Site(self.i.ctx.path, call), next_order(), module.params, state.condition, reload=True), state)

    def record(self, step: Step, state: State) -> None:
        """A write of parameters that later backwards here see, and this run's callers."""
        state.steps += (step,)
        if self.i.recorder is not None:
            self.i.recorder.summary.training.append(step)

    def take(self, step: Step, state: State) -> None:
        """A step on this path, here or in a callee (`self.backward(...)` stepping the
        discriminator): later backwards here see it, and so do this run's callers; and a
        `state_dict()` kept of the parameters it rewrites reads the new values from now on
        (`best = model.state_dict()` in an epoch loop: the "best" weights are the last)."""
        self.record(step, state)
        if not step.storages:
            return
        for name, value in state.env.items():
            kept = [
                tensor
                for tensor in tensors_in(value)
                if tensor.hidden == SNAPSHOT and tensor.storages & step.storages and tensor.origin is not None
            ]
            earlier = state.stale.get(name)
            if kept and (earlier is None or earlier.form is Form.OPTIMIZER_STEP):
                state.stale[name] = self.snapshot_rewritten(kept, step)
        self.copies_stepped(step, state)

    def copies_stepped(self, step: Step, state: State) -> None:
        """A step over a `copy.copy(model)` rewrites the parameters the copy shares with
        `model`: its holders read the trained weights from now on (DVRL's "fresh" predictor of
        each epoch starts from the last one's)."""
        assert step.storages is not None
        copies = [
            value
            for value in state.env.values()
            if isinstance(value, Module) and value.copied is not None and value.params & step.storages
        ]
        for copy in copies:
            for name, value in state.env.items():
                if (  # the module copied, not the objects holding it
                    isinstance(value, Module)
                    and value.copied is None
                    and value.params == copy.params
                    and name not in state.stale
                ):
                    assert copy.copied is not None
                    pending = self.rewritten_under(
                        copy.copied,
                        step,
                        frozenset(),
                        "`copy.deepcopy(...)` it: `copy.copy` of a module shares its parameters",
                    )
                    state.stale[name] = replace(pending, kept=f"the parameters `{pending.written}` shares")

    def snapshot_rewritten(self, kept: list[Val], step: Step) -> PendingWrite:
        """The write a read of a kept `state_dict()` reports, at the `state_dict()` call a fix
        copies (`copy.deepcopy(model.state_dict())`), the step that rewrote it related. Of the
        snapshots a name may hold, the last taken: `best = model.state_dict()` in the epoch loop,
        not the placeholder before it, which only a run that never improved keeps."""
        engine, path = self.i.engine, self.i.ctx.path
        located = [(engine.locate(snapshot.origin, path), snapshot) for snapshot in kept]
        _, snapshot = max(located, key=lambda pair: pair[0][1].start.line if pair[0] is not None else -1)
        assert snapshot.origin is not None
        return self.rewritten_under(
            snapshot.origin, step, snapshot.storages, "keep a copy: `copy.deepcopy(model.state_dict())`"
        )

    def rewritten_under(self, taken: cst.CSTNode, step: Step, held: frozenset[int], advice: str) -> PendingWrite:
        """The write a read of what `taken` gave reports, at `taken` (the call a fix copies
        instead), the step that rewrote it related."""
        engine = self.i.engine
        located = engine.locate(taken, self.i.ctx.path)
        stepped = engine.locate(step.site.node, step.site.path)
        code = self.i.ctx.code_of(step.site.node)
        related = (
            (lambda: Related(stepped[0], stepped[1], f"`{code}` rewrites the parameters in place here"),)
            if stepped is not None
            else ()
        )
        return PendingWrite(
            Form.OPTIMIZER_STEP,
            Site(located[0], taken) if located is not None else step.site,
            f"`{code}` rewrites",
            self.i.ctx.code_of(taken),
            step.condition,
            related,
            held=held,
            advice=advice,
        )


def parameter_storages(value: Value | None) -> frozenset[int] | None:
    """The parameter storages a `params` argument names; None when any part is not known."""
    from .values import DictVal, Module, Val

    value = collapse(value) if value is not None else None
    if isinstance(value, Params):
        return value.storages
    if isinstance(value, Module):
        return value.params
    if isinstance(value, Val) and value.is_tensor:
        return value.storages
    if isinstance(value, Val) and value.items is not None:
        found: set[int] = set()
        for item in value.items:
            part = parameter_storages(item)
            if part is None:
                return None
            found |= part
        return frozenset(found)
    if isinstance(value, DictVal):
        return parameter_storages(value.get("params"))
    return None


def looks_like_optimizer(call: cst.Call) -> bool:
    """`opt.step()`, `self.optimizer.step()`, `scaler.step(optimizer)`; not `scheduler.step()`."""
    names = [dotted(call.func.value)] + [dotted(arg.value) for arg in call.args]  # type: ignore[attr-defined]
    return any(name is not None and "opt" in name.rsplit(".", 1)[-1].lower() for name in names)
