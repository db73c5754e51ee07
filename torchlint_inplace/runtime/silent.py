"""Silent corruption the tracer sees while the code runs: writes that raise nothing but change what
another reader gets. The tracer calls `on_write` for every in-place op and, while a caller is
watched, `on_read` with the tensors every op reads (for a view op, the view it returns: the
elements it exposes, not the whole tensor it was taken from).

- `caller-reads-written` (callers.py): a callee writes a tensor its caller holds under another
  name, and the caller reads that name again, or returns it.
- `state-read-again` (kept.py): a method hands a tensor its object keeps (`self.data[index]`) to a
  callee that writes it, and a later call reads that attribute of the object again.
- `overlapping-operand`: an in-place op reads an operand that overlaps its target without being
  the same view (`x -= x[:, :1]`): the values depend on the order elements are written. Torch
  refuses most such ops itself; broadcast operands slip through.
- `function-saved-then-written`: a custom Function's `forward` saves a tensor with
  `ctx.save_for_backward` and then writes it: backward reads the written values.
- `parameter-view-write`: code writes into an `nn.Parameter` through a view it was handed (a
  module returned a slice of its weight; a hook edits it), with neither the parameter nor a
  module owning it in reach of the writing frames: the model's weights change for good.
- `hook-sees-written-input`: an in-place module with forward hooks rewrites its input, so the
  hooks receive as `input` the rewritten values.
- `hidden-write` (reported by the tracer, which owns the saved tensors): a write through `.data`
  into a tensor an op saved for backward; autograd does not see it, and the gradient uses the
  written values.

Each report names the write and the second line; duplicates (a loop running the same lines)
are counted, not repeated.
"""

from __future__ import annotations

import ast
import dis
from collections.abc import Iterable
from types import CodeType, FrameType

import torch

from .callers import BY_DESIGN, CallerWatches
from .construction import built_at, writing_module
from .diagnosis import diagnose
from .memory import overlaps, same_elements, storage_key
from .report import Related, SilentReport, tensor_info
from .sites import Site, called_module, frame_site, outward, user_frame, user_frames
from .statements import evaluated_forms, function_at, inplace_forms, statement_at


class SilentWatch:
    """Collects the reports, in the order first seen (`reports`)."""

    def __init__(self) -> None:
        self.reports: dict[tuple[object, ...], SilentReport] = {}
        self.callers = CallerWatches(self.add)

    @property
    def waiting(self) -> bool:
        return self.callers.waiting

    def forget(self) -> None:
        self.callers.forget()

    def add(self, report: SilentReport) -> None:
        known = self.reports.get(report.key)
        if known is None:
            self.reports[report.key] = report
        else:
            known.count += 1

    def on_read(self, tensors: Iterable[torch.Tensor], start: FrameType) -> None:
        self.callers.on_read(tensors, start)

    def on_write(self, op: str, targets: list[torch.Tensor], operands: list[torch.Tensor], start: FrameType) -> None:
        found = user_frame(start)
        if found is None:
            return
        frame, via = found
        if via is not None and _by_design(start, frame):
            return  # nn.init, an optimizer, grad clipping: writing the tensors handed to them is their job
        site = frame_site(frame, via)
        module = writing_module(outward(start)) if via is not None and via.startswith("nn/") else None
        built = built_at(module)
        for target in targets:
            if storage_key(target) is None:
                continue
            self._overlapping_operand(op, target, operands, frame, site)
            self._function_saved(op, target, frame, site)
            self._parameter_view(op, target, frame, site, start)
            self._hooked_input(op, target, module, site, built, start)
            self.callers.watch(op, target, frame, via, site, start, module, built)

    def _overlapping_operand(
        self, op: str, target: torch.Tensor, operands: list[torch.Tensor], frame: FrameType, site: Site
    ) -> None:
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

    def _parameter_view(self, op: str, target: torch.Tensor, frame: FrameType, site: Site, start: FrameType) -> None:
        base = target._base
        if not isinstance(base, torch.nn.Parameter) or (site.via or "").startswith(BY_DESIGN):
            return
        for writer in outward(start):  # the frames from the write up to the user's: torch's own module code too
            if any(
                value is base or (isinstance(value, torch.nn.Module) and _owns(value, base))
                for value in writer.f_locals.values()
            ):
                return  # written through the module that owns it (`Embedding`'s padding row), or the parameter itself
            if writer is frame:
                break
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

    def _hooked_input(
        self,
        op: str,
        target: torch.Tensor,
        module: torch.nn.Module | None,
        site: Site,
        built: Related | None,
        start: FrameType,
    ) -> None:
        if module is None or getattr(module, "inplace", False) is not True:
            return
        hooks = [*torch.nn.modules.module._global_forward_hooks.values(), *module._forward_hooks.values()]
        forward = next(
            (
                frame
                for frame in outward(start)
                if frame.f_code.co_name == "forward" and frame.f_locals.get("self") is module
            ),
            None,
        )
        names = forward.f_code.co_varnames[1:2] if forward is not None else ()
        given = forward.f_locals.get(names[0]) if forward is not None and names else None
        if not hooks or not isinstance(given, torch.Tensor) or not overlaps(given, target):
            return
        readers = [code for code in map(_input_reader, hooks) if code is not None]
        if not readers:
            return  # the hooks look at the output only
        related = tuple(
            Related(f"the forward hook `{code.co_qualname}` reads it", _code_site(code)) for code in readers
        )
        kind = type(module).__name__
        self.add(
            SilentReport(
                "hook-sees-written-input",
                f"the in-place `{kind}` rewrote its input, so its forward hooks receive the rewritten values as `input`, not what was passed",
                site,
                related,
                "TIP004",
                f"build the `{kind}` with `inplace=False`, or read the input in a forward pre-hook (it runs before the write)",
                tensor_info(target),
                None,
                built,
            )
        )


def _by_design(start: FrameType, user: FrameType) -> bool:
    """Whether torch code that writes by design runs between the write and the user's frame."""
    for frame in outward(start):
        if frame is user:
            return False
        if (called_module(frame) or "").startswith(BY_DESIGN):
            return True
    return False


def written_name(site: Site | None, frame: FrameType | None = None) -> str | None:
    """The expression the site's statement writes in place (`x` in `x[i] = v`, `s.data` in
    `s.data.clamp_()`); with the frame, the one that holds a tensor."""
    statement = statement_at(site.file, site.line) if site is not None else None
    if statement is None:
        return None
    if frame is not None:
        tensors = [
            form
            for form, value in evaluated_forms(statement, frame.f_locals, frame.f_globals)
            if isinstance(value, torch.Tensor)
        ]
        if tensors:
            return ast.unparse(tensors[0].target)
    forms = inplace_forms(statement)
    return ast.unparse(forms[0].target) if forms else None


def _line_calling(frame: FrameType, method: str, before: int) -> Site | None:
    node = function_at(frame.f_code.co_filename, frame.f_code.co_firstlineno)
    lines = [
        call.lineno
        for call in (ast.walk(node) if node is not None else ())
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == method
        and call.lineno < before
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


def _input_reader(hook: object) -> CodeType | None:
    """The hook's code when it reads its `input` argument (`hook(module, input, output)`; a
    bound method's `self` comes first), else None: hooks that look at the output only, and
    callables whose code is out of reach, are left alone."""
    function = getattr(hook, "__func__", hook)
    code = getattr(function, "__code__", None)
    index = 2 if hasattr(hook, "__self__") else 1
    if code is None or code.co_argcount <= index:
        return None
    name = code.co_varnames[index]
    loads = ("LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE", "LOAD_FAST_CHECK")
    return (
        code
        if any(instruction.opname in loads and instruction.argval == name for instruction in dis.get_instructions(code))
        else None
    )


def _code_site(code: CodeType) -> Site:
    return Site(code.co_filename, code.co_firstlineno, code.co_qualname, code.co_varnames[: code.co_argcount], None)
