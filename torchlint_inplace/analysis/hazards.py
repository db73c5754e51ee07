"""Turns "this write hits a tensor autograd still needs" into the words a finding carries.

Every message names the concrete reason: the op that saved the tensor and its line, the leaf
that requires grad, or the other reader that silently sees the new value. Without a reason
there is no finding.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from ..diagnostics import Position, Related, Span
from .conditions import Condition
from .model import Reason
from .state import SaveRecord

BACKWARD_ERROR = "one of the variables needed for gradient computation has been modified by an inplace operation"
LEAF_ERROR = "a leaf Variable that requires grad is being used in an in-place operation"

RAISES_AT_BACKWARD = "raises at backward"
RAISES_NOW = "raises now"
RAISES_NOW_LEAF = "raises now (leaf)"

SpanOf = Callable[[cst.CSTNode], Span]


@dataclass(frozen=True, slots=True)
class Hazard:
    """Why a write breaks, proven (`certain`) or only suspected (reported with --preview).

    The words name source lines, and LibCST's positions cost more than its parse, so they are
    built only for the hazards a rule reports: most suspected ones never are."""

    certain: bool
    reason: Callable[[], Reason]
    condition: Condition = frozenset()  # what the save it blames needed (a configuration's option)
    silent: bool = False  # the damage is wrong values, not an error
    refused: bool = False  # torch refuses the write itself: the path ends there


def _save_notes(path: str, records: Sequence[SaveRecord], span_of: SpanOf) -> tuple[Related, ...]:
    return tuple(
        Related(path, span_of(record.node), f"`{record.op}` saved {_saved_thing(record)} for backward here")
        for record in records
    )


def _saved_thing(record: SaveRecord) -> str:
    return record.what if record.what == "its result" else f"`{record.what}`"


def _whom(record: SaveRecord, target: str) -> str:
    if record.what == target:
        return "it"
    if record.what == "its result":
        return "its result"
    return f"`{record.what}` (an alias of it)"


def saved_reason(
    path: str,
    target: str,
    records: Sequence[SaveRecord],
    written_at: cst.CSTNode | None,
    span_of: SpanOf,
    cloned: bool = False,
) -> Reason:
    """`written_at`: the write's node when it is in the file of the saves, where loop order means
    something. `cloned`: the written tensor is itself a `.clone()`, so advising another is wrong."""
    first = records[0]
    saved_at = span_of(first.node)
    earlier = (
        "in an earlier loop iteration " if written_at is not None and saved_at.start >= span_of(written_at).end else ""
    )
    if cloned:
        advice = f"`{target}` is already a clone, and `{first.op}` saved {_saved_thing(first)}, a view of that clone: build the result out of place instead (e.g. `torch.cat`)"
    else:
        advice = f"write it out of place, or `{target} = {target}.clone()` before the in-place write"
    return Reason(
        f"`{first.op}` at line {saved_at.start.line} {earlier}saved {_whom(first, target)} for backward; backward() will raise '{BACKWARD_ERROR}'",
        RAISES_AT_BACKWARD,
        _save_notes(path, records, span_of),
        advice,
    )


def hidden_reason(path: str, how: str, records: Sequence[SaveRecord], span_of: SpanOf) -> Reason:
    first = records[0]
    line = span_of(first.node).start.line
    if how == "data":
        reason = (
            f"`.data` hides the write from autograd: `{first.op}` at line {line} saved this tensor for backward, "
            "so backward() silently computes gradients from the modified values (no error)"
        )
        consequence = f"silently changes the gradients `{first.op}` computes"
    else:
        reason = (
            f"`.detach()` shares the version counter and `{first.op}` at line {line} saved this tensor for backward; "
            f"backward() will raise '{BACKWARD_ERROR}'"
        )
        consequence = RAISES_AT_BACKWARD
    return Reason(
        reason, consequence, _save_notes(path, records, span_of), "write into a `.clone()`, or do it after backward()"
    )


Located = tuple[str, Span] | None  # a node's file and span, when its file is still known


def _where(found: Located, path: str) -> str:
    """` at line 12` where the origin is known, else nothing."""
    return f" at {_at(found, path)}" if found is not None else ""


def _made_here(found: Located, role: str) -> tuple[Related, ...]:
    """The origin's line as a related location, where it is known."""
    return (Related(found[0], found[1], role),) if found is not None else ()


def _at(found: Located, path: str) -> str:
    """`line 12`, or `line 12 of layers.py` for a line in another file."""
    assert found is not None
    where, span = found
    return f"line {span.start.line}" if where == path else f"line {span.start.line} of {Path(where).name}"


def leaf_reason(path: str, found: Located, handed_out: str | None = None) -> Reason:
    """`handed_out`: the method that gave the leaf (`parameters`), where it was not created."""
    if found is not None and handed_out is not None:
        return Reason(
            f"it is a parameter from `.{handed_out}()` at {_at(found, path)}, a leaf tensor that requires grad; "
            f"this raises at once: '{LEAF_ERROR}'",
            RAISES_NOW_LEAF,
            (Related(found[0], found[1], f"the parameters are handed out by `.{handed_out}()` here"),),
            "wrap the write in `with torch.no_grad():`, or write `p.data`",
        )
    if found is None:
        return Reason(
            f"it is a leaf tensor that requires grad (a parameter, or made with requires_grad=True); this raises at once: '{LEAF_ERROR}'",
            RAISES_NOW_LEAF,
            (),
            "wrap the write in `with torch.no_grad():`",
        )
    return Reason(
        f"it is a leaf tensor that requires grad (created at {_at(found, path)}); this raises at once: '{LEAF_ERROR}'",
        RAISES_NOW_LEAF,
        (Related(found[0], found[1], "the leaf tensor that requires grad is created here"),),
        "wrap the write in `with torch.no_grad():`, or use `nn.init.*_`",
    )


def multi_view_reason(path: str, method: str, found: Located) -> Reason:
    where = _where(found, path)
    return Reason(
        f"it is an output of `{method}()`{where}, a view torch forbids modifying in place while it requires grad; this raises at once",
        RAISES_NOW,
        (),
        f"`.clone()` the output of `{method}()` before writing it",
    )


def stale_reason(path: str, name: str, read_at: Span, held: bool, advice: str, kept: str) -> Reason:
    refers = "holds" if held else "refers to"
    return Reason(
        f"`{name}` still {refers} {kept} and is read again at line {read_at.start.line}, where it silently sees the modified values",
        f"silently changes `{name}` read at line {read_at.start.line}",
        (Related(path, read_at, f"`{name}` is read here after the in-place write"),),
        advice,
    )


def kept_reason(owner: str, accessor: str, path: str, found: Located) -> Reason:
    """`found`: the accessor's definition (in the file of the run that hands the tensor out),
    shown by its `def` line."""
    if found is not None:
        start = found[1].start
        found = (found[0], Span(start, Position(start.line, start.column + len(f"def {accessor}"))))
    return Reason(
        f"it is a tensor `{owner}` keeps (held by an attribute of `self`) and `{accessor}`{_where(found, path)} hands "
        "out: the change stays in the object, so every later access to that item (the next epoch's) reads the "
        "modified values",
        f"silently changes what `{owner}` stores",
        _made_here(found, f"`{accessor}`, which hands out what `self` stores, is defined here"),
        f"write into a `.clone()` of what `{accessor}` takes from `self`",
    )


def step_reason(path: str, loss: str, built: Span, later_backward: Span, reload: bool = False) -> Reason:
    """A loss backpropagated after its parameters were rewritten: by an optimizer's step, or by
    `load_state_dict` (`reload`)."""
    update = "the reload" if reload else "the step"
    return Reason(
        f"`{loss}` was computed through those parameters at line {built.start.line}, before {update}, "
        f"and `backward()` at line {later_backward.start.line} goes back through that graph; it will raise '{BACKWARD_ERROR}'",
        RAISES_AT_BACKWARD,
        (
            Related(path, built, f"`{loss}` is computed here, before {update}"),
            Related(path, later_backward, "and backpropagated through here, after it"),
        ),
        "call backward() (or autograd.grad) on every loss through the weights before reloading them, or reload after it"
        if reload
        else "call every backward() through a graph before stepping, or recompute the forward after step()",
    )


def expanded_reason(target: str, method: str, path: str, found: Located) -> Reason:
    return Reason(
        f"`{target}` is a view made by `{method}`{_where(found, path)}, whose entries share one memory: the write lands in every entry "
        "(torch refuses most in-place ops on it, 'unsupported operation: more than one element of the "
        "written-to tensor refers to a single memory location'; an index assignment silently writes them all)",
        "silently changes every expanded entry",
        _made_here(found, f"the `{method}` view is made here"),
        "make the entries their own tensors first: `.clone()` after `expand`, or `repeat` instead of `expand`",
    )


def overlap_reason(operand: str, target: str, line: int) -> Reason:
    return Reason(
        f"its operand `{operand}` is a view of `{target}` itself: the op at line {line} reads elements it has already overwritten",
        "silently computes wrong values",
        (),
        f"use the out-of-place form, or clone the operand: `{operand}.clone()`",
    )


def hook_input_reason(hook: str, path: str, defined: Span) -> Reason:
    return Reason(
        f"its forward hook `{hook}` (line {defined.start.line}) runs after the module and receives that input "
        "already rewritten: what the hook reads or keeps is not what the module was given",
        "silently changes what the hook sees",
        (Related(path, defined, f"the forward hook `{hook}` reads the module's input here"),),
        "use the out-of-place form (inplace=False), or read the input in a forward pre-hook",
    )


def hooked_reason(what: str, path: str, found: Located) -> Reason:
    """`what`: which tensor of the hooked module it is (`the output of `self.features``)."""
    where = _where(found, path)
    return Reason(
        f"it is {what}{where}, which has a full backward hook: torch makes that tensor a view "
        "(BackwardHookFunctionBackward) and refuses to modify it in place; this raises at once",
        RAISES_NOW,
        _made_here(found, "the hooked module is called here"),
        "write into a `.clone()`, use the out-of-place form, or record gradients with a forward hook "
        "that calls `output.register_hook(...)` instead of a module backward hook",
    )


INFERENCE_ERROR = "Inplace update to inference tensor outside InferenceMode is not allowed"


def inference_reason(path: str, found: Located) -> Reason:
    """`found`: the function that entered inference_mode, located when it did (another file's
    tree may be forgotten by the time the finding is worded)."""
    where = f" (entered in the function{_where(found, path)})" if found is not None else ""
    return Reason(
        f"it was created under `torch.inference_mode()`{where}; this raises at once: '{INFERENCE_ERROR}'",
        RAISES_NOW,
        _made_here(found, "the function that enters inference mode, where the tensor is created"),
        "`.clone()` it outside inference mode before writing, or create it under `torch.no_grad()` instead",
    )
