"""The statement a runtime event ran in, read from the user's source file.

The tracer sees a file and a line; what the line *does* — which names it reads, which it binds,
what it writes in place — is in the source. Each file is parsed once (from `linecache`, so a
script run by path and a module imported from a package read the same text) and the innermost
statement holding a line is found by position, so a statement spread over several lines is read
whole, and a line of a compound statement (`if x.any():`) stands for its header only.
"""

from __future__ import annotations

import ast
import linecache
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import CodeType

# A frame's variables (`f_locals`, `f_globals`), as the evaluation below reads them.
Variables = Mapping[str, object]


@dataclass(frozen=True)
class Statement:
    """A statement's node and, for a compound statement, the header expressions the line is part of."""

    node: ast.stmt
    header: tuple[ast.AST, ...] | None  # None: the whole simple statement

    @property
    def first_line(self) -> int:
        return self.node.lineno

    def parts(self) -> tuple[ast.AST, ...]:
        return (self.node,) if self.header is None else self.header


_trees: dict[str, tuple[list[str], ast.Module | None]] = {}


def _tree(file: str) -> ast.Module | None:
    """The file's syntax tree, parsed again only when `linecache` re-reads the file."""
    lines = linecache.getlines(file)
    cached = _trees.get(file)
    if cached is not None and cached[0] is lines:
        return cached[1]
    try:
        tree = ast.parse("".join(lines)) if lines else None
    except (SyntaxError, ValueError):
        tree = None
    _trees[file] = (lines, tree)
    return tree


_statements: dict[str, tuple[ast.Module, dict[int, Statement | None]]] = {}


def statement_at(file: str, line: int) -> Statement | None:
    """The innermost statement holding `line` (asked for at every write: cached per file)."""
    tree = _tree(file)
    if tree is None:
        return None
    cached = _statements.get(file)
    if cached is None or cached[0] is not tree:
        cached = _statements[file] = (tree, {})
    if line not in cached[1]:
        cached[1][line] = _find_statement(tree, line)
    return cached[1][line]


def _find_statement(tree: ast.Module, line: int) -> Statement | None:
    found: Statement | None = None
    body: list[ast.stmt] = tree.body
    while True:
        node = next((stmt for stmt in body if stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno)), None)
        if node is None:
            return found
        blocks = [block for block in _blocks(node) if block]
        inner = next(
            (block for block in blocks if block[0].lineno <= line <= (block[-1].end_lineno or block[-1].lineno)), None
        )
        if inner is None:
            header = tuple(_header(node))
            return Statement(node, header if blocks else None)
        found, body = Statement(node, tuple(_header(node))), inner


def _blocks(node: ast.stmt) -> list[list[ast.stmt]]:
    blocks = [getattr(node, name, None) or [] for name in ("body", "orelse", "finalbody")]
    blocks += [handler.body for handler in getattr(node, "handlers", [])]
    blocks += [case.body for case in getattr(node, "cases", [])]
    return blocks


def _header(node: ast.stmt) -> Iterator[ast.AST]:
    """The expressions of a compound statement that run outside its blocks."""
    for name in ("test", "iter", "target", "subject"):
        if (part := getattr(node, name, None)) is not None:
            yield part
    yield from getattr(node, "items", [])
    yield from getattr(node, "decorator_list", [])


@lru_cache(maxsize=4096)
def bound_targets(statement: Statement) -> frozenset[str]:
    """What the statement rebinds: `x` for `x = ...`, `batch['obs']` for `batch['obs'] = ...`
    (spelt as `root_key` text, see `target_text`)."""
    node = statement.node
    targets: list[ast.AST] = []
    if statement.header is None and isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif statement.header is None and isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    elif isinstance(node, (ast.For, ast.AsyncFor)):
        targets = [node.target]
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        targets = [item.optional_vars for item in node.items if item.optional_vars is not None]
    names: set[str] = set()
    for target in targets:
        for element in ast.walk(target):
            if isinstance(element, ast.Name) and isinstance(element.ctx, ast.Store):
                names.add(element.id)
            elif (
                isinstance(element, (ast.Subscript, ast.Attribute))
                and isinstance(element.ctx, ast.Store)
                and (text := target_text(element))
            ):
                names.add(text)
    names |= {node.target.id for node in ast.walk(statement.node) if isinstance(node, ast.NamedExpr)}
    return frozenset(names)


def target_text(node: ast.AST) -> str | None:
    """`x`, `batch['obs']` for a constant key of a name, or `self.data` for an attribute of one:
    the aliases the tracer tracks."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and isinstance(node.slice, ast.Constant):
        return f"{node.value.id}[{node.slice.value!r}]"
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


@dataclass(frozen=True)
class InplaceForm:
    """One in-place write a statement spells: `x.add_(y)`, `x += y`, `x[i] = v`, `f(a, out=x)`,
    `F.relu(x, inplace=True)`. `target` is the written expression (`x`, not `x[i]`), `operands`
    what the write reads besides it; `method` tells `t.add_()` from `torch.relu_(t)`."""

    op: str
    target: ast.expr
    operands: tuple[ast.expr, ...]
    method: bool = False


@lru_cache(maxsize=4096)
def inplace_forms(statement: Statement) -> tuple[InplaceForm, ...]:
    forms: list[InplaceForm] = []
    node = statement.node
    if statement.header is None and isinstance(node, ast.AugAssign):
        forms.append(InplaceForm(_AUG_OPS.get(type(node.op), "op") + "=", _root(node.target), (node.value,)))
    if statement.header is None and isinstance(node, ast.Assign):
        forms += [
            InplaceForm("[...] =", _root(target), (node.value,))
            for target in node.targets
            if isinstance(target, ast.Subscript)
        ]
    for part in statement.parts():
        for call in (call for call in ast.walk(part) if isinstance(call, ast.Call)):
            forms += _call_forms(call)
    return tuple(forms)


def evaluated_forms(statement: Statement, local: Variables, global_: Variables) -> list[tuple[InplaceForm, object]]:
    """The statement's in-place forms whose target evaluates in the frame, with the value (so a
    caller keeps the tensors: `torch.relu_(x)` is a form on `torch` and one on `x`)."""
    found = []
    for form in inplace_forms(statement):
        try:
            found.append((form, evaluate(form.target, local, global_)))
        except LookupError:
            continue
    return found


def _call_forms(call: ast.Call) -> list[InplaceForm]:
    name = (
        call.func.attr
        if isinstance(call.func, ast.Attribute)
        else call.func.id
        if isinstance(call.func, ast.Name)
        else ""
    )
    forms = []
    for keyword in call.keywords:
        if keyword.arg == "out":
            forms.append(InplaceForm(name, _root(keyword.value), tuple(call.args)))
        elif (
            keyword.arg == "inplace"
            and call.args
            and not (isinstance(keyword.value, ast.Constant) and not keyword.value.value)
        ):
            forms.append(InplaceForm(name, _root(call.args[0]), tuple(call.args[1:])))
    if name.endswith("_") and not name.startswith("_"):
        # `t.add_(y)`, or `torch.relu_(t)` (told apart by evaluating the receiver)
        if isinstance(call.func, ast.Attribute):
            forms.append(InplaceForm(name, _root(call.func.value), tuple(call.args), method=True))
        if call.args:
            forms.append(InplaceForm(name, _root(call.args[0]), tuple(call.args[1:])))
    return forms


def _root(node: ast.expr) -> ast.expr:
    """`x` for `x[i]`, `x[i][j]` and `x.view(-1)[0]`: the tensor written through the indexing
    and the (view) methods."""
    while True:
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value
        else:
            return node


_AUG_OPS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.MatMult: "@",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.LShift: "<<",
    ast.RShift: ">>",
}


_functions: dict[str, tuple[ast.Module, dict[int, ast.FunctionDef | ast.AsyncFunctionDef]]] = {}


def _function_index(file: str) -> dict[int, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The file's functions by the line of their `def` (or first decorator), cached per parse."""
    tree = _tree(file)
    if tree is None:
        return {}
    cached = _functions.get(file)
    if cached is None or cached[0] is not tree:
        index = {
            min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)]): node
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
        cached = _functions[file] = (tree, index)
    return cached[1]


def function_at(file: str, line: int) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The function whose `def` (or first decorator) is at `line`: a code object's first line."""
    return _function_index(file).get(line)


def calls_in_function(file: str, line: int) -> frozenset[str]:
    """The names the innermost function holding `line` calls (`helper(...)`, `self.extract(...)`)."""
    holding = [
        node for node in _function_index(file).values() if node.lineno <= line <= (node.end_lineno or node.lineno)
    ]
    if not holding:
        return frozenset()
    innermost = max(holding, key=lambda node: node.lineno)
    return frozenset(
        node.func.id if isinstance(node.func, ast.Name) else node.func.attr
        for node in ast.walk(innermost)
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute))
    )


def evaluate(node: ast.expr, local: Variables, global_: Variables) -> object:
    """The value of a name, an attribute chain or a constant-key subscript of a container, read
    from a frame's variables; raises LookupError for anything else (no user code is called
    beyond attribute access)."""
    if isinstance(node, ast.Name):
        for scope in (local, global_, global_.get("__builtins__", {})):
            if isinstance(scope, dict) and node.id in scope:
                return scope[node.id]
        raise LookupError(node.id)
    if isinstance(node, ast.Attribute):
        try:
            return getattr(evaluate(node.value, local, global_), node.attr)
        except LookupError:
            raise
        except Exception as error:
            raise LookupError(node.attr) from error
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        container, key = evaluate(node.value, local, global_), node.slice.value
        try:
            if isinstance(container, dict):
                return container[key]
            if isinstance(container, (list, tuple)) and isinstance(key, int):
                return container[key]
        except (KeyError, IndexError, TypeError) as error:
            raise LookupError(ast.unparse(node)) from error
    raise LookupError(ast.unparse(node))


Span = tuple[int, int, int, int]  # first line, first column, last line, end column


@lru_cache(maxsize=1024)
def _positions(code: CodeType) -> list[tuple[int | None, int | None, int | None, int | None]]:
    return list(code.co_positions())


def instruction_span(code: CodeType, lasti: int) -> Span | None:
    """Where in the source the frame's current instruction is (Python 3.11+ positions)."""
    positions = _positions(code)
    index = lasti // 2
    if not 0 <= index < len(positions):
        return None
    line, end_line, column, end_column = positions[index]
    if line is None or end_line is None or column is None or end_column is None:
        return None
    return line, column, end_line, end_column


def _span(node: ast.expr | ast.stmt) -> Span:
    return node.lineno, node.col_offset, node.end_lineno or node.lineno, node.end_col_offset or 0


def _within(inner: Span, outer: Span) -> bool:
    return outer[:2] <= inner[:2] and inner[2:] <= outer[2:]


@lru_cache(maxsize=4096)
def node_at(statement: Statement, span: Span | None) -> ast.AST | None:
    """The smallest expression of the statement that holds the instruction at `span` (the call
    or operator it is running), or the statement itself."""
    best: ast.expr | ast.stmt | None = None
    for part in statement.parts():
        for node in ast.walk(part):
            if isinstance(node, (ast.expr, ast.stmt)) and span is not None and _within(span, _span(node)):
                if best is None or _within(_span(node), _span(best)):
                    best = node
    return best or (statement.node if statement.header is None else None)


@lru_cache(maxsize=4096)
def aliases_in(node: ast.AST, after: Span | None = None) -> frozenset[str]:
    """The aliases (`x`, `batch['obs']`, `self.data`, see `target_text`) the expression loads; with
    `after`, only those past that position, which Python evaluates after it (`f(x) + x`: the
    second `x`)."""
    found = set()
    for element in ast.walk(node):
        if isinstance(element, (ast.Name, ast.Subscript, ast.Attribute)) and isinstance(element.ctx, ast.Load):
            if after is not None and _span(element)[:2] < after[2:]:
                continue
            if (text := target_text(element)) is not None:
                found.add(text)
    return frozenset(found)


def evaluate_alias(alias: str, local: Variables) -> object:
    """The value of an alias from `target_text` in a frame's locals."""
    return evaluate(_alias_expression(alias), local, {})


@lru_cache(maxsize=1024)
def _alias_expression(alias: str) -> ast.expr:
    return ast.parse(alias, mode="eval").body
