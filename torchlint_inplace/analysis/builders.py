"""Functions that only build: entry points whose run cannot hold a finding of their own file.

A model zoo defines a function per variant (timm's 1,486 `@register_model` factories), each
building a full model through the file's classes and the project's builder helpers:

    @register_model
    def resnet50(pretrained=False, **kwargs):
        model_args = dict(block=Bottleneck, layers=(3, 4, 6, 3))
        return _create_resnet('resnet50', pretrained, **dict(model_args, **kwargs))

Run as entry points, they were 47% of a cold run on timm and reported nothing: a finding in a
file is a write in it, and such a function writes nothing and computes nothing. It calls
classes, library and project functions with constants and configuration, grows dicts and lists,
and returns what it built; nothing it builds is called. The classes it builds are analysed
without it: each one's `forward` runs as an entry on its defaults, its `__init__` with them.

`builds_only` is the syntactic test, over the function and the functions of its file it calls
by name. A finding in the file needs a write in it that the run reaches (a save alone is no
finding, and a write in another file is that file's), or an optimizer step or a backward in it.
So the test fails as soon as the code could write a tensor, run code of the file that might,
or decide an in-place module:

- it has tensor parameters (`analysis.params.tensor_parameters`), assigns into a subscript of
  anything but a dict or list it made (`out = {}`, `dict(...)`) or its `**kwargs`, has an
  augmented assignment or a `del`, or assigns an attribute autograd or a module reads
  (`.data`, `.grad`, `.requires_grad`, `.inplace`, `.forward`); `model.default_cfg = cfg` binds
  a Python attribute and writes no tensor;
- it calls a value it holds (a parameter or a local: `model(x)`, `block_fn(...)`) or what a
  call or subscript returns (`getattr(nn, name)()`, `blocks[i](x)`): a module may run there;
- it calls an in-place function (a name ending in `_`, an `out=` argument), or a method
  other than those that move Python values or keep a module's books (`kwargs.pop`,
  `model.load_state_dict`): any other may apply a module an attribute holds (`model.act(y)`),
  train (`loss.backward()`, `opt.step()`) or run the file's code (`model.init_weights()`);
  calls by name (`dict(...)`, `math.ceil(...)`, a class, a project function of another file)
  and operators compute at most, and what they save no write of this file can break;
- it says `inplace` (a keyword, a string: `dict(inplace=True)`, `{"inplace": True}`) or passes
  a positional `True` to anything but a method (`nn.ReLU(True)`, not `kwargs.pop("x", True)`):
  it may return an in-place module, whose damage its callers in other files decide
  (`Engine.needs_callers`).

What it misses, knowingly: a project function of another file that it calls with a class or
a configuration of this file and that calls what it builds (a `train(Model)` helper running a
`forward` with arguments other than the defaults). Caller files (`Engine.analyze` with
`reaching`) still run every entry that names the checked file, since their runs can reach it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import libcst as cst

from .params import tensor_parameters
from .project import FileContext
from .syntax import child_nodes, literal, named_params

# Methods that move Python values (dict, list, str, logging) or keep a module's books without
# running it: the only methods a builder calls on what it holds. Any other may be a module held
# in an attribute (`model.act(y)`), a training call (`loss.backward()`, `opt.step()`) or code
# of this file.
_BOOKKEEPING_METHODS = frozenset(
    {"get", "pop", "setdefault", "update", "items", "keys", "values", "copy", "append", "extend", "insert",
     "format", "join", "split", "rsplit", "startswith", "endswith", "replace", "lower", "upper", "strip",
     "debug", "info", "warning", "warn", "verify",
     "load_state_dict", "state_dict", "parameters", "named_parameters", "modules", "named_modules",
     "children", "named_children", "add_module", "to", "cpu", "cuda", "eval", "train", "get_classifier",
     "set_grad_checkpointing"}
)  # fmt: skip
# Attributes whose assignment changes what autograd or a module does with a tensor.
_LIVE_ATTRIBUTES = frozenset({"data", "grad", "requires_grad", "inplace", "forward"})
# By exact type, as every walk here does: LibCST's classes are ABCs, whose `isinstance` runs in
# Python (`syntax._is_node`); a parsed tree holds only the concrete classes.
_STORES = frozenset({cst.AugAssign, cst.Del})
_SKIPPED = frozenset({cst.FunctionDef, cst.ClassDef, cst.Lambda})  # not run by the body that defines them
_CONTAINER_TYPES = frozenset({"dict", "list", "set", "OrderedDict", "defaultdict"})


def builds_only(ctx: FileContext, node: cst.FunctionDef) -> bool:
    """Whether a module-level function, run as an entry point, can only build (see above)."""
    known = ctx.builders.get(id(node))
    if known is None:
        ctx.builders[id(node)] = False  # a recursive function: assume the worst while it is read
        known = ctx.builders[id(node)] = not tensor_parameters(node, None, False) and _only_builds(ctx, node)
    return known


def _only_builds(ctx: FileContext, function: cst.FunctionDef) -> bool:
    nodes = list(_body_nodes(function))
    parameters = _parameters(function)
    held = parameters | {name for node in nodes for name in _bound_by(node)}
    containers = _containers(function, nodes, parameters)
    return all(_builds(ctx, node, held, containers) for node in nodes)


def _body_nodes(function: cst.FunctionDef) -> Iterator[cst.CSTNode]:
    """Every node the body runs (the bodies of nested defs and lambdas are not run by it)."""
    stack: list[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        if type(node) not in _SKIPPED:
            yield node
            stack.extend(child_nodes(node))


def _builds(ctx: FileContext, node: cst.CSTNode, held: set[str], containers: set[str]) -> bool:
    """Whether this one node (not its children) keeps the function a builder."""
    kind = type(node)
    if kind in _STORES:
        return False
    if kind is cst.AssignTarget:
        target = cast(cst.AssignTarget, node).target
        if isinstance(target, cst.Subscript):
            return isinstance(target.value, cst.Name) and target.value.value in containers
        return not (isinstance(target, cst.Attribute) and target.attr.value in _LIVE_ATTRIBUTES)
    if kind is cst.Arg:
        keyword = cast(cst.Arg, node).keyword
        return keyword is None or keyword.value not in ("inplace", "out")
    if kind is cst.SimpleString:
        return "inplace" not in cast(cst.SimpleString, node).value
    if kind is cst.Call:
        return _builder_call(ctx, cast(cst.Call, node), held)
    return True


def _builder_call(ctx: FileContext, call: cst.Call, held: set[str]) -> bool:
    func = call.func
    method = isinstance(func, cst.Attribute) and ctx.imports.qualname(func) is None
    if not method and any(arg.keyword is None and literal(arg.value) is True for arg in call.args):
        return False  # `nn.ReLU(True)`, `act_layer(True)`: a positional in-place flag
    if isinstance(func, cst.Name):
        if func.value in held:
            return False
        helper = ctx.functions.get(func.value)
        return helper is None or builds_only(ctx, helper)
    if not isinstance(func, cst.Attribute):
        return False
    name = func.attr.value
    if name.endswith("_") and not name.endswith("__"):
        return False  # in place
    if not method:  # a library's or another project module's function
        return True
    return name in _BOOKKEEPING_METHODS and not any(name in info.methods for info in ctx.classes.values())


def _parameters(function: cst.FunctionDef) -> set[str]:
    params = function.params
    named = named_params(function)
    named += [param for param in (params.star_arg, params.star_kwarg) if isinstance(param, cst.Param)]
    return {param.name.value for param in named}


def _containers(function: cst.FunctionDef, nodes: list[cst.CSTNode], parameters: set[str]) -> set[str]:
    """The names only ever bound to a dict, list or set the function makes, and its `**kwargs`."""
    made: set[str] = set()
    other = set(parameters)
    for node in nodes:
        if type(node) is cst.Assign:
            assign = node
            for target in assign.targets:
                if isinstance(target.target, cst.Name) and _makes_a_container(assign.value):
                    made.add(target.target.value)
                else:
                    other |= _names(target.target)
        elif type(node) is not cst.AssignTarget:  # an `Assign`'s, read with it
            other |= _bound_by(node)
    star = function.params.star_kwarg
    return (made - other) | ({star.name.value} if isinstance(star, cst.Param) else set())


def _makes_a_container(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, (cst.Dict, cst.List, cst.Set, cst.DictComp, cst.ListComp, cst.SetComp)):
        return True
    return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in _CONTAINER_TYPES


# Compared by exact type (these classes have no subclasses): every node of every candidate
# function is asked, and `isinstance` against LibCST's ABCs is slow.
_TARGET_BINDERS = frozenset({cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr})


def _bound_by(node: cst.CSTNode) -> set[str]:
    """The local names a node binds."""
    kind = type(node)
    if kind in _TARGET_BINDERS:
        return _names(node.target)  # type: ignore[attr-defined]
    if kind is cst.WithItem and node.asname is not None:  # type: ignore[attr-defined]
        return _names(node.asname.name)  # type: ignore[attr-defined]
    return set()


def _names(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return {name for element in target.elements for name in _names(element.value)}
    if isinstance(target, cst.StarredElement):
        return _names(target.value)
    return set()  # an attribute or a subscript: no local
