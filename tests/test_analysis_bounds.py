"""Bounds that keep the interpreter's work proportional to the code, not to its call shapes.

timm's `unwrap_model(model)` recurses on `model.ema`, `model.module` or `model._orig_mod`:
each attribute of an unknown model is a new context, so following every recursive call ran it
157,463 times for one file (3 ** depth). A function may be on the call stack once below its
first run; deeper, its result is not known. One level still finds what it does.
"""

from __future__ import annotations

import gc

import libcst as cst
from support import runs_of

from torchlint_inplace import analysis
from torchlint_inplace.analysis import shared
from torchlint_inplace.analysis.classes import ClassInfo
from torchlint_inplace.analysis.conditions import Assumption
from torchlint_inplace.analysis.project import key_of
from torchlint_inplace.analysis.values import MAX_OPTIONS, Choice, Const, Value

UNWRAP = """\
import torch


def unwrap(model):
    if hasattr(model, "module"):
        return unwrap(model.module)
    elif hasattr(model, "ema"):
        return unwrap(model.ema)
    elif hasattr(model, "_orig_mod"):
        return unwrap(model._orig_mod)
    return model


def state(model):
    return unwrap(model).state_dict()
"""

ONE_LEVEL = """\
import torch


def rectify(x: torch.Tensor, depth: int) -> torch.Tensor:
    if depth == 0:
        return x.relu_()
    return rectify(x, depth - 1)


def loss(w: torch.Tensor) -> torch.Tensor:
    y = w.sigmoid()
    rectify(y, 1)
    return y.sum()
"""


def test_a_recursion_on_unknown_attributes_runs_a_bounded_number_of_times() -> None:
    project = analysis.Project()
    module = cst.parse_module(UNWRAP)
    analysis.analyze(module, "/tmp/unwrap.py", project)
    assert 1 <= runs_of(project, "unwrap", module) <= 1 + 3 + 9


def test_one_level_of_recursion_is_still_followed() -> None:
    module = cst.parse_module(ONE_LEVEL)
    found = analysis.analyze(module, "/tmp/one_level.py", analysis.Project()).mutations
    assert [module.code_for_node(mutation.node) for mutation in found] == ["x.relu_()"]


KEYWORD_ORDERS = """\
import torch


def scaled(x: torch.Tensor, factor: float = 1.0, inplace: bool = False) -> torch.Tensor:
    return x.mul_(factor) if inplace else x * factor


def loss(w: torch.Tensor) -> torch.Tensor:
    y = w.sigmoid()
    a = scaled(y, factor=2.0, inplace=False)
    b = scaled(y, inplace=False, factor=2.0)
    return (a + b).sum()
"""


def test_keyword_order_does_not_make_a_new_context() -> None:
    """Model zoos build one layer from many sites, each naming its keywords in its own order:
    a run is remembered by what the arguments are, not by the order the call gave them in."""
    project = analysis.Project()
    module = cst.parse_module(KEYWORD_ORDERS)
    analysis.analyze(module, "/tmp/keyword_orders.py", project)
    assert runs_of(project, "scaled", module) == 2  # the two calls (one context), and the entry run of its own


def test_the_shared_frozensets_keep_no_class_alive() -> None:
    """The table of shared frozensets outlives the memo: a set of classes kept there would keep
    their syntax trees alive after their files are forgotten (`analysis.shared`)."""
    code = (
        "import torch\nfrom torch import nn\n\n\nclass Block(nn.Module):\n    def forward(self, x):\n        return x\n\n\n"
        "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.block = Block()\n\n"
        "    def forward(self, x):\n        return self.block(x).sigmoid()\n"
    )
    project = analysis.Project()
    analysis.analyze(cst.parse_module(code), "/project/net.py", project)
    built = [key for key in project.memo if isinstance(key, tuple) and key[:1] == ("instance",)]
    assert built  # the classes were built, under runs that collected them
    assert not [kept for kept in shared._shared if any(isinstance(item, ClassInfo) for item in kept)]


LAYERS = """\
from torch import nn


class ForgottenAct(nn.Module):
    def forward(self, x):
        return x.relu()
"""

NET = """\
from torch import nn

from layers import ForgottenAct


def block(act_layer, width):
    return nn.Sequential(nn.Linear(width, width), act_layer())


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = block(ForgottenAct, 4)

    def forward(self, x):
        return self.body(x).sigmoid()
"""


def test_forgetting_a_file_frees_its_tree_from_what_was_learnt_elsewhere(tmp_path) -> None:
    """A run of `net.py` called with a class of `layers.py` (`block(ForgottenAct, 4)`) holds that class,
    and so its `ClassDef`, in its memo key and its summary: it must be forgotten with
    `layers.py`, or evicting that file frees nothing (timm kept 37% of its live syntax nodes
    in such orphaned subtrees)."""
    (tmp_path / "layers.py").write_text(LAYERS)
    (tmp_path / "net.py").write_text(NET)
    project = analysis.Project()
    net = str(tmp_path / "net.py")
    analysis.analyze(cst.parse_module(NET), net, project)
    net_ctx = project.file(tmp_path / "net.py")
    assert net_ctx is not None and runs_of(project, "block", net_ctx.module) >= 1
    assert _classes_alive("ForgottenAct") == 1
    project._forget(key_of(tmp_path / "layers.py"))
    assert _classes_alive("ForgottenAct") == 0


def _classes_alive(name: str) -> int:
    gc.collect()
    return sum(1 for node in gc.get_objects() if isinstance(node, cst.ClassDef) and node.name.value == name)


SCALE = """\
def scale_(x):
    x.mul_(2)
"""

HELPER = """\
from scale import scale_


def helper(x):
    scale_(x)
    return x
"""

USER = """\
from helper import helper


def run(w):
    y = w.sigmoid()
    helper(y)
    return y.sum()
"""


def test_a_run_recalled_from_the_memo_still_counts_the_files_it_read(tmp_path) -> None:
    """The results cache keys a file's findings on the files its analysis read. `user_b.py`
    takes `helper`'s run from the memo `user_a.py` filled; that run read `scale.py`, so an
    edit there must invalidate `user_b.py` as it does `user_a.py`."""
    for name, code in (("scale", SCALE), ("helper", HELPER), ("user_a", USER), ("user_b", USER)):
        (tmp_path / f"{name}.py").write_text(code)
    project = analysis.Project()
    first = analysis.analyze(cst.parse_module(USER), str(tmp_path / "user_a.py"), project)
    second = analysis.analyze(cst.parse_module(USER), str(tmp_path / "user_b.py"), project)
    scale = key_of(tmp_path / "scale.py")
    assert scale in first.dependencies
    assert scale in second.dependencies
    assert [m.form for m in first.mutations] == [m.form for m in second.mutations]


OPTIONAL_OUTPUTS = """\
import torch


def outputs(x: torch.Tensor, {params}):
    x.add_(1)
    return tuple(v for v in [{names}] if v is not None)
"""


def _returned(count: int) -> object:
    """What `outputs` returns when nobody calls it: each argument may be None or not."""
    names = [f"o{i}" for i in range(count)]
    source = OPTIONAL_OUTPUTS.format(params=", ".join(f"{name}=None" for name in names), names=", ".join(names))
    project = analysis.Project()
    module = cst.parse_module(source)
    analysis.analyze(module, "/tmp/outputs.py", project)
    node = next(s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value == "outputs")
    returned = [
        value.returned
        for key, value in project.memo.items()
        if isinstance(key, tuple) and key[:1] == ("run",) and key[2] == id(node)
    ]
    assert len(returned) == 1
    return returned[0]


def test_a_comprehension_forks_on_open_filters_a_bounded_number_of_times() -> None:
    """Each item whose `is not None` is open doubles the lists a comprehension may build: two
    open items give four lists; sixteen give one homogeneous list, not 65,536 (a worker of a
    transformers run grew to 23 GB before the bound was applied during the loop)."""
    from torchlint_inplace.analysis.values import Choice, Val

    forked = _returned(2)
    assert isinstance(forked, Choice)
    assert sorted(len(option.items) for _, option in forked.options) == [0, 1, 1, 2]  # type: ignore[union-attr]
    homogeneous = _returned(16)
    assert isinstance(homogeneous, Val) and homogeneous.items is not None and len(homogeneous.items) == 1


def _assumed(subject: str, holds: bool = True) -> frozenset[Assumption]:
    return frozenset({Assumption(subject, "", holds)})


def test_a_choice_among_choices_is_one_flat_choice_under_both_conditions() -> None:
    """torch's dynamo materialized a callee's choice on each option of a choice receiver, call
    level after call level: values sixty choices deep, 18 GB for one worker."""
    inner = Choice(((_assumed("b"), Const(1)), (_assumed("b", False), Const(2))))
    outer = Choice(((_assumed("a"), inner), (_assumed("a", False), Const(3))))
    assert outer.options == (
        (_assumed("a") | _assumed("b"), Const(1)),
        (_assumed("a") | _assumed("b", False), Const(2)),
        (_assumed("a", False), Const(3)),
    )


def test_a_flattened_value_met_on_two_paths_keeps_what_they_share() -> None:
    """`1` is there whether `b` holds or not: only `a` selects it."""
    inner = Choice(((_assumed("b"), Const(1)), (_assumed("b", False), Const(2))))
    outer = Choice(((_assumed("a"), inner), (_assumed("a") | _assumed("b", False), Const(1))))
    assert outer.options == ((_assumed("a"), Const(1)), (_assumed("a") | _assumed("b", False), Const(2)))


def test_nesting_cannot_grow_a_choice_past_its_bound() -> None:
    value: Value = Const(0)
    for level in range(40):
        value = Choice(((_assumed(f"a{level}"), value), (_assumed(f"a{level}", False), Const(level + 1))))
    assert isinstance(value, Choice)
    assert len(value.options) == MAX_OPTIONS
    assert not any(isinstance(option, Choice) for _, option in value.options)


def test_format_computes_names_but_never_a_string_of_unbounded_width() -> None:
    """`str.format` on constants is computed for the names code builds (`"Encoder{}"`), never
    where a field's width could make a huge string, written or taken from an argument."""
    from torchlint_inplace.analysis.arguments import Args
    from torchlint_inplace.analysis.calls import _string_method

    assert _string_method("Encoder{}", "format", Args([Const("Burgess")])) == Const("EncoderBurgess")
    # widths small enough that a missing guard fails the test rather than the machine
    assert not isinstance(_string_method("{:>99999}", "format", Args([Const("a")])), Const)
    assert not isinstance(_string_method("{:{w}}", "format", Args([Const("a")], keywords={"w": Const(99999)})), Const)
    assert not isinstance(_string_method("  Block {}, Args: {}", "format", Args([Const(1), Const("x")])), Const)
