"""Which TIP rule a runtime in-place write is an instance of, and the one-line fix for it.

The tracer sees an aten op (`copy_`, `add_`, `relu_`, ...) and a user line; the rule the static
linter would report depends on the *form* of that line's statement (`x[i] = v` is TIP002 although
torch runs it as `copy_`), so its source is parsed, the torch module it went through (`via`)
tells the forms no source text shows (an `inplace=True` module's forward, an optimizer's step),
and the writing frame's variables what a name holds (`items[i] += x` on a list is TIP003).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .sites import Site
from .statements import Variables, calls_in_function, evaluate, statement_at

FIXES = {
    "TIP001": "use the out-of-place method (`y = x.{op}(...)` instead of `x.{op}_(...)`), or mutate a `.clone()`",
    "TIP002": "build a new tensor (`torch.where`, `masked_fill`, `index_put`) or assign into `x = x.clone()` first",
    "TIP003": "write `x = x + y` instead of `x += y`, so the saved tensor is left alone",
    "TIP004": "pass `inplace=False` to the activation whose input is still needed",
    "TIP005": "clone the input inside `forward` before mutating it, or call `ctx.mark_dirty(x)` and return it",
    "TIP006": "let the op allocate its result instead of writing into a needed tensor with `out=`",
    "TIP007": "clone the argument (`x = x.clone()`) before mutating it: the caller still needs it",
    "TIP008": "do not write through `.data` / `.detach()`; compute a new tensor out of place",
    "TIP009": "call `backward()` for every loss that uses these parameters before `optimizer.step()`, or recompute the forward after it",
}


@dataclass(frozen=True)
class Diagnosis:
    code: str
    fix: str


def diagnose(
    op: str, write: Site | None, saved: Site | None, local: Variables | None = None, detached: bool = False
) -> Diagnosis:
    """`local`: the writing frame's variables, which tell a list element from a tensor slice
    (`items[i] += x` is an augmented assignment of a tensor, TIP003, not an index write);
    `detached`: the written tensor is an alias outside the graph (`.detach()`) of one that is in it."""
    code = "TIP008" if detached else _rule(op, write, saved, local or {})
    base = op.removesuffix("_")
    return Diagnosis(code, FIXES[code].format(op=base))


def _rule(op: str, write: Site | None, saved: Site | None, local: Variables) -> str:
    if write is None:
        return "TIP001"
    via = write.via or ""
    if via.startswith("optim/"):
        return "TIP009"
    if "ctx" in write.parameters[:1] and write.function.rpartition(".")[2] == "forward":
        return "TIP005"
    statement = _statement(write)
    if via.startswith("nn/") or _has_keyword(statement, "inplace"):
        return "TIP004"
    if _has_keyword(statement, "out"):
        return "TIP006"
    if _writes_through_detached_alias(statement):
        return "TIP008"
    target = _mutated_name(statement)
    if (
        saved is not None
        and (write.file, write.function) != (saved.file, saved.function)
        and target in write.parameters
        and target != "self"
        # the save was made by a function the writer calls (its own helper), not by a caller
        and saved.function.rpartition(".")[2] not in calls_in_function(write.file, write.line)
    ):
        return "TIP007"
    if isinstance(statement, ast.Assign) and any(isinstance(t, ast.Subscript) for t in statement.targets):
        return "TIP002"
    if isinstance(statement, ast.AugAssign):
        return (
            "TIP003"
            if _is_container_element(statement.target, local)
            else "TIP002"
            if isinstance(statement.target, ast.Subscript)
            else "TIP003"
        )
    return "TIP001"


def _statement(write: Site) -> ast.stmt | None:
    """The written line's whole statement (it may span lines); None for a compound statement's header."""
    found = statement_at(write.file, write.line)
    return found.node if found is not None and found.header is None else None


def _is_container_element(target: ast.expr, local: Variables) -> bool:
    """`items[i]` where `items` is a list, tuple or dict in the writing frame."""
    if not isinstance(target, ast.Subscript):
        return False
    try:
        return isinstance(evaluate(target.value, local, {}), (list, tuple, dict))
    except LookupError:
        return False


def _nodes(statement: ast.stmt | None) -> list[ast.AST]:
    return [] if statement is None else list(ast.walk(statement))


def _has_keyword(statement: ast.stmt | None, name: str) -> bool:
    return any(isinstance(node, ast.keyword) and node.arg == name for node in _nodes(statement))


def _writes_through_detached_alias(statement: ast.stmt | None) -> bool:
    for node in _nodes(statement):
        if isinstance(node, ast.Attribute) and node.attr == "data":
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "detach":
            return True
    return False


def _mutated_name(statement: ast.stmt | None) -> str | None:
    """The variable at the root of what the statement writes: `x` in `x[i] = v`, `x += y`, `x.add_(y)`."""
    if isinstance(statement, ast.Assign):
        node = statement.targets[0]
    elif isinstance(statement, ast.AugAssign):
        node = statement.target
    elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        node = statement.value.func
    else:
        return None
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None
