"""Autograd's refusals at the write itself, explained: the user's line, the tensor, why, the fix.

Some in-place writes never reach backward: autograd refuses them on the spot (a leaf that
requires grad, a view of one, one of several views `split`/`chunk`/`unbind` return, the output
of a custom Function or of a module with a full backward hook, a view made under `no_grad`, an
inference tensor) and raises a RuntimeError that names no line. The refusal happens above the
dispatcher, so the tracer's hooks never see the op; everything is read after the fact from the
exception's traceback instead: its innermost user frame is the refused line, the statement's
in-place forms evaluated in that frame give the tensor, and the tensor (its `grad_fn`, its base,
the views the tracer saw made) gives the second line where there is one. Nothing runs while the
code is clean, so this costs nothing until the error.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass
from types import CodeType, FrameType, TracebackType
from typing import NamedTuple

import torch

from .construction import built_at, writing_module
from .diagnosis import diagnose
from .report import Related, TensorInfo, event_block, tensor_info
from .sites import Site, called_module, frame_site, is_internal
from .statements import (
    InplaceForm,
    Statement,
    Variables,
    evaluated_forms,
    function_at,
    inplace_forms,
    instruction_span,
    node_at,
    statement_at,
)

_LEAF_FIX = (
    "to update the tensor itself (a parameter step, a re-initialisation), do it under `with torch.no_grad():` as optimizers do; "
    "to use a changed value in the graph, compute it out of place (`y = w.clamp(...)`, not `w.clamp_(...)`)"
)
_VIEW_FIX = "write out of place (`y = x * s`, not `x *= s`), or write into a copy made first (`x = x.clone()`)"


@dataclass(frozen=True)
class Refusal:
    """One of autograd's refusals: its message, what the refused tensor looks like, and the words."""

    key: str
    message: re.Pattern[str]
    why: str  # {name}: the written expression; `{function}`: a custom Function's class
    fix: str
    matches: Callable[[torch.Tensor], bool] = lambda tensor: True


def _is_leaf(tensor: torch.Tensor) -> bool:
    return tensor.is_leaf and tensor.requires_grad


def _is_view_of_leaf(tensor: torch.Tensor) -> bool:
    return _is_leaf(tensor) or (tensor._base is not None and _is_leaf(tensor._base))


def _has_grad_fn(tensor: torch.Tensor) -> bool:
    return tensor.grad_fn is not None


REFUSALS = (
    Refusal(
        "leaf",
        re.compile(r"^a leaf Variable that requires grad is being used in an in-place operation"),
        "{name} is a leaf that requires grad ({what}): autograd accumulates its .grad and cannot also record an in-place change to it",
        _LEAF_FIX,
        _is_leaf,
    ),
    Refusal(
        "view-of-leaf",
        re.compile(r"^a view of a leaf Variable that requires grad is being used in an in-place operation"),
        "the write goes through a view of {name}, a leaf that requires grad ({what}): it would change the leaf in place",
        _LEAF_FIX,
        _is_view_of_leaf,
    ),
    Refusal(
        "multiple-views",
        re.compile(
            r"^Output \d+ of \w+ is a view and is being modified inplace\. This view is the output of a function that returns multiple views"
        ),
        "{name} is one of several views of one tensor that `split`/`chunk`/`unbind` returned: autograd cannot rewrite the "
        "backward of a multi-output view after an in-place write",
        _VIEW_FIX,
        _has_grad_fn,
    ),
    Refusal(
        "backward-hook-view",
        re.compile(r"^Output \d+ of BackwardHookFunction\w* is a view and is being modified inplace"),
        "{name} is the output of a module with a full backward hook (`register_full_backward_hook`, as Grad-CAM and Captum "
        "install): the hook hands it on as a view that in-place ops may not modify",
        "make the write out of place (`inplace=False` for an activation after the hooked module), or `.clone()` the hooked module's output first",
        _has_grad_fn,
    ),
    Refusal(
        "custom-function-view",
        re.compile(
            r"^Output \d+ of \w+ is a view and is being modified inplace\. This view was created inside a custom Function"
        ),
        "{name} is an output of the custom Function `{function}`, which returned its input as is: an in-place write to it "
        "would bypass the Function's backward",
        "in `{function}.forward`, call `ctx.mark_dirty(x)` for an input it writes and returns (or return `x.clone()`); or `.clone()` its output before writing into it",
        _has_grad_fn,
    ),
    Refusal(
        "no-grad-view",
        re.compile(r"^A view was created in no_grad mode and is being modified inplace with grad mode enabled"),
        "{name} is a view created under `torch.no_grad()` and written here with grad mode on, which autograd cannot follow",
        "create the view and write it under the same grad mode (both inside the `no_grad` block, or both outside)",
        lambda tensor: tensor._base is not None,
    ),
    Refusal(
        "inference-tensor",
        re.compile(r"^Inplace update to inference tensor outside InferenceMode is not allowed"),
        "{name} was created under `torch.inference_mode()`; an inference tensor cannot be written in place outside it",
        "`x = x.clone()` before writing it, or create it under `torch.no_grad()` instead of `torch.inference_mode()`",
        lambda tensor: tensor.is_inference(),
    ),
    Refusal(
        "dirty-not-returned",
        re.compile(r"^Some elements marked as dirty during the forward method were not returned as output"),
        "`{function}.forward` marks a tensor dirty with `ctx.mark_dirty` that it does not return",
        "return every tensor passed to `ctx.mark_dirty` (the input it wrote in place), or drop `mark_dirty` for a tensor it does not write",
    ),
    Refusal(
        "overlapping-operand",
        re.compile(
            r"^unsupported operation: some elements of the input tensor and the written-to tensor refer to a single memory location"
        ),
        "the write reads an operand that overlaps {name} in memory: the result would depend on the order the elements are written",
        "clone the overlapping operand first (`x.add_(x.t().clone())`), or write out of place",
    ),
)


class InplaceRefusalError(RuntimeError):
    """Autograd refused an in-place write on the spot; says at which line, to which tensor, why, and the fix.

    The message starts with autograd's own sentence, so code matching on it keeps working.
    `write` is the refused line; `culprit` the line to edit, which differs when the cause lies
    in a custom Function (its `forward` returned an input it wrote, or marked one dirty);
    `built`, where the torch module that wrote was built (or made in place), when seen.
    """

    def __init__(
        self,
        autograd_message: str,
        refusal: Refusal,
        write: Site,
        culprit: Site,
        op: str | None,
        name: str | None,
        tensor: TensorInfo | None,
        what: str,
        function: str | None,
        related: tuple[Related, ...],
        built: Related | None,
        stack: tuple[Site, ...],
        local: Variables | None = None,
    ) -> None:
        """`local`: the writing frame's variables, which tell a list element from a tensor slice."""
        self.autograd_message = autograd_message
        self.refusal = refusal
        self.write = write
        self.culprit = culprit
        self.op = op
        self.name = name
        self.tensor = tensor
        self.related = related
        self.built = built
        self.stack = stack
        words = {
            "name": f"`{name}`" if name else "the written tensor",
            "what": what,
            "function": function or "the Function",
        }
        self.why = refusal.why.format(**words)
        self.fix = refusal.fix.format(**words)
        self.rule = _rule(op, name, write, function if refusal.key != "backward-hook-view" else None, local)
        super().__init__(self.render())

    def to_dict(self) -> dict[str, object]:
        """The error for `trace --format json`: `mutation` is the line to edit, `refused` the write autograd refused."""
        return {
            "kind": f"refused-{self.refusal.key}",
            "at_write": True,
            "message": self.autograd_message,
            "rule": self.rule,
            "fix": self.fix,
            "why": self.why,
            "tensor": {"name": self.name, **self.tensor.to_dict()} if self.tensor else None,
            "mutation": self.culprit.to_dict(),
            "refused": {"op": self.op, **self.write.to_dict()},
            "related": [related.to_dict() for related in self.related],
            "built": self.built.to_dict() if self.built else None,
            "stack": [site.to_dict() for site in self.stack],
            "text": str(self),
        }

    def render(self) -> str:
        lines = [self.autograd_message, ""]
        if self.tensor is not None:
            lines += [f"  tensor: `{self.name}`, {self.tensor.text}", ""]
        lines += event_block(f"refused: in-place `{self.op}`" if self.op else "raised", self.write)
        lines += [
            line
            for related in (*self.related, *filter(None, [self.built]))
            for line in event_block(related.role, related.site)
        ]
        lines += [f"  why: {self.why}", f"  {self.rule}: {self.fix}"]
        if self.stack:
            lines += ["", "  called from:", *(f"    {site.location} in {site.function}" for site in self.stack)]
        return "\n".join(lines)


def _rule(op: str | None, name: str | None, write: Site, function: str | None, local: Variables | None) -> str:
    """The form's rule (as at backward), TIP005 for a custom Function's fault, and TIP007 for a
    write into an argument of the writing function (a helper's `x[0] = 1.0` on its input)."""
    if function:
        return "TIP005"
    code = diagnose(op or "", write, None, local).code
    root = (name or "").split(".", 1)[0].split("[", 1)[0]
    if code in ("TIP001", "TIP002", "TIP003") and root in write.parameters and root not in ("self", "cls"):
        return "TIP007"
    return code


# ----------------------------------------------------------------------------------- explaining


def explain(error: RuntimeError, views_made_at: Callable[[torch.Tensor], Site | None]) -> InplaceRefusalError | None:
    """The explanation of `error`, or None when it is no in-place refusal (or names no user line).
    `views_made_at` gives the line that made a multi-output view (the tracer saw it made)."""
    message = str(error)
    refusal = next((refusal for refusal in REFUSALS if refusal.message.search(message)), None)
    if refusal is None:
        return None
    frames = _frames(error.__traceback__)
    users = [index for index, entry in enumerate(frames) if not is_internal(entry.frame)]
    if not users:
        return None
    innermost = users[-1]
    user, inner = frames[innermost], frames[innermost + 1 :]
    via = next((module for entry in inner if (module := called_module(entry.frame))), None)
    write = frame_site(user.frame, via, user.line)
    op, name, tensor = _written(user, inner, refusal)
    related: list[Related] = []
    function_class = _function_class(frames, tensor)
    culprit = write
    if function_class is not None and refusal.key in ("custom-function-view", "dirty-not-returned"):
        cause = _function_cause(function_class, refusal.key)
        if cause is not None:
            culprit = cause.site
            related.append(cause)
    if tensor is not None and refusal.key == "multiple-views" and (made := views_made_at(tensor)) is not None:
        related.append(Related("the views were made", made))
    built = (
        built_at(writing_module(entry.frame for entry in reversed(inner))) if via and via.startswith("nn/") else None
    )
    stack = tuple(
        frame_site(entry.frame, None, entry.line) for entry in _without_harness([frames[index] for index in users[:-1]])
    )
    return InplaceRefusalError(
        message.split("\n", 1)[0].strip(),
        refusal,
        write,
        culprit,
        op,
        name,
        tensor_info(tensor) if tensor is not None else None,
        _what(tensor),
        function_class.__qualname__ if function_class is not None else None,
        tuple(related),
        built,
        stack,
        user.frame.f_locals,
    )


class _Entry(NamedTuple):
    frame: FrameType
    line: int
    lasti: int


def _frames(tb: TracebackType | None) -> list[_Entry]:
    frames = []
    while tb is not None:
        frames.append(_Entry(tb.tb_frame, tb.tb_lineno, tb.tb_lasti))
        tb = tb.tb_next
    return frames


def _forms(entry: _Entry) -> list[tuple[InplaceForm, torch.Tensor]]:
    statement = statement_at(entry.frame.f_code.co_filename, entry.line)
    if statement is None:
        return []
    evaluated = evaluated_forms(statement, entry.frame.f_locals, entry.frame.f_globals)
    return [(form, value) for form, value in evaluated if isinstance(value, torch.Tensor)]


def _written(user: _Entry, inner: list[_Entry], refusal: Refusal) -> tuple[str | None, str | None, torch.Tensor | None]:
    """The refused op, the user's expression for the tensor it writes, and the tensor: from the
    innermost frame that spells an in-place form on a tensor that looks as the refusal says (a
    leaf, a view, an inference tensor) — the user's line, or the `torch.relu_(input)` inside the
    `F.relu` it called, where the user's expression is the call's argument."""
    found: tuple[InplaceForm, torch.Tensor, bool] | None = None
    for entry in [*reversed(inner), user]:
        for form, value in _forms(entry):
            if found is None or (refusal.matches(value) and not refusal.matches(found[1])):
                found = (form, value, entry is user)
        if found is not None and refusal.matches(found[1]):
            break
    if found is None:
        return None, None, None
    form, tensor, in_user_code = found
    if in_user_code:
        return form.op, ast.unparse(form.target), tensor
    statement = statement_at(user.frame.f_code.co_filename, user.line)
    call = node_at(statement, instruction_span(user.frame.f_code, user.lasti)) if statement else None
    argument = call.args[0] if isinstance(call, ast.Call) and call.args else None
    return form.op, ast.unparse(argument) if argument is not None else None, tensor


def _what(tensor: torch.Tensor | None) -> str:
    if tensor is None:
        return "a leaf"
    leaf = tensor if tensor._base is None else tensor._base
    return "an nn.Parameter" if isinstance(leaf, torch.nn.Parameter) else "made with requires_grad=True"


def _function_class(frames: list[_Entry], tensor: torch.Tensor | None) -> type | None:
    """The custom Function involved: the one whose output `tensor` is, or the one whose `apply`
    raised (its `cls` is a local of `Function.apply`)."""
    node = tensor.grad_fn if tensor is not None else None
    forward_class = getattr(node, "_forward_cls", None)
    if isinstance(forward_class, type):
        return forward_class
    for entry in reversed(frames):
        owner = entry.frame.f_locals.get("cls") if entry.frame.f_code.co_name == "apply" else None
        if isinstance(owner, type) and issubclass(owner, torch.autograd.Function):
            return owner
    return None


def _function_cause(function_class: type, key: str) -> Related | None:
    """The line of the Function's `forward` that broke its contract: the `ctx.mark_dirty` call for
    a tensor it does not return, else the in-place write to an input (or the `return` of an input
    as is) that made its output a view."""
    forward = getattr(function_class, "forward", None)
    code = getattr(forward, "__code__", None)
    node = function_at(code.co_filename, code.co_firstlineno) if isinstance(code, CodeType) else None
    if node is None or not isinstance(code, CodeType):
        return None
    inputs = {argument.arg for argument in node.args.args[1:]}
    name = function_class.__qualname__
    for statement in _statements(node):
        if key == "dirty-not-returned" and _calls_method(statement, "mark_dirty"):
            return Related(f"`{name}.forward` marks it dirty", _site(code, statement, name))
        if key == "custom-function-view" and _writes_one_of(statement, inputs):
            return Related(
                f"`{name}.forward` wrote its input in place without `ctx.mark_dirty`", _site(code, statement, name)
            )
    for statement in _statements(node):
        if (
            key == "custom-function-view"
            and isinstance(statement, ast.Return)
            and isinstance(statement.value, ast.Name)
            and statement.value.id in inputs
        ):
            return Related(f"`{name}.forward` returned its input as is", _site(code, statement, name))
    return None


def _statements(function: ast.AST) -> list[ast.stmt]:
    return sorted(
        (node for node in ast.walk(function) if isinstance(node, ast.stmt) and node is not function),
        key=lambda node: node.lineno,
    )


def _calls_method(statement: ast.stmt, method: str) -> bool:
    value = statement.value if isinstance(statement, ast.Expr) else None
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == method


def _writes_one_of(statement: ast.stmt, names: set[str]) -> bool:
    if getattr(statement, "body", None):  # a compound statement: its own lines are visited apart
        return False
    return any(
        isinstance(form.target, ast.Name) and form.target.id in names
        for form in inplace_forms(Statement(statement, None))
    )


def _site(code: CodeType, statement: ast.stmt, function: str) -> Site:
    return Site(code.co_filename, statement.lineno, f"{function}.forward", code.co_varnames[: code.co_argcount], None)


def _without_harness(frames: list[_Entry]) -> list[_Entry]:
    """Drops the leading frames of installed packages (click, pytest, pluggy run the user's
    code; the user's own frames follow them)."""
    for index, entry in enumerate(frames):
        file = entry.frame.f_code.co_filename
        if "site-packages" not in file and "dist-packages" not in file:
            return frames[index:]
    return []
