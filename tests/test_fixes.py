"""The fix builders (what each form is rewritten to, and when it is safe) and the applier
(rounds, overlaps, the compile check, the bound, writing back)."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path
from textwrap import dedent

import pytest
from support import every_rule

from torchlint_inplace.api import lint_source
from torchlint_inplace.diagnostics import Applicability, Edit, Finding, Fix, Position, Severity, Span
from torchlint_inplace.fixes.apply import MAX_ROUNDS, apply_edits, encode, fix_text, write_atomically
from torchlint_inplace.source import decode

PATH = "/nonexistent/m.py"  # no folder around it for the project to scan for importers


def module(body: str, header: str = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n") -> str:
    return header + "\n" + dedent(body).lstrip("\n")


def fix_all(text: str, unsafe: bool = True) -> str:
    return fix_text(PATH, text, lambda source: lint_source(source, PATH, every_rule()), unsafe).text


def only_fix(text: str) -> Fix:
    fixes = [finding.fix for finding in lint_source(text, PATH, every_rule())]
    assert len(fixes) == 1 and fixes[0] is not None, fixes
    return fixes[0]


SAVED_THEN_METHOD = """
def f(x: torch.Tensor, w: torch.Tensor):
    h = torch.sigmoid(x * nn.Parameter(w))
    h.mul_(2)
    return h
"""


def test_method_becomes_its_out_of_place_twin_and_is_safe_on_an_exclusive_local() -> None:
    text = module(SAVED_THEN_METHOD)
    fix = only_fix(text)
    assert fix.applicability is Applicability.SAFE
    assert "    h = h.mul(2)\n" in fix_all(text, unsafe=False)


def test_rewriting_an_aliased_tensor_is_unsafe() -> None:
    text = module("""
        def f(x: torch.Tensor, w: torch.Tensor):
            h = torch.sigmoid(x * nn.Parameter(w))
            alias = h
            h.mul_(2)
            return h, alias
    """)
    assert only_fix(text).applicability is Applicability.UNSAFE
    assert fix_all(text, unsafe=False) == text


def test_rewriting_an_element_of_a_tensor_list_argument_is_unsafe() -> None:
    """timm's optimizers: `exp_avg = exp_avgs[i]` is the caller's state; rebinding it would
    silently stop the state from updating."""
    text = module("""
        class Step(nn.Module):
            def forward(self, xs: list[torch.Tensor], states: list[torch.Tensor]):
                for i, x in enumerate(xs):
                    state = states[i]
                    y = x * state
                    state.mul_(0.9)
                return y
    """)
    assert only_fix(text).applicability is Applicability.UNSAFE
    assert fix_all(text, unsafe=False) == text


def test_a_write_through_a_view_of_another_tensor_gets_no_fix() -> None:
    """torchvision's adjust_sharpness: `view` is a window into `output`, which is returned;
    `view = view.add(...)` would leave `output` unsharpened."""
    text = module("""
        class Sharpen(nn.Module):
            def forward(self, image, kernel):
                output = image.clone()
                blurred = F.conv2d(output, kernel)
                view = output[..., 1:-1, 1:-1]
                y = view * blurred
                view.add_(blurred)
                return output, y
    """)
    findings = lint_source(text, PATH, every_rule())
    assert [finding.code for finding in findings] == ["TIP001"] and findings[0].fix is None


def test_method_used_as_a_value_rebinds_with_a_walrus() -> None:
    text = module("""
        def f(x: torch.Tensor, w: torch.Tensor):
            h = torch.sigmoid(x * nn.Parameter(w))
            z = h.mul_(2)
            return z
    """)
    assert "    z = (h := h.mul(2))\n" in fix_all(text)


def test_zero_uses_the_files_torch_alias() -> None:
    text = module(
        """
        def f(x: torch.Tensor, w: torch.Tensor):
            h = th.sigmoid(x * th.nn.Parameter(w))
            h.zero_()
            return h
    """,
        header="import torch as th\n",
    )
    assert "    h = th.zeros_like(h)\n" in fix_all(text)


def test_methods_without_a_twin_write_into_a_clone() -> None:
    text = module("""
        def f(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor):
            h = torch.sigmoid(x * nn.Parameter(w))
            h.fill_(y.sum())
            return h
    """)
    assert "    h = h.clone().fill_(y.sum())\n" in fix_all(text)


def test_augmented_assignment_keeps_precedence() -> None:
    text = module("""
        def f(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, w: torch.Tensor):
            h = torch.tanh(x * nn.Parameter(w))
            h *= a + b
            return h
    """)
    assert "    h = h * (a + b)\n" in fix_all(text)


def test_index_assignment_clones_on_its_own_line_or_before_it_on_a_shared_line() -> None:
    text = module("""
        def f(x: torch.Tensor, flag: bool, w: torch.Tensor):
            p = torch.sigmoid(x * nn.Parameter(w))
            p[0] = 0.0
            q = torch.sigmoid(x * nn.Parameter(w))
            if flag: q[0] = 1.0
            return p + q
    """)
    fixed = fix_all(text)
    assert "    p = p.clone()\n    p[0] = 0.0\n" in fixed
    assert "    if flag: q = q.clone(); q[0] = 1.0\n" in fixed


def test_index_assignment_saved_by_its_own_value_gets_no_fix() -> None:
    # timm's fasternet: a clone before the statement would be saved and written alike, and
    # each round inserted another one (found by scripts/corpus_check.py).
    text = module("""
        class Partial(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(2, 2, 3, 1, 1)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                x = x.clone()
                x[:, :2] = self.conv(x[:, :2])
                return x
    """)
    findings = lint_source(text, PATH, every_rule())
    assert [finding.code for finding in findings] == ["TIP002"] and findings[0].fix is None
    assert fix_all(text) == text


def test_inplace_module_is_built_out_of_place_and_functional_loses_the_flag() -> None:
    text = module("""
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.act = nn.ReLU(inplace=True)

            def forward(self, x):
                h = torch.sigmoid(x * nn.Parameter(x))
                return self.act(h)


        def g(x: torch.Tensor, w: torch.Tensor):
            y = x * nn.Parameter(w)
            return F.relu(x, inplace=True) + y
    """)
    findings = lint_source(text, PATH, every_rule())
    assert {f.fix.applicability for f in findings if f.code == "TIP004"} == {Applicability.UNSAFE}
    fixed = fix_all(text)
    assert "self.act = nn.ReLU(inplace=False)" in fixed and "F.relu(x) + y" in fixed


def test_leaf_writes_are_wrapped_in_no_grad_and_need_torch() -> None:
    body = """
        def f():
            table = torch.randn(3, requires_grad=True)
            table.div_(2)
            return table
    """
    fixed = fix_all(module(body))
    assert "    with torch.no_grad():\n        table.div_(2)\n" in fixed
    assert only_fix(module(body)).applicability is Applicability.UNSAFE
    without_module_name = module(body.replace("torch.randn", "randn"), header="from torch import randn\n")
    assert all(f.fix is None for f in lint_source(without_module_name, PATH, every_rule()))


def test_argument_write_clones_after_the_docstring() -> None:
    text = module('''
        class Clip(nn.Module):
            def forward(self, x):
                """Clips."""
                x.clamp_(0, 1)
                return x


        class Caller(nn.Module):
            def __init__(self):
                super().__init__()
                self.clip = Clip()

            def forward(self, z):
                s = torch.sigmoid(z * nn.Parameter(z))
                return self.clip(s)
    ''')
    assert '        """Clips."""\n        x = x.clone()\n        x.clamp_(0, 1)\n' in fix_all(text)


def test_a_leaf_handed_to_a_forward_is_cloned_not_hidden_from_autograd() -> None:
    """transformers #47741: `inputs_embeds *= scale` in a `forward`, the caller's embeddings a leaf
    that requires grad. `no_grad` would silence the error but keep rewriting the caller's tensor
    and drop the scale from its gradient; an optional argument is cloned only when given."""
    text = module("""
        class Embed(nn.Module):
            def forward(self, input_ids=None, inputs_embeds=None):
                inputs_embeds *= 2.0
                return inputs_embeds.sum()


        def attribute():
            inputs_embeds = torch.randn(4, requires_grad=True)
            Embed()(inputs_embeds=inputs_embeds).backward()
    """)
    fixed = fix_all(text)
    assert "no_grad" not in fixed
    assert "        inputs_embeds = inputs_embeds.clone() if inputs_embeds is not None else None\n" in fixed


def test_crlf_files_get_crlf_edits() -> None:
    text = module(SAVED_THEN_METHOD.replace("h.mul_(2)", "h[0] = 2.0")).replace("\n", "\r\n")
    fixed = fix_all(text)
    assert "    h = h.clone()\r\n    h[0] = 2.0\r\n" in fixed and "\n" not in fixed.replace("\r\n", "")


# --- the applier --------------------------------------------------------------------------------


def _finding(line: int, edits: tuple[Edit, ...], code: str = "TIP001") -> Finding:
    at = Span(Position(line, 0), Position(line, 1))
    return Finding(PATH, code, "n", f"m{line}{edits}", Severity.ERROR, at, "", fix=Fix("d", edits, Applicability.SAFE))


def _insert(line: int, column: int, text: str) -> Edit:
    return Edit(Span(Position(line, column), Position(line, column)), text)


def test_apply_edits_replaces_and_inserts_by_position() -> None:
    edit = Edit(Span(Position(2, 0), Position(2, 1)), "y")
    assert apply_edits("a = 1\nx = 2\n", [edit, _insert(1, 0, "# c\n")]) == "# c\na = 1\ny = 2\n"


def test_a_fix_that_would_not_compile_is_dropped_and_reported() -> None:
    good, bad = _finding(1, (_insert(1, 0, "b = 0\n"),)), _finding(2, (_insert(2, 0, "(\n"),), "TIP003")
    result = fix_text(PATH, "a = 1\nc = 2\n", lambda text: [], unsafe=False, findings=[good, bad])
    assert result.text == "b = 0\na = 1\nc = 2\n"
    assert [f.code for f in result.applied] == ["TIP001"] and [f.code for f in result.rejected] == ["TIP003"]


def test_overlapping_fixes_wait_for_the_next_round() -> None:
    first = _finding(1, (Edit(Span(Position(1, 0), Position(1, 1)), "b"),))
    second = _finding(1, (Edit(Span(Position(1, 0), Position(1, 5)), "z = 9"),), "TIP003")
    rounds = iter([[second]])
    result = fix_text(PATH, "a = 1\n", lambda text: next(rounds, []), unsafe=False, findings=[first, second])
    assert result.rounds == 2 and len(result.applied) == 2


def test_a_fix_that_leaves_its_finding_is_undone_and_reported() -> None:
    """timm's fasternet: the clone a TIP002 fix inserted could not help, and every round
    inserted another one up to the bound. The finding moves down with its statement."""

    def lint(text: str) -> list[Finding]:
        line = text.splitlines().index("y = 1") + 1
        return [replace(_finding(line, (_insert(line, 0, "x = 0\n"),)), message="m")]

    result = fix_text(PATH, "y = 1\n", lint, unsafe=False)
    assert (result.text, result.rounds, result.applied) == ("y = 1\n", 0, [])
    assert [finding.code for finding in result.ineffective] == ["TIP001"]


def test_a_finding_revealed_by_a_fix_is_not_the_fixed_one() -> None:
    """Two writes whose messages read the same (`w += a`, `w += b`) and only the first of which
    is reported (the second never runs: the first raises): fixing the first reveals the second,
    which is another finding, so the fix helped and the next round fixes the second."""

    def lint(text: str) -> list[Finding]:
        line = next((n for n, source in enumerate(text.splitlines(), 1) if "+=" in source), None)
        if line is None:
            return []
        plus = Edit(Span(Position(line, 2), Position(line, 3)), "")  # `w += a` -> `w = a`
        return [replace(_finding(line, (plus,)), message="m")]

    result = fix_text(PATH, "w += a\nw += b\n", lint, unsafe=False)
    assert (result.text, result.rounds, result.ineffective) == ("w = a\nw = b\n", 2, [])


def test_rounds_are_bounded() -> None:
    def lint(text: str) -> list[Finding]:  # a new finding after every fix
        return [replace(_finding(1, (_insert(1, 0, "x = 0\n"),)), message=f"round {text.count('x')}")]

    result = fix_text(PATH, "", lint, unsafe=False)
    assert result.rounds == MAX_ROUNDS and result.text.count("x = 0") == MAX_ROUNDS


def test_unsafe_fixes_need_unsafe() -> None:
    finding = _finding(1, (_insert(1, 0, "b = 0\n"),))
    unsafe = Finding(**{**finding.__dict__, "fix": Fix("d", finding.fix.edits, Applicability.UNSAFE)})
    assert fix_text(PATH, "a = 1\n", lambda text: [], unsafe=False, findings=[unsafe]).text == "a = 1\n"
    assert fix_text(PATH, "a = 1\n", lambda text: [], unsafe=True, findings=[unsafe]).text == "b = 0\na = 1\n"


@pytest.mark.parametrize(
    "data",
    [b"x = 1\n", b"\xef\xbb\xbfx = 1\r\n", "# -*- coding: latin-1 -*-\ns = 'caf\xe9'\n".encode("latin-1")],
    ids=["utf8", "bom-crlf", "latin1"],
)
def test_encoding_and_bom_round_trip(data: bytes) -> None:
    source = decode(data)
    assert encode(source, source.text) == data


def test_atomic_write_keeps_permissions_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "m.py"
    target.write_bytes(b"old\n")
    os.chmod(target, 0o640)
    write_atomically(target, b"new\n")
    assert target.read_bytes() == b"new\n"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    assert [path.name for path in tmp_path.iterdir()] == ["m.py"]
