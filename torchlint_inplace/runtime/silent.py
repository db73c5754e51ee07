"""Silent corruption the tracer sees while the code runs: writes that raise nothing but change what
another reader gets.

- `caller-reads-written`: a callee (a user function, a module's `forward`, a custom Function, or
  an in-place torch module such as `nn.ReLU(inplace=True)`) writes in place into a tensor its
  caller still holds under another name, and the caller reads that name again afterwards (the
  residual `out = act(x); ... out + x`). A write is the callee's *job* when the callee neither
  returns the tensor nor reads it after writing it (a buffer filled, a batch mixed: the
  out-parameter idiom), or when the caller makes the call as a statement, for its effect; then
  the caller's later reads of what it passed are what it asked for (another alias bound before
  the call, read after it, still sees values it did not ask for).
- `overlapping-operand`: an in-place op reads an operand that overlaps its target without being
  the same view (`x -= x[:, :1]`): the values depend on the order elements are written. Torch
  refuses most such ops itself; broadcast operands slip through.
- `function-saved-then-written`: a custom Function's `forward` saves a tensor with
  `ctx.save_for_backward` and then writes it: backward reads the written values.
- `parameter-view-write`: a function writes into an `nn.Parameter` through a view it was handed
  (a module returned a slice of its weight; a hook edits it) rather than through the module
  owning the parameter: the model's weights change for good.
- `hidden-write` (raised by the tracer, which owns the saved tensors): a write through `.data`
  into a tensor an op saved for backward; autograd does not see it, and the gradient uses the
  written values.

Each report names the write and the second line (the caller's read, the save); duplicates (a
loop running the same lines) are counted, not repeated.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import FrameType

import torch

from .construction import built_at, inplace_module
from .diagnosis import diagnose
from .memory import overlaps, same_elements, storage_key
from .report import Related, TensorInfo, event_block, tensor_info
from .sites import Site, frame_site, outward, user_frame, user_frames
from .statements import (
    Span,
    aliases_in,
    bound_targets,
    evaluate_alias,
    evaluated_forms,
    function_at,
    inplace_forms,
    instruction_span,
    node_at,
    statement_at,
    target_text,
)

# Torch code that writes its caller's tensors by design: optimizers, nn.init, grad clipping.
_BY_DESIGN = ("optim/", "nn/init.py", "nn/utils/")
_MAX_DICT_ITEMS = 64


@dataclass
class SilentReport:
    """One silent corruption: what happened (`summary`), the write, the second line, and the fix."""

    kind: str
    summary: str
    write: Site
    related: tuple[Related, ...]
    rule: str
    fix: str
    tensor: TensorInfo | None
    name: str | None
    built: Site | None = None  # the in-place module's build line, when the write was its call
    count: int = 1

    @property
    def key(self) -> tuple:
        return (self.kind, self.write.file, self.write.line, tuple((r.site.file, r.site.line) for r in self.related))

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "summary": self.summary,
            "rule": self.rule,
            "fix": self.fix,
            "count": self.count,
            "tensor": {"name": self.name, **self.tensor.to_dict()} if self.tensor else None,
            "write": self.write.to_dict(),
            "built": self.built.to_dict() if self.built else None,
            "related": [related.to_dict() for related in self.related],
        }

    def render(self) -> str:
        times = f" ({self.count} times)" if self.count > 1 else ""
        lines = [f"silent corruption{times}: {self.summary}", ""]
        if self.tensor is not None:
            lines += [f"  tensor: {f'`{self.name}`, ' if self.name else ''}{self.tensor.text}", ""]
        lines += event_block("written in place", self.write)
        lines += [line for related in self.related for line in event_block(related.role, related.site)]
        if self.built is not None:
            lines += event_block("by the in-place module built", self.built)
        lines.append(f"  {self.rule}: {self.fix}")
        return "\n".join(lines)


@dataclass
class _CallerWatch:
    """A caller holding, under `stale` names, a tensor a callee wrote; waiting for it to read one.
    The frames are held, not their ids: a returned frame's id is soon another call's (the next
    block's `forward`, reading its own argument)."""

    holder: FrameType
    lasti: int  # the caller's instruction during the write: the call itself
    call: Span | None  # the call's position: in its own statement, only names after it are later reads
    statement: int  # the call's statement (its first line)
    stale: frozenset[str]
    write: Site
    built: Site | None
    callee: str  # how the summary names what wrote (`the in-place ReLU`, `Clip.forward`)
    rule: str
    tensor: TensorInfo
    writer: FrameType | None  # the callee, whose later reads of the tensor vouch for the report
    vouched: bool


@dataclass
class SilentWatch:
    """Collects the reports; the tracer calls `on_write` for every in-place op and `on_read` with
    the other tensors of every op while a caller watch is waiting."""

    reports: dict[tuple, SilentReport] = field(default_factory=dict)
    _watches: dict[int, list[_CallerWatch]] = field(default_factory=dict)

    @property
    def waiting(self) -> bool:
        return bool(self._watches)

    def forget(self) -> None:
        """Drops the waiting watches (and the frames they hold): tracing ended."""
        self._watches.clear()

    def add(self, report: SilentReport) -> None:
        known = self.reports.get(report.key)
        if known is None:
            self.reports[report.key] = report
        else:
            known.count += 1

    # --- writes -------------------------------------------------------------------------

    def on_write(self, op: str, targets: list[torch.Tensor], operands: list[torch.Tensor], start: FrameType) -> None:
        found = user_frame(start)
        if found is None:
            return
        frame, via = found
        site = frame_site(frame, via)
        for target in targets:
            if storage_key(target) is None:
                continue
            self._overlapping_operand(op, target, operands, frame, site)
            self._function_saved(op, target, frame, site)
            self._parameter_view(op, target, frame, site)
            self._watch_callers(op, target, frame, via, site, start)

    def _overlapping_operand(self, op: str, target: torch.Tensor, operands: list[torch.Tensor], frame: FrameType, site: Site) -> None:
        for operand in operands:
            if operand is not target and not same_elements(operand, target) and overlaps(operand, target):
                name = written_name(site, frame)
                self.add(
                    SilentReport(
                        "overlapping-operand",
                        f"`{op}` writes `{name or 'its target'}` while reading an operand that overlaps it: the result depends on the order the elements are written",
                        site,
                        (),
                        diagnose(op, site, None).code,
                        "clone the overlapping operand first (`x -= x[:, :1].clone()`), or write out of place",
                        tensor_info(target),
                        name,
                    )
                )
                return

    def _function_saved(self, op: str, target: torch.Tensor, frame: FrameType, site: Site) -> None:
        if frame.f_code.co_name != "forward" or frame.f_code.co_varnames[:1] != ("ctx",):
            return
        saved = getattr(frame.f_locals.get("ctx"), "to_save", None) or ()
        if not any(isinstance(tensor, torch.Tensor) and overlaps(tensor, target) for tensor in saved):
            return
        save = _line_calling(frame, "save_for_backward", before=site.line)
        self.add(
            SilentReport(
                "function-saved-then-written",
                f"`{site.function}` saved a tensor with `ctx.save_for_backward`, then `{op}` wrote it in place: backward reads the written values",
                site,
                (Related("saved for backward", save),) if save else (),
                "TIP005",
                "save the tensor after writing it (with `ctx.mark_dirty`), or save a copy (`ctx.save_for_backward(x.clone())`)",
                tensor_info(target),
                written_name(site, frame),
            )
        )

    def _parameter_view(self, op: str, target: torch.Tensor, frame: FrameType, site: Site) -> None:
        base = target._base
        if not isinstance(base, torch.nn.Parameter) or (site.via or "").startswith(_BY_DESIGN):
            return
        if any(value is base or (isinstance(value, torch.nn.Module) and _owns(value, base)) for value in frame.f_locals.values()):
            return  # written through the module that owns it, or the parameter itself: deliberate
        caller = next(user_frames(frame.f_back), None)
        name = _parameter_name(frame, base) or "a parameter"
        self.add(
            SilentReport(
                "parameter-view-write",
                f"`{op}` writes into `{name}` through a view of it that `{site.function}` was handed: the model's weights change for good",
                site,
                (Related("handed the view by the call", frame_site(caller)),) if caller else (),
                diagnose(op, site, None).code,
                "write into a copy (`z = z.clone()`) instead of the view of the parameter",
                tensor_info(base),
                name,
            )
        )

    def _watch_callers(self, op: str, target: torch.Tensor, frame: FrameType, via: str | None, site: Site, start: FrameType) -> None:
        """Remembers the callers that still hold `target` under another name."""
        if via is not None and (via.startswith(_BY_DESIGN) or not via.startswith(("nn/modules/", "nn/functional"))):
            return
        levels: list[tuple[FrameType, bool]] = []
        module = inplace_module(outward(start)) if via is not None else None
        built = built_at(module)
        if via is not None:  # a torch in-place module or functional wrote on `frame`'s behalf
            levels.append((frame, True))
        caller = next(user_frames(frame.f_back), None)
        name = frame.f_code.co_name
        if caller is not None and not (name.endswith("_") and not name.endswith("__")):  # `normalize_(x)` says it writes
            levels.append((caller, False))
        callee = f"the in-place `{type(module).__name__ if module is not None else op}`" if via is not None else f"`{site.function}`"
        for holder, direct in levels:
            held = _aliases(holder.f_locals, target)
            statement = statement_at(holder.f_code.co_filename, holder.f_lineno) if held else None
            if statement is None:
                continue
            call = instruction_span(holder.f_code, holder.f_lasti)
            stale = held - bound_targets(statement)
            call_node = node_at(statement, call)
            for_effect = isinstance(statement.node, ast.Expr) and statement.header is None and call_node is statement.node.value
            if for_effect:  # a call made for its effect: its arguments are meant to see it, other aliases are not
                stale -= aliases_in(call_node)
            if not stale:
                continue
            vouched = direct or for_effect or via is not None or _returns_written(frame, target)
            rule = "TIP004" if via is not None else "TIP005" if frame.f_code.co_varnames[:1] == ("ctx",) else "TIP007"
            self._add_watch(
                storage_key(target),
                _CallerWatch(
                    holder, holder.f_lasti, call, statement.first_line, frozenset(stale), site, built, callee, rule,
                    tensor_info(target), None if vouched else frame, vouched,
                ),
                start,
            )

    def _add_watch(self, key: int, watch: _CallerWatch, start: FrameType) -> None:
        """Adds the watch, dropping those whose caller has returned (no longer on the stack)."""
        live = {id(frame) for frame in user_frames(start)}
        self._watches = {
            known_key: kept
            for known_key, watches in self._watches.items()
            if (kept := [known for known in watches if id(known.holder) in live and (known.holder, known.write) != (watch.holder, watch.write)])
        }
        self._watches.setdefault(key, []).append(watch)

    # --- reads --------------------------------------------------------------------------

    def on_read(self, tensors: Iterable[torch.Tensor], start: FrameType) -> None:
        stack: list[FrameType] | None = None
        for tensor in tensors:
            key = storage_key(tensor)
            watches = self._watches.get(key) if key is not None else None
            if not watches:
                continue
            if stack is None:
                stack = list(user_frames(start))
            for watch in list(watches):
                if self._read(watch, tensor, stack):
                    watches.remove(watch)
            if not watches:
                del self._watches[key]

    def _read(self, watch: _CallerWatch, tensor: torch.Tensor, stack: list[FrameType]) -> bool:
        """Whether the watch is done: reported, or its caller gone or not concerned."""
        holder = watch.holder
        if not any(frame is holder for frame in stack):
            return True  # the caller returned: it reads nothing any more
        if holder.f_lasti == watch.lasti:  # still inside the call that wrote (or deeper)
            if not watch.vouched and any(frame is watch.writer for frame in stack):
                watch.vouched = True  # the callee reads what it wrote: it wrote it for its own use
            return False
        if not watch.vouched:
            return True  # the callee only wrote it: the caller asked for the result
        statement = statement_at(holder.f_code.co_filename, holder.f_lineno)
        node = node_at(statement, instruction_span(holder.f_code, holder.f_lasti)) if statement else None
        if node is None:
            return False
        after = watch.call if statement.first_line == watch.statement else None
        for alias in sorted(aliases_in(node, after) & watch.stale):
            try:
                value = evaluate_alias(alias, holder.f_locals)
            except LookupError:
                continue
            if isinstance(value, torch.Tensor) and overlaps(value, tensor):
                self._report(watch, alias, frame_site(holder))
                return True
        return False

    def _report(self, watch: _CallerWatch, alias: str, read: Site) -> None:
        fix = (
            f"pass `inplace=False` where the module is built, or keep a copy for the later read (`{alias}.clone()` before the call)"
            if watch.rule == "TIP004"
            else "clone the argument in the callee before writing it (`x = x.clone()`), or pass the callee a copy"
        )
        if watch.rule == "TIP004":
            summary = (
                f"{watch.callee} at line {watch.write.line} rewrote `{alias}` in place, and `{read.function}` reads `{alias}` "
                f"again at line {read.line}: that read sees the rewritten values, not the ones `{alias}` held"
            )
        else:
            summary = (
                f"{watch.callee} wrote its argument in place at line {watch.write.line}, and its caller `{read.function}` reads "
                f"the same tensor as `{alias}` again at line {read.line}: that read sees the written values"
            )
        self.add(
            SilentReport(
                "caller-reads-written",
                summary,
                watch.write,
                (Related(f"`{alias}` read again", read),),
                watch.rule,
                fix,
                watch.tensor,
                alias,
                watch.built,
            )
        )


def _aliases(local: dict, target: torch.Tensor) -> set[str]:
    """The names (and constant keys of dicts) in a frame that hold a tensor sharing `target`'s elements."""
    found = set()
    for name, value in local.items():
        if isinstance(value, torch.Tensor):
            if overlaps(value, target):
                found.add(name)
        elif isinstance(value, dict) and len(value) <= _MAX_DICT_ITEMS:
            for key, item in value.items():
                if isinstance(key, (str, int)) and isinstance(item, torch.Tensor) and overlaps(item, target):
                    found.add(f"{name}[{key!r}]")
    return found


def _returns_written(frame: FrameType, target: torch.Tensor) -> bool:
    """Whether the callee's `return` gives back what it wrote: a name holding it, or an in-place
    call on one (`return x.clamp_(...)`)."""
    node = function_at(frame.f_code.co_filename, frame.f_code.co_firstlineno)
    holding = _aliases(frame.f_locals, target)
    for statement in ast.walk(node) if node is not None else ():
        if isinstance(statement, ast.Return) and statement.value is not None:
            value = statement.value
            if target_text(value) in holding:
                return True
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and target_text(value.func.value) in holding:
                return value.func.attr.endswith("_")
    return False


def written_name(site: Site | None, frame: FrameType | None = None) -> str | None:
    """The expression the site's statement writes in place (`x` in `x[i] = v`, `s.data` in
    `s.data.clamp_()`); with the frame, the one that holds a tensor."""
    statement = statement_at(site.file, site.line) if site is not None else None
    if statement is None:
        return None
    if frame is not None:
        tensors = [form for form, value in evaluated_forms(statement, frame.f_locals, frame.f_globals) if isinstance(value, torch.Tensor)]
        if tensors:
            return ast.unparse(tensors[0].target)
    forms = inplace_forms(statement)
    return ast.unparse(forms[0].target) if forms else None


def _line_calling(frame: FrameType, method: str, before: int) -> Site | None:
    node = function_at(frame.f_code.co_filename, frame.f_code.co_firstlineno)
    lines = [
        call.lineno
        for call in (ast.walk(node) if node is not None else ())
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == method and call.lineno < before
    ]
    return frame_site(frame, None, max(lines)) if lines else None


def _owns(module: torch.nn.Module, parameter: torch.nn.Parameter) -> bool:
    return any(candidate is parameter for candidate in module.parameters())


def _parameter_name(frame: FrameType, parameter: torch.nn.Parameter) -> str | None:
    """The parameter's qualified name in the outermost module on the stack that holds it."""
    for holder in reversed(list(outward(frame))):
        for value in holder.f_locals.values():
            if isinstance(value, torch.nn.Module):
                name = next((name for name, candidate in value.named_parameters() if candidate is parameter), None)
                if name is not None:
                    return name
    return None

