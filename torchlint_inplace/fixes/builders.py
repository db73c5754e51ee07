"""The fix for each form of in-place write: the least surprising rewrite the analysis can justify.

Each builder maps one `Mutation` to a `Fix` (text edits plus applicability) or None when no
rewrite is known to be right. Applicability follows ruff: SAFE only when nothing but the tensor
autograd saved can see a difference — the written tensor is a plain local no other live name
aliases (`mutation.exclusive`) and the rewrite rebinds that name to the same values. Everything
that changes what another name, a caller or a later reader observes is UNSAFE.

Rewrites, by form:
- method `x.op_(a)` as a statement -> `x = x.op(a)` (the out-of-place twin from the torch table);
  `zero_` -> `torch.zeros_like(x)`, `fill_(number)` -> `torch.full_like(x, number)`, other methods
  without a twin (`copy_`, `uniform_`, ...) -> `x = x.clone().op_(a)`, which writes into a fresh
  copy; used as a value (`z = x.mul_(2)`) -> `(x := x.mul(2))`, the same values bound to the same
  names; on anything but a name or attribute chain, no fix.
- `x += y` -> `x = x + y`; `x[i] = v` -> `x = x.clone()` inserted before; `f(..., out=t)` -> `t = f(...)`.
- inplace activations: the module's constructor gets `inplace=False`, `F.relu(x, inplace=True)`
  loses the flag, `torch.relu_(x)` becomes `x = torch.relu(x)` (or `torch.relu(x)` as a value).
- a tensor argument written by a callee (`forward(self, x)`) -> `x = x.clone()` first in the callee.
- custom autograd.Function: clone the input before writing it (a `ctx.mark_dirty` alone would
  keep the caller's tensor modified, so a caller that saved it still raises); drop a
  `mark_dirty` of a tensor that is neither written nor returned.
- a leaf that requires grad (an `nn.Parameter`): wrap the write in `with torch.no_grad():`, what
  the error message asks for — rebinding a Parameter attribute to a plain tensor would raise. A
  leaf a caller hands to a `forward` (`inputs_embeds` requiring grad for an attribution) is an
  input, not a weight being updated: it gets the form's own fix, since under `no_grad` the
  scaling would vanish from its gradient and the caller's tensor would still be rewritten.
- `.data`/`.detach()` writes and optimizer steps: no fix (whether gradients should see the write,
  or where the step belongs, is a modelling decision).
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from ..analysis.hazards import RAISES_NOW_LEAF
from ..analysis.model import FileAnalysis, Mutation
from ..analysis.syntax import named_params
from ..analysis.torch_facts import torch_facts
from ..diagnostics import Applicability, Edit, Fix, Span
from .source_index import SourceIndex, descendants, index_of, rebindable, written_expression

_SAFE, _UNSAFE = Applicability.SAFE, Applicability.UNSAFE

_AUGMENTED = {
    cst.AddAssign: "+", cst.SubtractAssign: "-", cst.MultiplyAssign: "*", cst.DivideAssign: "/",
    cst.FloorDivideAssign: "//", cst.ModuloAssign: "%", cst.PowerAssign: "**", cst.MatrixMultiplyAssign: "@",
    cst.LeftShiftAssign: "<<", cst.RightShiftAssign: ">>", cst.BitAndAssign: "&", cst.BitOrAssign: "|", cst.BitXorAssign: "^",
}  # fmt: skip
# Operands that bind tighter than any binary operator, so `x op v` needs no parentheses.
_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString)


def _applicability(mutation: Mutation) -> Applicability:
    return _SAFE if mutation.exclusive else _UNSAFE


def _fix(description: str, edits: list[Edit | None], applicability: Applicability) -> Fix | None:
    if not edits or any(edit is None for edit in edits):
        return None
    return Fix(description, tuple(edits), applicability)  # type: ignore[arg-type]


# The README's fix table row for writes into a leaf, which every builder below fixes alike.
LEAF_FIX_BRIEF = "the write wrapped in `with torch.no_grad():` (unsafe: gradients no longer see it)"


# A builder as written (from the mutation and the file's index), and as rules call it.
Build = Callable[[Mutation, SourceIndex], Fix | None]
Builder = Callable[[Mutation, FileAnalysis], Fix | None]


def _leaf(build: Build) -> Builder:
    """Writes into a leaf that requires grad are fixed by `torch.no_grad()`, whatever their form;
    a write through a view of another live tensor gets no rewrite (it is how that tensor changes)."""

    def builder(mutation: Mutation, analysis: FileAnalysis) -> Fix | None:
        index = index_of(analysis.module)
        try:
            if mutation.consequence == RAISES_NOW_LEAF and not _forward_input(mutation.node, index):
                return _no_grad(mutation, index)
            return None if mutation.through_view else build(mutation, index)
        except KeyError:  # a node from another file's tree: that file's check fixes it
            return None

    builder.__doc__ = build.__doc__
    return builder


def _forward_input(node: cst.CSTNode, index: SourceIndex) -> bool:
    """The write is into a parameter of a `forward`: an input of the computation."""
    found = _function_and_parameter(node, index)
    return found is not None and found[0].name.value == "forward"


def _no_grad(mutation: Mutation, index: SourceIndex) -> Fix | None:
    statement = (
        mutation.node if isinstance(mutation.node, cst.BaseSmallStatement) else index.statement_of(mutation.node)
    )
    line = index.parent(statement) if statement is not None else None
    if index.torch is None or not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
        return None
    if not isinstance(index.parent(line), (cst.IndentedBlock, cst.Module)):
        return None
    indent, newline = index.indentation(line), index.module.default_newline
    at = index.span(line).start
    edit = Edit(Span(at, at), f"with {index.torch}.no_grad():{newline}{indent}{index.module.default_indent}")
    return _fix(f"Wrap the write in `with {index.torch}.no_grad():`", [edit], _UNSAFE)


@_leaf
def method_call(mutation: Mutation, index: SourceIndex) -> Fix | None:
    """TIP001: `x.op_(a)` -> `x = x.op(a)`."""
    call = mutation.node
    if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute) or not rebindable(call.func.value):
        return None
    receiver, method = index.code(call.func.value), call.func.attr.value
    replacement = _out_of_place(call, receiver, method, index)
    if replacement is None:
        return None
    if index.statement_of(call) is not None:
        return _fix(
            f"Rewrite as `{receiver} = {replacement}`",
            [index.replace(call, f"{receiver} = {replacement}")],
            _applicability(mutation),
        )
    if not isinstance(call.func.value, cst.Name):
        return None
    return _fix(
        f"Rewrite as `({receiver} := {replacement})`",
        [index.replace(call, f"({receiver} := {replacement})")],
        _applicability(mutation),
    )


def _out_of_place(call: cst.Call, receiver: str, method: str, index: SourceIndex) -> str | None:
    twin = torch_facts().inplace_methods.get(method)
    if twin is not None:
        return index.code(call.with_changes(func=call.func.with_changes(attr=cst.Name(twin))))
    arguments = [index.code(arg).rstrip(", ") for arg in call.args]
    if index.torch is not None and method == "zero_" and not arguments:
        return f"{index.torch}.zeros_like({receiver})"
    if index.torch is not None and method == "fill_" and len(arguments) == 1 and _is_number(call.args[0].value):
        return f"{index.torch}.full_like({receiver}, {arguments[0]})"
    return f"{receiver}.clone().{method}({', '.join(arguments)})"


def _is_number(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)):
        return _is_number(expr.expression)
    return isinstance(expr, (cst.Integer, cst.Float))


@_leaf
def augmented_assignment(mutation: Mutation, index: SourceIndex) -> Fix | None:
    """TIP003: `x op= y` -> `x = x op y`."""
    node = mutation.node
    if not isinstance(node, cst.AugAssign) or not rebindable(node.target):
        return None
    operator = _AUGMENTED[type(node.operator)]
    target, value = index.code(node.target), index.code(node.value)
    if not isinstance(node.value, _ATOMS) or node.value.lpar:
        value = value if node.value.lpar else f"({value})"
    text = f"{target} = {target} {operator} {value}"
    return _fix(f"Rewrite as `{text}`", [index.replace(node, text)], _applicability(mutation))


@_leaf
def index_assignment(mutation: Mutation, index: SourceIndex) -> Fix | None:
    """TIP002: `x[i] = v` -> `x = x.clone()` right before; no fix when `v` itself saved the
    tensor (`x[:, :c] = conv(x[:, :c])`): it would save a view of the clone it then writes."""
    base = written_expression(mutation.node)
    if base is None or not rebindable(base) or _saved_by_own_value(mutation, index):
        return None
    name = index.code(base)
    return _fix(
        f"Clone `{name}` before writing into it",
        [index.insert_before(mutation.node, f"{name} = {name}.clone()")],
        _applicability(mutation),
    )


def _saved_by_own_value(mutation: Mutation, index: SourceIndex) -> bool:
    node = mutation.node
    if not isinstance(node, (cst.Assign, cst.AugAssign)):
        return False
    value = index.span(node.value)
    return any(value.start <= related.span.start and related.span.end <= value.end for related in mutation.related)


@_leaf
def out_argument(mutation: Mutation, index: SourceIndex) -> Fix | None:
    """TIP006: `f(..., out=t)` as a statement -> `t = f(...)`; rebinding an attribute is unsafe
    because whoever kept the old buffer (a registered buffer's other holders) no longer sees updates."""
    call = mutation.node
    if not isinstance(call, cst.Call):
        return None
    out = next((arg for arg in call.args if arg.keyword is not None and arg.keyword.value == "out"), None)
    if out is None or index.statement_of(call) is None or not rebindable(out.value):
        return None
    kept = [arg for arg in call.args if arg is not out]
    if kept:
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    target = index.code(out.value)
    text = f"{target} = {index.code(call.with_changes(args=kept))}"
    return _fix(f"Rewrite as `{text}`", [index.replace(call, text)], _applicability(mutation))


def _built_thing(flag: cst.CSTNode, index: SourceIndex) -> str:
    """What the flag builds, as the user named it: `self.act` for `self.act = nn.ReLU(inplace=True)`,
    else the class called (`nn.ReLU`), else "the module" (`m.inplace = True`, a config value)."""
    call = index.ancestor(flag, cst.Call)
    if not isinstance(call, cst.Call) or not any(arg.value is flag for arg in call.args):
        return "the module"
    assign = index.parent(call)
    if isinstance(assign, (cst.Assign, cst.AnnAssign)):
        target = assign.targets[0].target if isinstance(assign, cst.Assign) else assign.target
        if isinstance(target, (cst.Name, cst.Attribute)):
            return f"`{index.code(target)}`"
    return f"`{index.code(call.func)}`"


@_leaf
def inplace_activation(mutation: Mutation, index: SourceIndex) -> Fix | None:
    """TIP004: the out-of-place form. Unsafe: later readers of the input see it un-activated
    (usually the point), and other call sites of a shared module change too."""
    if mutation.flag is not None:
        # The literal `inplace=True` (or `m.inplace = True`) the module was built with.
        return _fix(
            f"Build {_built_thing(mutation.flag, index)} with `inplace=False`",
            [index.replace(mutation.flag, "False")],
            _UNSAFE,
        )
    call = mutation.node
    if not isinstance(call, cst.Call):
        return None
    qualname = index.imports.qualname(call.func) or ""
    short = qualname.rsplit(".", 1)[-1]
    facts = torch_facts()
    if short in facts.inplace_functions:
        return _inplace_function(call, short, facts.inplace_functions[short], index)
    if short in facts.inplace_kwarg_functionals:
        edit = _switch_off(call, facts.inplace_kwarg_functionals[short], index, drop=True)
        return _fix(f"Call `{index.code(call.func)}` out of place", [edit], _UNSAFE)
    return _module_constructor(call, index)


def _inplace_function(call: cst.Call, short: str, twin: str | None, index: SourceIndex) -> Fix | None:
    if twin is None or not isinstance(call.func, cst.Attribute):
        return None
    replacement = index.code(call.with_changes(func=call.func.with_changes(attr=cst.Name(twin))))
    first = call.args[0].value if call.args else None
    if index.statement_of(call) is not None and first is not None and rebindable(first):
        replacement = f"{index.code(first)} = {replacement}"
    return _fix(f"Use `{replacement}`", [index.replace(call, replacement)], _UNSAFE)


def _switch_off(call: cst.Call, position: int, index: SourceIndex, drop: bool) -> Edit | None:
    """`inplace=True` -> removed (functionals, `drop`) or `inplace=False` (constructors)."""
    keyword = next((arg for arg in call.args if arg.keyword is not None and arg.keyword.value == "inplace"), None)
    if keyword is not None and drop:
        kept = [arg for arg in call.args if arg is not keyword]
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return index.replace(call, index.code(call.with_changes(args=kept)))
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    flag = keyword if keyword is not None else (positional[position] if position < len(positional) else None)
    return index.replace(flag.value, "False") if flag is not None else None


def _module_constructor(call: cst.Call, index: SourceIndex) -> Fix | None:
    """`self.act(x)` -> `inplace=False` where `__init__` builds `self.act`."""
    if not (
        isinstance(call.func, cst.Attribute)
        and isinstance(call.func.value, cst.Name)
        and call.func.value.value == "self"
    ):
        return None
    cls = index.ancestor(call, cst.ClassDef)
    if not isinstance(cls, cst.ClassDef):
        return None
    attribute = call.func.attr.value
    modules = torch_facts().inplace_modules
    edits = []
    for assign in _self_assignments(cls, attribute):
        for built in descendants(assign.value, cst.Call):
            short = (index.imports.qualname(built.func) or "").rsplit(".", 1)[-1]
            if short in modules and _flag_on(built, modules[short]):
                edits.append(_switch_off(built, modules[short], index, drop=False))
    return _fix(f"Build `self.{attribute}` with `inplace=False`", edits, _UNSAFE)


def _self_assignments(cls: cst.ClassDef, attribute: str) -> list[cst.Assign]:
    found = []
    for assign in descendants(cls, cst.Assign):
        for target in assign.targets:
            expr = target.target
            if (
                isinstance(expr, cst.Attribute)
                and isinstance(expr.value, cst.Name)
                and expr.value.value == "self"
                and expr.attr.value == attribute
            ):
                found.append(assign)
    return found


def _flag_on(call: cst.Call, position: int) -> bool:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "inplace":
            return isinstance(arg.value, cst.Name) and arg.value.value == "True"
    positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
    flag = positional[position] if position < len(positional) else None
    return isinstance(flag, cst.Name) and flag.value == "True"


def _function_and_parameter(node: cst.CSTNode, index: SourceIndex) -> tuple[cst.FunctionDef, str] | None:
    """The function around a write and the name written, when that name is one of its parameters."""
    written = written_expression(node)
    function = index.ancestor(node, cst.FunctionDef)
    if not isinstance(written, cst.Name) or not isinstance(function, cst.FunctionDef):
        return None
    parameters = {param.name.value for param in named_params(function)}
    return (function, written.value) if written.value in parameters else None


def _prologue(function: cst.FunctionDef, text: str, index: SourceIndex) -> Edit:
    """`text` as the first statement of `function`, after its docstring."""
    body = function.body
    if not isinstance(body, cst.IndentedBlock):
        return index.insert_before(body.body[0], text)
    first = body.body[0]
    if function.get_docstring(clean=False) is not None:
        if len(body.body) == 1:
            return index.insert_after(first.body[0], text)  # type: ignore[attr-defined]
        first = body.body[1]
    return index.insert_before(first.body[0] if isinstance(first, cst.SimpleStatementLine) else first, text)


@_leaf
def argument_write(mutation: Mutation, index: SourceIndex) -> Fix | None:
    """TIP007: `x = x.clone()` first in the callee; unsafe, the caller no longer sees the write."""
    found = _function_and_parameter(mutation.node, index)
    if found is None:
        return None
    function, name = found
    clone = f"{name}.clone()"
    if _defaults_to_none(function, name):  # `forward(self, input_ids=None, inputs_embeds=None)`
        clone = f"{clone} if {name} is not None else None"
    return _fix(
        f"Clone `{name}` on entry to `{function.name.value}`",
        [_prologue(function, f"{name} = {clone}", index)],
        _UNSAFE,
    )


def _defaults_to_none(function: cst.FunctionDef, name: str) -> bool:
    return any(
        param.name.value == name and isinstance(param.default, cst.Name) and param.default.value == "None"
        for param in named_params(function)
    )


@_leaf
def autograd_function(mutation: Mutation, index: SourceIndex) -> Fix | None:
    """TIP005: clone the input before `forward` writes it (and drop its now wrong `mark_dirty`);
    drop a `mark_dirty` of a tensor `forward` neither writes nor returns."""
    node = mutation.node
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "mark_dirty":
        marking = index.statement_of(node)
        if marking is None or mutation.kind != "dirty-neither":
            return None
        return _fix(f"Remove `{index.code(node)}`", [index.delete(marking)], _SAFE)
    found = _function_and_parameter(node, index)
    statement = node if isinstance(node, cst.BaseSmallStatement) else index.statement_of(node)
    if found is None or statement is None:
        return None
    function, name = found
    edits: list[Edit | None] = [index.insert_before(statement, f"{name} = {name}.clone()")]
    after = index.span(statement).end
    for call in descendants(function, cst.Call):
        if (
            _marks_dirty(call, name)
            and index.span(call).start > after
            and (marked := index.statement_of(call)) is not None
        ):
            edits.append(index.delete(marked))
    return _fix(f"Write into a clone of `{name}`", edits, _UNSAFE)


def _marks_dirty(call: cst.Call, name: str) -> bool:
    return (
        isinstance(call.func, cst.Attribute)
        and call.func.attr.value == "mark_dirty"
        and len(call.args) == 1
        and isinstance(call.args[0].value, cst.Name)
        and call.args[0].value.value == name
    )
