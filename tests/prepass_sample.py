"""Sources for the pre-pass agreement test (tests/test_prepass.py): every way the interpreter
writes a tensor in place, spelled in every setting the pre-pass reasons about, and mixtures.

A case is a small package (`pkg/`, with a `consts.py` of module-level tensors and a `helpers.py`
of project functions) and the files of it to check. Each source is assembled from three parts:

- a *target*: the expression written and the lines that make it (a saved result, a parameter,
  a view, `self.w`, a module-level or imported tensor, a dict entry, a plain Python value...);
- a *write*: how it is written (every in-place method, function, functional, module and
  augmented operator of the torch table the interpreter reads, subscript stores in every
  target position, `out=`, `.data`, inplace modules built in every way, project helpers...);
- a *context*: where it runs (a `forward`, a function, top-level code, a nested function, a
  closure, a loop, `no_grad` in each spelling, `enable_grad` inside it, an `autograd.Function`,
  `__init__`, a helper called with a saved tensor...).

`canonical_cases` holds one case per write spelling in a setting where it breaks autograd, so
the analysis must report each of them: that proves the sample reaches every write path.
`table_cases` spells each entry of the torch table's write vocabularies, `product_cases` crosses
every write, target and context with the canonical others, `project_cases` calls into other
files in each import spelling, and `random_cases(seed, n)` mixes all parts at random.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from torchlint_inplace.analysis.torch_facts import TorchFacts, torch_facts

HEADER = "import contextlib\nfrom functools import partial\n\nimport torch\nfrom torch import nn\nimport torch.nn.functional as F\n"
CONSTS = HEADER + (
    "\nG = torch.ones(3, requires_grad=True)\nBUFFER = torch.zeros(3)\nSIZES = [1, 2]\n\n\n"
    "class Holder:\n    W = torch.ones(3, requires_grad=True)\n"
)

Lines = list[str]


@dataclass(frozen=True)
class Part:
    """Lines for the module's top level, and lines for the body where the write runs."""

    top: Lines = field(default_factory=list)
    body: Lines = field(default_factory=list)


@dataclass(frozen=True)
class Target:
    name: str
    expr: str  # what is written
    make: Part  # the lines that make it (and the saves that make writing it a hazard)


@dataclass(frozen=True)
class Case:
    name: str
    files: dict[str, str]  # path under the case's directory -> text
    checked: tuple[str, ...]  # the files whose verdict and findings are compared


# ----------------------------------------------------------------------------- targets


def _target(name: str, expr: str, *body: str, top: Lines | None = None) -> Target:
    return Target(name, expr, Part(top or [], list(body)))


TARGETS = [
    _target("saved result", "y", "y = torch.sigmoid(x)"),
    _target("saved method result", "y", "y = x.exp()"),
    _target("saved operand", "x", "z = x * w"),
    _target("parameter, read later", "x", "r = x"),
    _target("view of a saved result", "v", "y = torch.sigmoid(x)", "v = y.view(-1)"),
    _target("subscript of a saved result", "y[0]", "y = torch.sigmoid(x)"),
    _target("transpose of a saved result", "y.T", "y = torch.sigmoid(x)"),
    _target("data of a saved result", "y.data", "y = torch.sigmoid(x)"),
    _target("detached saved result", "y.detach()", "y = torch.sigmoid(x)"),
    _target("self attribute", "self.w", "z = x * self.w"),
    _target("attribute of an argument", "m.weight", "z = m(x)"),
    _target("factory", "t", "t = torch.zeros(3)", "z = t * x"),
    _target("legacy constructor", "t", "t = torch.FloatTensor(3)", "z = t * x"),
    _target("leaf factory", "t", "t = torch.zeros(3, requires_grad=True)", "z = t * x"),
    _target("requires_grad_ leaf", "t", "t = torch.zeros(3).requires_grad_()", "z = t * x"),
    _target("parameter made here", "p", "p = nn.Parameter(torch.ones(3))", "z = p * x"),
    _target(
        "project function result",
        "h",
        "h = make()",
        "z = h * x",
        top=["def make():", "    return torch.ones(3, requires_grad=True)"],
    ),
    _target("comprehension element", "parts[0]", "parts = [p.exp() for p in x.unbind()]"),
    _target("chunk", "a", "a, b = torch.sigmoid(x).chunk(2)"),
    _target("walrus", "y", "if (y := torch.sigmoid(x)) is not None:", "    pass"),
    _target("for target", "y", "for y in [torch.sigmoid(x)]:", "    pass"),
    _target("with target", "y", "with contextlib.nullcontext(torch.sigmoid(x)) as y:", "    pass"),
    _target("module-level tensor", "G0", "z = x * G0", top=["G0 = torch.ones(3, requires_grad=True)"]),
    _target("module-level buffer", "B0", "z = x * B0", top=["B0 = torch.zeros(3)"]),
    _target(
        "class attribute",
        "Local.W",
        "z = x * Local.W",
        top=["class Local:", "    W = torch.ones(3, requires_grad=True)"],
    ),
    _target("imported tensor", "G", "z = x * G", top=["from .consts import G"]),
    _target("imported tensor, aliased", "CG", "z = x * CG", top=["from .consts import G as CG"]),
    _target("imported module's tensor", "consts.G", "z = x * consts.G", top=["from . import consts"]),
    _target("imported class attribute", "Holder.W", "z = x * Holder.W", top=["from .consts import Holder"]),
    _target("absolute import's tensor", "pc.G", "z = x * pc.G", top=["import pkg.consts as pc"]),
    _target("dict entry", "d['a']", "d = {'a': torch.sigmoid(x)}"),
    _target("dict entry stored", "d['a']", "d = {}", "d['a'] = torch.sigmoid(x)"),
    _target("dict() entry", "d['a']", "d = dict(a=torch.sigmoid(x))"),
    _target("appended element", "items[0]", "items = []", "items.append(torch.sigmoid(x))"),
    _target("lambda result", "y", "g = lambda: torch.sigmoid(x)", "y = g()"),
    _target("shadowed builtin", "y", "y = len(torch.sigmoid(x))", top=["def len(t):", "    return t"]),
    _target("getattr of torch", "y", "y = getattr(torch, 'sigmoid')(x)"),
    _target("closure over a saved result", "y", "y = torch.sigmoid(x)", "def inner():", "    return y", "y = inner()"),
    # Plain Python values: writing them writes no tensor.
    _target("dict", "d", "d = {}"),
    _target("int", "n", "n = 0"),
    _target("string", "s", "s = ''"),
    _target("list", "items", "items = [1, 2]"),
    _target("range", "r", "r = range(3)"),
    _target("len of a tensor", "k", "k = len(x)"),
    _target("size of a tensor", "sz", "sz = x.size()"),
    _target("shape of a tensor", "sh", "sh = x.shape"),
    _target("item of a tensor", "it", "it = x.item()"),
    _target("device properties", "props", "props = torch.cuda.get_device_properties(0)"),
    _target("imported list", "SIZES", "n = len(SIZES)", top=["from .consts import SIZES"]),
    _target("numpy array", "arr", "arr = np.zeros(3)", top=["import numpy as np"]),
]
CANONICAL_TARGET = TARGETS[0]


# ----------------------------------------------------------------------------- writes

Write = Callable[[str], Part]


def _lines(*templates: str, top: Lines | None = None) -> Write:
    """A write from line templates, `{t}` standing for the target."""
    return lambda t: Part(list(top or []), [line.replace("{t}", t) for line in templates])


AUG_OPERATORS = ["+", "-", "*", "/", "//", "%", "**", "<<", ">>", "&", "|", "^", "@"]

WRITES: dict[str, Write] = {
    "method": _lines("{t}.add_(1)"),
    "method of a view method": _lines("{t}.unsqueeze_(0)"),
    "chained methods": _lines("{t}.mul_(2).add_(1)"),
    "copy_": _lines("{t}.copy_(w)"),
    "set_": _lines("{t}.set_(w)"),
    "method under another name": _lines("getattr({t}, 'add_')(1)"),
    "method through the class": _lines("torch.Tensor.add_({t}, 1)"),
    "index store": _lines("{t}[0] = 0"),
    "index store with ellipsis": _lines("{t}[..., 0] = w[0]"),
    "index store with a mask": _lines("{t}[{t} > 0] = 0"),
    "augmented index store": _lines("{t}[0] += 1"),
    "index store in a tuple target": _lines("a0, {t}[0] = 1, 2"),
    "index store in a starred target": _lines("a0, *{t}[0:1] = 1, 2"),
    "index store as a for target": _lines("for {t}[0] in range(2):", "    pass"),
    "index store as a with target": _lines("with contextlib.nullcontext(1) as {t}[0]:", "    pass"),
    "augmented assignment": _lines("{t} += 1"),
    "augmented assignment of a tensor": _lines("{t} *= w"),
    "augmented assignment of a list": _lines("{t} += [1]"),
    "augmented assignment of a string": _lines("{t} += 'a'"),
    "out=": _lines("torch.mul(w, 2, out={t})"),
    "out= of a unary op": _lines("torch.sigmoid(w, out={t})"),
    "in-place torch function": _lines("torch.relu_({t})"),
    "in-place functional function": _lines("F.relu_({t})"),
    "in-place function, imported": _lines("relu_({t})", top=["from torch import relu_"]),
    "functional inplace=True": _lines("F.relu({t}, inplace=True)"),
    "in-place torch function, an alias read after": _lines("kept = {t}", "torch.relu_({t})", "r = kept + 1"),
    "functional inplace flag, positional": _lines("F.dropout({t}, 0.5, True, True)"),
    "functional inplace flag, a variable": _lines("flag = True", "F.relu({t}, inplace=flag)"),
    "functional, imported": _lines("relu({t}, inplace=True)", top=["from torch.nn.functional import relu"]),
    "functional, through partial": _lines("act = partial(F.relu, inplace=True)", "act({t})"),
    "inplace module": _lines("act = nn.ReLU(inplace=True)", "act({t})"),
    "inplace module, positional flag": _lines("act = nn.ReLU(True)", "act({t})"),
    "inplace module, imported": _lines("act = ReLU(inplace=True)", "act({t})", top=["from torch.nn import ReLU"]),
    "inplace module through an alias": _lines("Act = nn.ReLU", "act = Act(True)", "act({t})"),
    "inplace module through a default": _lines(
        "act = build()", "act({t})", top=["def build(layer=nn.ReLU):", "    return layer(True)"]
    ),
    "inplace module from a dict of classes": _lines("act = {'relu': nn.ReLU}['relu'](True)", "act({t})"),
    "inplace module through partial": _lines("act = partial(nn.ReLU, inplace=True)()", "act({t})"),
    "inplace module through getattr": _lines("act = getattr(nn, 'ReLU')(inplace=True)", "act({t})"),
    "inplace module, flag in a dict display": _lines("act = nn.ReLU(**{'inplace': True})", "act({t})"),
    "inplace module, flag stored in a dict": _lines(
        "kw = {}", "kw['inplace'] = True", "act = nn.ReLU(**kw)", "act({t})"
    ),
    "inplace module, flag in starred arguments": _lines("args = (True,)", "act = nn.ReLU(*args)", "act({t})"),
    "inplace module, flag set as an attribute": _lines("act = nn.ReLU()", "act.inplace = True", "act({t})"),
    "inplace module, flag set with setattr": _lines("act = nn.ReLU()", "setattr(act, 'inplace', True)", "act({t})"),
    "inplace module in a Sequential": _lines("seq = nn.Sequential(nn.Identity(), nn.ReLU(True))", "seq({t})"),
    "inplace module in a list": _lines("acts = [nn.ReLU(inplace=True)]", "acts[0]({t})"),
    "write through .data": _lines("{t}.data.add_(1)"),
    "write through .detach()": _lines("{t}.detach().zero_()"),
    "index store through .data": _lines("{t}.data[0] = 1"),
    "project function writing its argument": _lines("bump({t})", top=["def bump(u):", "    u.add_(1)"]),
    "project function writing under no_grad": _lines(
        "clip({t})", top=["@torch.no_grad()", "def clip(u):", "    u.clamp_(0, 1)"]
    ),
    "project function with an inplace activation": _lines(
        "act({t})", top=["def act(u):", "    return F.relu(u, inplace=True)"]
    ),
    "project function writing a starred argument": _lines("bump({t})", top=["def bump(*us):", "    us[0].add_(1)"]),
    "project function writing a keyword argument": _lines(
        "bump(u={t})", top=["def bump(**kw):", "    kw['u'].add_(1)"]
    ),
    "project method writing its argument": _lines(
        "Bumper().bump({t})", top=["class Bumper:", "    def bump(self, u):", "        u.mul_(2)"]
    ),
    "imported function writing its argument": _lines("bump({t})", top=["from .helpers import bump"]),
    "imported function with an inplace activation": _lines("activate({t})", top=["from .helpers import activate"]),
    "imported module with an inplace activation": _lines(
        "block = Block()", "block({t})", top=["from .helpers import Block"]
    ),
    "mark_dirty": _lines("ctx.mark_dirty({t})"),
    "nn.init": _lines("nn.init.normal_({t})"),
    "nn.init, imported": _lines("init.zeros_({t})", top=["from torch.nn import init"]),
    "nn.utils": _lines("torch.nn.utils.clip_grad_norm_({t}, 1.0)"),
}
HELPERS = HEADER + (
    "\n\ndef bump(t):\n    t.add_(1)\n\n\ndef activate(t):\n    return F.relu(t, inplace=True)\n\n\n"
    "class Block(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.act = nn.ReLU(inplace=True)\n\n"
    "    def forward(self, x):\n        return self.act(x)\n"
)


# ----------------------------------------------------------------------------- contexts


def _indent(lines: Lines, depth: int) -> Lines:
    return [("    " * depth + line) if line else line for line in lines]


Context = Callable[[Lines, Lines], Lines]  # (make lines, write lines) -> the module's body
PARAMS = "x: torch.Tensor, w: torch.Tensor, m: nn.Linear"
# What a function returns: every name the target's lines bind, so that their saves reach a
# backward (a save nothing backpropagates through is no hazard), and the arguments.
KEPT = "__KEPT__"
RETURN = f"return {KEPT}"


def _function(decorators: Lines | None = None, wrap: Lines | None = None) -> Context:
    """`def f(x, w, m)` under `decorators`, its write inside the blocks `wrap` opens (nesting)."""
    openers = [("    " * depth) + opener for depth, opener in enumerate(wrap or [])]

    def build(make: Lines, write: Lines) -> Lines:
        body = [*make, *openers, *_indent(write, len(openers)), RETURN]
        return [*(decorators or []), f"def f({PARAMS}):", *_indent(body, 1)]

    return build


def _wrapped(*wrap: str) -> Context:
    return _function(wrap=list(wrap))


def _method(cls: str, name: str, decorators: Lines | None = None) -> Context:
    def build(make: Lines, write: Lines) -> Lines:
        return [
            cls,
            "    def __init__(self):",
            "        super().__init__()",
            "        self.w = nn.Parameter(torch.ones(3))",
            "",
            *_indent([*(decorators or []), f"def {name}(self, {PARAMS}):"], 1),
            *_indent([*make, *write, RETURN], 2),
        ]

    return build


def _top_level(make: Lines, write: Lines) -> Lines:
    inputs = ["x = torch.randn(3, requires_grad=True)", "w = torch.randn(3, requires_grad=True)", "m = nn.Linear(3, 3)"]
    return [*inputs, *make, *write, f"outputs = ({KEPT},)", "outputs[0].sum().backward()"]


def _nested(make: Lines, write: Lines) -> Lines:
    return ["def outer():", f"    def f({PARAMS}):", *_indent([*make, *write, RETURN], 2), "    return f"]


def _closure(make: Lines, write: Lines) -> Lines:
    return [f"def f({PARAMS}):", *_indent([*make, "def inner():", *_indent(write, 1), "inner()", RETURN], 1)]


def _autograd_function(method: str, dirty: bool = False) -> Context:
    """The write in a custom Function's `forward` (after `ctx.mark_dirty(x)` if `dirty`) or
    `backward`, the other one plain."""

    def build(make: Lines, write: Lines) -> Lines:
        mark = ["ctx.mark_dirty(x)"] if dirty else []
        forward = [*make, *mark, *write, RETURN] if method == "forward" else ["return x * w"]
        backward = [*make, *write, "return x, w, None"] if method == "backward" else ["return x, x, None"]
        return [
            "class Op(torch.autograd.Function):",
            "    @staticmethod",
            f"    def forward(ctx, {PARAMS}):",
            *_indent(forward, 2),
            "",
            "    @staticmethod",
            "    def backward(ctx, x, w=None, m=None):",
            *_indent(backward, 2),
            "",
            "",
            f"def apply({PARAMS}):",
            "    return Op.apply(x, w, m)",
        ]

    return build


def _called_helper(make: Lines, write: Lines) -> Lines:
    """A helper run with a tensor its caller saved and reads afterwards."""
    return [
        f"def helper({PARAMS}):",
        *_indent([*make, *write, "return x"], 1),
        "",
        "",
        "class M(nn.Module):",
        f"    def forward(self, {PARAMS}):",
        "        y = torch.sigmoid(x)",
        "        helper(y, w, m)",
        "        return y + x",
    ]


def _method_called_from_forward(make: Lines, write: Lines) -> Lines:
    return [
        "class M(nn.Module):",
        f"    def forward(self, {PARAMS}):",
        "        y = torch.sigmoid(x)",
        "        self.update(y, w, m)",
        "        return y",
        "",
        f"    def update(self, {PARAMS}):",
        *_indent([*make, *write], 2),
    ]


MODULE = "class M(nn.Module):"
CONTEXTS: dict[str, tuple[Context, Lines]] = {  # name -> (builder, extra top-level lines)
    "forward": (_method(MODULE, "forward"), []),
    "function": (_function(), []),
    "top level": (_top_level, []),
    "nested function": (_nested, []),
    "closure": (_closure, []),
    "loop": (_wrapped("for _ in range(2):"), []),
    "branch": (_wrapped("if w.sum() > 0:"), []),
    "with no_grad block": (_wrapped("with torch.no_grad():"), []),
    "with enable_grad block": (_wrapped("with torch.enable_grad():"), []),
    "no_grad()": (_function(["@torch.no_grad()"]), []),
    "no_grad without call": (_function(["@torch.no_grad"]), []),
    "inference_mode()": (_function(["@torch.inference_mode()"]), []),
    "autograd.no_grad()": (_function(["@torch.autograd.no_grad()"]), []),
    "no_grad imported": (_function(["@no_grad()"]), ["from torch import no_grad"]),
    "no_grad through an alias": (_function(["@T.no_grad()"]), ["import torch as T"]),
    "no_grad of another library": (_function(["@mylib.no_grad()"]), ["import mylib"]),
    "no_grad method": (_method(MODULE, "forward", ["@torch.no_grad()"]), []),
    "no_grad then enable_grad": (_function(["@torch.no_grad()"], ["with torch.enable_grad():"]), []),
    "no_grad then set_grad_enabled": (_function(["@torch.no_grad()"], ["with torch.set_grad_enabled(True):"]), []),
    "no_grad then enable_grad imported": (
        _function(["@torch.no_grad()"], ["with eg():"]),
        ["from torch import enable_grad as eg"],
    ),
    "enable_grad()": (_function(["@torch.enable_grad()"]), []),
    "set_grad_enabled(False)": (_wrapped("with torch.set_grad_enabled(False):"), []),
    "autocast": (_wrapped("with torch.autocast('cpu'):"), []),
    "autograd.Function forward": (_autograd_function("forward"), []),
    "autograd.Function forward, marking dirty": (_autograd_function("forward", dirty=True), []),
    "autograd.Function backward": (_autograd_function("backward"), []),
    "__init__": (_method(MODULE, "__init__"), []),
    "reset_parameters": (_method(MODULE, "reset_parameters"), []),
    "plain class method": (_method("class Plain(object):", "run"), []),
    "helper called with a saved tensor": (_called_helper, []),
    "method called from forward": (_method_called_from_forward, []),
}
CANONICAL_CONTEXT = "function"


# ----------------------------------------------------------------------------- assembling


def _source(context: str, target: Target, write: Part) -> str | None:
    """The module for one combination; None when it is not Python (`y.detach() += 1`)."""
    build, extra = CONTEXTS[context]
    top = list(dict.fromkeys([*extra, *target.make.top, *write.top]))
    body = build(target.make.body, write.body)
    kept = ", ".join([*_bound(target.make.body), "x", "w"])
    text = "\n".join([HEADER, *top, "", "", *body, ""]).replace(KEPT, kept)
    try:
        ast.parse(text)
    except SyntaxError:
        return None
    return text


def _bound(lines: Lines) -> list[str]:
    """The names these statements bind, in order."""
    tree = ast.parse("\n".join(lines))
    names = [node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)]
    return [name for name in dict.fromkeys(names) if name not in ("x", "w")]


def _case(name: str, text: str) -> Case:
    return Case(name, {"pkg/m.py": text}, ("pkg/m.py",))


def package_files() -> dict[str, str]:
    """What every case's package holds besides its own files."""
    return {"pkg/__init__.py": "", "pkg/consts.py": CONSTS, "pkg/helpers.py": HELPERS}


def _combination(context: str, target: Target, write: str) -> Case | None:
    text = _source(context, target, WRITES[write](target.expr))
    return None if text is None else _case(f"{write} | {target.name} | {context}", text)


# ----------------------------------------------------------------------------- whole sources

# Writes that are not of a target (an optimizer step, a module renormalising its weight, a
# Function's contract) and inplace modules built in a class, as whole module bodies.
_STEP = """
def train(x: torch.Tensor):
    D = nn.Linear(3, 1)
    opt_D = torch.optim.Adam(D.parameters())
    prob = D(x)
    d_loss = prob.mean()
    g_loss = (1 - prob).mean()
    d_loss.backward(retain_graph=True)
    {step}
    {backward}
"""
_EMBEDDING = """
def train(idx: torch.Tensor):
    embedding = {module}
    W = torch.randn((7, 5), requires_grad=True)
    a = embedding.weight @ W.t()
    b = embedding(idx) @ W.t()
    (a.unsqueeze(0) + b.unsqueeze(1)).sum().backward()
"""
_MODULE_WITH = """
class M(nn.Module):
    def __init__(self{parameters}):
        super().__init__()
{build}

    def forward(self, x):
        y = torch.sigmoid(x)
        self.act(y)
        return y
"""
_FIXED = {
    "optimizer step between backwards": _STEP.format(step="opt_D.step()", backward="g_loss.backward()"),
    "optimizer step, torch.autograd.backward": _STEP.format(
        step="opt_D.step()", backward="torch.autograd.backward(g_loss)"
    ),
    "optimizer step through a scaler": _STEP.format(
        step="torch.amp.GradScaler().step(opt_D)", backward="g_loss.backward()"
    ),
    "optimizer step, module-level optimizer": "D = nn.Linear(3, 1)\nopt_D = torch.optim.Adam(D.parameters())\n\n"
    + _STEP.format(step="opt_D.step()", backward="g_loss.backward()").replace(
        "    D = nn.Linear(3, 1)\n    opt_D = torch.optim.Adam(D.parameters())\n", ""
    ),
    "state_dict kept across steps, backward in a helper": (
        "def fit(x: torch.Tensor, backprop):\n    D = nn.Linear(3, 1)\n    opt = torch.optim.SGD(D.parameters(), lr=0.1)\n"
        "    best = None\n    for epoch in range(3):\n        backprop(D(x).sum())\n        opt.step()\n"
        "        if epoch == 0:\n            best = D.state_dict()\n    D.load_state_dict(best)\n"
    ),
    "inplace module built in __init__": _MODULE_WITH.format(
        parameters="", build="        self.act = nn.ReLU(inplace=True)"
    ),
    "inplace module from a constructor argument": _MODULE_WITH.format(
        parameters=", inplace", build="        self.act = nn.ReLU(inplace)"
    )
    + "\n\nmodel = M(True)\n",
    "inplace modules switched on over modules()": _MODULE_WITH.format(
        parameters="",
        build="        self.act = nn.ReLU()\n        for module in self.modules():\n            module.inplace = True",
    ),
    "embedding with max_norm": _EMBEDDING.format(module="nn.Embedding(3, 5, max_norm=True)"),
    "autograd.Function writing a saved input": """
class Op(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.mark_dirty(x)
        x.mul_(2)
        return x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x
""",
    "autograd.Function calling a project writer": """
from .helpers import bump


class Op(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        bump(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g
""",
}
# Writes the analysis does not report today (a backward in a helper, a flag it cannot bind):
# in the sample all the same, checked wherever the pre-pass skips them, in case the analysis learns them.
_UNREPORTED = {
    "optimizer step, backward in a project helper": "def backprop(loss):\n    loss.backward()\n\n"
    + _STEP.format(step="opt_D.step()", backward="backprop(g_loss)"),
    "inplace module switched on by name": _MODULE_WITH.format(
        parameters=", act='ReLU'", build="        self.act = getattr(nn, act)(True)"
    )
    + "\n\nmodel = M()\n",
    "embedding with max_norm, positional": _EMBEDDING.format(module="nn.Embedding(3, 5, None, 1.0)"),
    "functional embedding with max_norm": """
def train(idx: torch.Tensor, weight: torch.Tensor):
    W = torch.randn((7, 5), requires_grad=True)
    a = weight @ W.t()
    b = F.embedding(idx, weight, max_norm=1.0) @ W.t()
    (a.unsqueeze(0) + b.unsqueeze(1)).sum().backward()
""",
}
FIXED_SOURCES = {name: HEADER + "\n" + text for name, text in _FIXED.items()}
UNREPORTED_SOURCES = {name: HEADER + "\n" + text for name, text in _UNREPORTED.items()}


def _required(context: str, target: Target, write: Part) -> str:
    text = _source(context, target, write)
    assert text is not None, (context, target, write)
    return text


def canonical_cases() -> list[Case]:
    """Each write path once, where it breaks autograd; and the writes that are not of a target
    (an optimizer step, `mark_dirty`, a module renormalising its weight)."""
    saved, parameter = CANONICAL_TARGET, _target("parameter", "x")
    operand = _target("saved operand", "x", "r = x * 1")
    writes = [
        ("method", "forward", saved, "method"),
        ("index store", "forward", saved, "index store"),
        ("augmented assignment", "forward", saved, "augmented assignment"),
        ("out=", "forward", saved, "out="),
        ("functional inplace=True", "forward", operand, "functional inplace=True"),
        ("write through .data", "forward", saved, "write through .data"),
        ("project function writing its argument", "helper called with a saved tensor", parameter, "method"),
        ("autograd.Function writing without mark_dirty", "autograd.Function forward", parameter, "method"),
    ]
    cases = [
        _case(name, _required(context, target, WRITES[write](target.expr))) for name, context, target, write in writes
    ]
    dirty = _required("autograd.Function forward, marking dirty", _target("parameter", "w"), Part())
    cases.append(_case("mark_dirty of a tensor not written", dirty))
    cases.extend(_case(name, text) for name, text in FIXED_SOURCES.items())
    return cases


def unreported_cases() -> list[Case]:
    return [_case(name, text) for name, text in UNREPORTED_SOURCES.items()]


# The torch table's vocabularies of writes, each spelled by `table_cases`; and the others (what
# ops save, which are views, ...), which say how a write breaks, not where one is.
WRITE_TABLES = frozenset(
    {
        "inplace_methods",
        "inplace_view_methods",
        "inplace_functions",
        "inplace_kwarg_functionals",
        "inplace_modules",
        "parameter_writing_modules",
    }
)
OTHER_TABLES = frozenset(
    {
        "ops",
        "overloads",
        "integer_outputs",
        "view_methods",
        "multi_view_methods",
        "view_attributes",
        "module_saves",
        "module_outputs",
        "modules_aliasing_input",
        "module_saved_arguments",
        "module_returning_functions",
        "module_parameters",
        "inplace_module_saves",
        "inplace_function_saves",
        "inplace_module_conditions",
        "inplace_functional_conditions",
        "tensor_functions",
    }
)


def _arguments(facts: TorchFacts, method: str) -> str:
    twin = facts.inplace_methods.get(method)
    op = facts.ops.get(twin) if twin is not None else None
    return "w" if op is None or len(op.params) > 1 else ""


def table_cases(facts: TorchFacts | None = None) -> list[Case]:
    """Each entry of the torch table's write vocabularies, written where it breaks autograd."""
    facts = facts or torch_facts()
    saved = CANONICAL_TARGET
    writes: dict[str, Write] = {}
    for method in sorted({*facts.inplace_methods, *facts.inplace_view_methods}):
        writes[f"method {method}"] = _lines(f"{{t}}.{method}({_arguments(facts, method)})")
    for function in sorted(facts.inplace_functions):
        writes[f"function torch.{function}"] = _lines(f"torch.{function}({{t}})")
        writes[f"function F.{function}"] = _lines(f"F.{function}({{t}})")
    for functional, index in sorted(facts.inplace_kwarg_functionals.items()):
        writes[f"functional F.{functional}"] = _lines(f"F.{functional}({{t}}, inplace=True)")
        positional = ", ".join(["{t}", *["0.5"] * (index - 1), "True"])
        writes[f"functional F.{functional}, positional"] = _lines(f"F.{functional}({positional})")
    for module, index in sorted(facts.inplace_modules.items()):
        writes[f"module nn.{module}"] = _lines(f"act = nn.{module}(inplace=True)", "act({t})")
        positional = ", ".join([*["0.5"] * index, "True"])
        writes[f"module nn.{module}, positional"] = _lines(f"act = nn.{module}({positional})", "act({t})")
        writes[f"module nn.{module}, by name"] = _lines(f"act = getattr(nn, '{module}')({positional})", "act({t})")
    for operator in AUG_OPERATORS:
        writes[f"augmented {operator}="] = _lines(f"{{t}} {operator}= w")
    cases = [_case(name, _source("forward", saved, write(saved.expr))) for name, write in writes.items()]
    for module, argument in sorted(facts.parameter_writing_modules.items()):
        text = HEADER + "\n" + _EMBEDDING.format(module=f"nn.{module}(3, 5, {argument}=1.0)")
        cases.append(_case(f"module nn.{module} with {argument}=", text))
    return cases


def product_cases() -> Iterator[Case]:
    """Every write, target and context, each crossed with the canonical others and with the
    few settings the pre-pass judges differently (grad off, top-level code)."""
    canonical = CANONICAL_TARGET
    for write in WRITES:
        for context in (CANONICAL_CONTEXT, "no_grad()"):
            yield from _some(_combination(context, canonical, write))
    for target in TARGETS:
        for write in ("method", "index store", "augmented assignment", "inplace module"):
            for context in (CANONICAL_CONTEXT, "no_grad()", "top level"):
                yield from _some(_combination(context, target, write))
    by_name = {target.name: target for target in TARGETS}
    for context in CONTEXTS:
        for write in ("method", "index store", "functional inplace=True"):
            for target in ("saved result", "saved operand", "imported tensor"):
                yield from _some(_combination(context, by_name[target], write))


def _some(case: Case | None) -> list[Case]:
    return [] if case is None else [case]


def random_cases(seed: int, count: int) -> Iterator[Case]:
    """`count` combinations drawn at random (of context, target and write; some with two
    writes on two targets), the same for the same seed."""
    rng = random.Random(seed)
    contexts, writes = list(CONTEXTS), list(WRITES)
    made = 0
    while made < count:
        context, target, write = rng.choice(contexts), rng.choice(TARGETS), rng.choice(writes)
        part = WRITES[write](target.expr)
        name = f"{write} | {target.name} | {context}"
        if rng.random() < 0.3:
            other, second = rng.choice(TARGETS), rng.choice(writes)
            extra = WRITES[second](other.expr)
            target = Target(
                target.name, target.expr, Part(target.make.top + other.make.top, target.make.body + other.make.body)
            )
            part = Part(part.top + extra.top, part.body + extra.body)
            name += f" + {second} | {other.name}"
        text = _source(context, target, part)
        if text is not None:
            made += 1
            yield _case(f"#{made} {name}", text)


# ----------------------------------------------------------------------------- projects

# How a caller names a helper of another file: (import lines, the helper's name in the caller).
IMPORT_SPELLINGS = {
    "from .helpers import": ("from .helpers import helper", "helper"),
    "from .helpers import as": ("from .helpers import helper as hh", "hh"),
    "from . import helpers": ("from . import helpers", "helpers.helper"),
    "import pkg.helpers as": ("import pkg.helpers as hp", "hp.helper"),
    "from pkg.helpers import": ("from pkg.helpers import helper", "helper"),
    "re-exported by the package": ("from pkg import helper", "helper"),
    "re-exported by a module": ("from .mid import helper", "helper"),
    "through a wrapper in another file": ("from .mid import wrapper", "wrapper"),
    # Absolute imports resolve above the outermost package, in the file's own folder (a script
    # run from there) and at the project root (`analysis.project.absolute_import_bases`).
    "absolute, from the file's folder": ("from helpers import helper", "helper"),
    "import of a module in the file's folder": ("import helpers", "helpers.helper"),
    "absolute, from the project root": ("from tools.helpers import helper", "helper"),
}
# What the helper does: its definition in `pkg/helpers.py`.
HELPER_KINDS = {
    "writes its argument": "def helper(t, *rest):\n    t.add_(1)\n    return t\n",
    "index store into its argument": "def helper(t, *rest):\n    t[0] = 0\n    return t\n",
    "inplace activation": "def helper(t, *rest):\n    return F.relu(t, inplace=True)\n",
    "inplace module": "class helper(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.act = nn.ReLU(inplace=True)\n\n"
    "    def forward(self, t):\n        return self.act(t)\n",
    "no_grad write into its argument": "@torch.no_grad()\ndef helper(t, *rest):\n    t.clamp_(0, 1)\n    return t\n",
    "returns a module-level tensor": "SCALE = torch.ones(3, requires_grad=True)\n\n\ndef helper(t, *rest):\n    return SCALE\n",
    "returns an inplace module class": "def helper(t=None, *rest):\n    return nn.ReLU\n",
    "backward": "def helper(t, *rest):\n    t.sum().backward(retain_graph=True)\n    return t\n",
    "pure": "def helper(t, *rest):\n    return t * 2\n",
}
# Where the caller calls it ({h}: the helper's name there).
CALLERS = {
    "function": "def f(x, w):\n    y = torch.sigmoid(x)\n    {h}(y)\n    return y + x\n",
    "forward": "class M(nn.Module):\n    def forward(self, x):\n        y = torch.sigmoid(x)\n        out = {h}(y)\n        return y + out\n",
    "module attribute": "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.h = {h}()\n\n"
    "    def forward(self, x):\n        y = torch.sigmoid(x)\n        self.h(y)\n        return y\n",
    "write into what it returns": "def f(x, w):\n    s = {h}(x)\n    z = x * s\n    s.mul_(2)\n    return z\n",
    "module class it returns": "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.act = {h}()(True)\n\n"
    "    def forward(self, x):\n        y = torch.sigmoid(x)\n        self.act(y)\n        return y\n",
    "autograd.Function forward": "class Op(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n        {h}(x)\n        return x\n\n"
    "    @staticmethod\n    def backward(ctx, g):\n        return g\n",
    "training step": "net = nn.Linear(3, 1)\nopt = torch.optim.SGD(net.parameters(), lr=0.1)\n\n\ndef train(x):\n    loss = net(x).sum()\n"
    "    {h}(loss)\n    opt.step()\n    loss.backward()\n",
}


def project_case(spelling: str, kind: str, caller: str) -> Case:
    imports, name = IMPORT_SPELLINGS[spelling]
    files = {
        "pkg/__init__.py": "from .helpers import helper\n" if spelling == "re-exported by the package" else "",
        "pkg/helpers.py": HEADER + "\n\n" + HELPER_KINDS[kind],
        "pkg/mid.py": "from .helpers import helper\n\n\ndef wrapper(t, *rest):\n    return helper(t, *rest)\n",
        "pkg/m.py": HEADER + "\n" + imports + "\n\n\n" + CALLERS[caller].replace("{h}", name),
    }
    if spelling == "absolute, from the project root":  # a script outside the package
        files |= {
            "pyproject.toml": "",
            "tools/helpers.py": files["pkg/helpers.py"],
            "scripts/run.py": files.pop("pkg/m.py"),
        }
    return Case(f"{kind} | {caller} | {spelling}", files, tuple(name for name in files if name.endswith(".py")))


def project_cases() -> Iterator[Case]:
    """A caller and the helper it imports: each helper with each caller, and each import
    spelling with the helpers whose writes a caller may have to report."""
    for kind in HELPER_KINDS:
        for caller in CALLERS:
            yield project_case("from .helpers import", kind, caller)
    for spelling in IMPORT_SPELLINGS:
        for kind, caller in (
            ("inplace activation", "function"),
            ("inplace module", "module attribute"),
            ("returns a module-level tensor", "write into what it returns"),
            ("returns an inplace module class", "module class it returns"),
            ("writes its argument", "autograd.Function forward"),
        ):
            yield project_case(spelling, kind, caller)


def random_project_cases(seed: int, count: int) -> Iterator[Case]:
    rng = random.Random(seed)
    for _ in range(count):
        yield project_case(
            rng.choice(list(IMPORT_SPELLINGS)), rng.choice(list(HELPER_KINDS)), rng.choice(list(CALLERS))
        )
