"""Which parameters of a function hold tensors, and whether its body runs with grad enabled.

Unknown objects are not assumed to be tensors: a `forward`'s arguments are (unless a default or
an annotation says otherwise), and so is any parameter annotated `Tensor`; nothing else is.
"""

from __future__ import annotations

import libcst as cst

from .classes import ClassInfo
from .imports import Imports, dotted
from .syntax import annotation_text, child_nodes, descendants, is_self, is_tensor_annotation
from .values import Grad
from .vocabulary import INFERENCE_MODE

_GRAD_OFF_DECORATORS = frozenset(
    {"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.inference_mode"}
)


_TENSOR_LIST_ANNOTATIONS = frozenset(
    f"{container}[{name}{tail}]"
    for container in ("list", "List", "tuple", "Tuple", "Sequence", "Iterable")
    for name in ("Tensor", "torch.Tensor")
    for tail in ("", ",...")
)


def function_grad_enabled(func: cst.FunctionDef, cls: ClassInfo | None, imports: Imports) -> bool:
    """False where nothing is recorded for backward: no_grad code and custom Function bodies.

    Initialisation code is not special: nothing it computes is saved, and an in-place write
    to a Parameter outside no_grad raises there as anywhere else.
    """
    if cls is not None and cls.is_autograd_function:
        return False  # Function.forward runs under no_grad; its contract is TIP005's business
    for decorator in func.decorators:
        target = decorator.decorator
        target = target.func if isinstance(target, cst.Call) else target
        if imports.qualname(target) in _GRAD_OFF_DECORATORS:
            return False
    return True


def function_inference_mode(func: cst.FunctionDef, imports: Imports) -> bool:
    """Decorated `@torch.inference_mode()`: what the body makes are inference tensors, which its
    callers may not write in place outside inference mode (CosyVoice's mel)."""
    for decorator in func.decorators:
        target = decorator.decorator
        call = target if isinstance(target, cst.Call) else None
        if imports.qualname(call.func if call is not None else target) not in INFERENCE_MODE:
            continue
        switch = call.args[0].value if call is not None and call.args else None
        return not (isinstance(switch, cst.Name) and switch.value == "False")
    return False


def tensor_parameters(func: cst.FunctionDef, cls: ClassInfo | None, is_module: bool) -> dict[str, Grad]:
    """Tensor parameters and what is known of their grad: a `forward`'s are activations."""
    is_forward = is_entry(func, cls, is_module)
    params = list(func.params.posonly_params) + list(func.params.params) + list(func.params.kwonly_params)
    if cls is not None and params and not _is_static(func):
        params = params[1:]  # self / cls / ctx
    fed = _fed_to_submodules(func, cls) if cls is not None and is_module and not is_forward else set()
    found = {}
    for param in params:
        annotation = _annotation_kind(param)
        activation = is_forward or param.name.value in fed
        if annotation is False or (annotation is None and (not activation or _non_tensor_default(param))):
            continue
        found[param.name.value] = Grad.MAYBE if activation else Grad.UNKNOWN
    return found


def _fed_to_submodules(func: cst.FunctionDef, cls: ClassInfo) -> set[str]:
    """A module's other methods' parameters that go straight into one of the layers its class
    sets on `self` (`x = self.rpn_conv(x)` in mmdet's `forward_single`, which the base class's
    `forward` maps over the feature maps): activations, like a `forward`'s, whoever calls the
    method. Not those the body uses as a list of them, nor what goes to `self.apply(fn)` and the
    other methods nn.Module has."""
    fed: set[str] = set()
    layers = cls.assigned_on_self()
    for node in descendants(func.body):
        if isinstance(node, cst.Call) and node.args and not node.args[0].star and node.args[0].keyword is None:
            callee, first = node.func, node.args[0].value
            if (
                isinstance(callee, cst.Attribute)
                and is_self(callee.value)
                and callee.attr.value in layers
                and isinstance(first, cst.Name)
            ):
                fed.add(first.value)
    return fed - _used_as_sequences(func, fed) if fed else fed


def is_entry(func: cst.FunctionDef, cls: ClassInfo | None, is_module: bool) -> bool:
    """A module's `forward` (or an nn.Module's `__call__`): what its callers pass are activations."""
    name = func.name.value
    return cls is not None and (name == "forward" or (name == "__call__" and is_module))


def tensor_list_parameters(func: cst.FunctionDef, entry: bool = False) -> list[str]:
    """Parameters annotated as a list or tuple of tensors (`inputs: list[Tensor]`), and an
    entry's unannotated parameters that its body only ever indexes with a number or a name, takes
    the length of or iterates: YOLO's `Detect.forward(self, x)` is handed its feature maps in a
    list (`x[i] = self.m[i](x[i])` rebinds a slot); a tensor would be sliced, reshaped or
    passed whole somewhere."""
    params = (*func.params.params, *func.params.kwonly_params)
    annotated = [param.name.value for param in params if annotation_text(param.annotation) in _TENSOR_LIST_ANNOTATIONS]
    unannotated = {param.name.value for param in params if entry and param.annotation is None and param.default is None}
    return annotated + sorted(_used_as_sequences(func, unannotated)) if unannotated else annotated


_SEQUENCE_CONSUMERS = frozenset({"len", "enumerate", "zip", "reversed"})


def _used_as_sequences(func: cst.FunctionDef, names: set[str]) -> set[str]:
    """Those of `names` whose every use in `func` is a sequence's (see `tensor_list_parameters`),
    indexed at least once, and never rebound."""
    indexed: set[str] = set()
    other: set[str] = set()
    stack: list[tuple[cst.CSTNode, cst.CSTNode | None]] = [(func.body, None)]
    while stack:
        node, parent = stack.pop()
        if isinstance(node, cst.Name) and node.value in names:
            use = _sequence_use(node, parent)
            if use == "index":
                indexed.add(node.value)
            elif use is None:
                other.add(node.value)
            continue
        if isinstance(node, (cst.Subscript, cst.Call, cst.For, cst.Return)):
            stack.extend((child, node) for child in child_nodes(node))
        elif isinstance(node, cst.Arg):
            stack.extend((child, parent) for child in child_nodes(node))  # a call's argument: the call decides
        else:
            stack.extend((child, None) for child in child_nodes(node))
    return indexed - other


def _sequence_use(name: cst.Name, parent: cst.CSTNode | None) -> str | None:
    """ "index", "seq" (a use a list allows too) or None (a use that says nothing, or a tensor's)."""
    if isinstance(parent, cst.Subscript) and parent.value is name:
        elements = parent.slice
        index = elements[0].slice if len(elements) == 1 else None
        value = index.value if isinstance(index, cst.Index) else None
        if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus):
            value = value.expression
        return "index" if isinstance(value, (cst.Integer, cst.Name)) else None
    if isinstance(parent, cst.Call) and isinstance(parent.func, cst.Name) and parent.func.value in _SEQUENCE_CONSUMERS:
        return "seq"
    if isinstance(parent, cst.For) and parent.iter is name:
        return "seq"
    if isinstance(parent, cst.Return) and parent.value is name:
        return "seq"
    return None


def _is_static(func: cst.FunctionDef) -> bool:
    return any(
        dotted(decorator.decorator) == "staticmethod" for decorator in func.decorators
    ) and func.name.value not in ("forward", "backward")


def _annotation_kind(param: cst.Param) -> bool | None:
    """True: annotated as a tensor; False: annotated as something else; None: not annotated."""
    if param.annotation is None:
        return None
    return is_tensor_annotation(param.annotation)


def _non_tensor_default(param: cst.Param) -> bool:
    default = param.default
    if default is None:
        return False
    if isinstance(
        default, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString, cst.Tuple, cst.List, cst.Dict)
    ):
        return True
    return isinstance(default, cst.Name) and default.value in ("None", "True", "False")
