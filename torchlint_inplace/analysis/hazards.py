"""Turns "this write hits a tensor autograd still needs" into the words a finding carries.

Every message names the concrete reason: the op that saved the tensor and its line, the leaf
that requires grad, or the other reader that silently sees the new value. Without a reason
there is no finding.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..diagnostics import Related, Span
from .model import Reason
from .values import SaveRecord

BACKWARD_ERROR = "one of the variables needed for gradient computation has been modified by an inplace operation"
LEAF_ERROR = "a leaf Variable that requires grad is being used in an in-place operation"

RAISES_AT_BACKWARD = "raises at backward"
RAISES_NOW = "raises now"
RAISES_NOW_LEAF = "raises now (leaf)"

SpanOf = Callable[[object], Span]


@dataclass(frozen=True)
class Hazard:
    """Why a write breaks, proven (`certain`) or only suspected (reported with --preview).

    The words name source lines, and LibCST's positions cost more than its parse, so they are
    built only for the hazards a rule reports: most suspected ones never are."""

    certain: bool
    reason: Callable[[], Reason]


def _save_notes(path: str, records: Sequence[SaveRecord], span_of: SpanOf) -> tuple[Related, ...]:
    return tuple(Related(path, span_of(record.node), f"`{record.op}` saved {_saved_thing(record)} for backward here") for record in records)


def _saved_thing(record: SaveRecord) -> str:
    return record.what if record.what == "its result" else f"`{record.what}`"


def _whom(record: SaveRecord, target: str) -> str:
    if record.what == target:
        return "it"
    if record.what == "its result":
        return "its result"
    return f"`{record.what}` (an alias of it)"


def saved_reason(path: str, target: str, records: Sequence[SaveRecord], written_at: object | None, span_of: SpanOf) -> Reason:
    """`written_at`: the write's node when it is in the file of the saves, where loop order means something."""
    first = records[0]
    saved_at = span_of(first.node)
    earlier = "in an earlier loop iteration " if written_at is not None and saved_at.start >= span_of(written_at).end else ""
    return Reason(
        f"`{first.op}` at line {saved_at.start.line} {earlier}saved {_whom(first, target)} for backward; backward() will raise '{BACKWARD_ERROR}'",
        RAISES_AT_BACKWARD,
        _save_notes(path, records, span_of),
        f"write it out of place, or `{target} = {target}.clone()` before the in-place write",
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
    return Reason(reason, consequence, _save_notes(path, records, span_of), "write into a `.clone()`, or do it after backward()")


def leaf_reason(path: str, origin: object, span_of: SpanOf) -> Reason:
    if origin is None:
        return Reason(f"it is a leaf tensor that requires grad; this raises at once: '{LEAF_ERROR}'", RAISES_NOW_LEAF, (), "wrap the write in `with torch.no_grad():`")
    span = span_of(origin)
    return Reason(
        f"it is a leaf tensor that requires grad (created at line {span.start.line}); this raises at once: '{LEAF_ERROR}'",
        RAISES_NOW_LEAF,
        (Related(path, span, "the leaf tensor that requires grad is created here"),),
        "wrap the write in `with torch.no_grad():`, or use `nn.init.*_`",
    )


def multi_view_reason(method: str, made_at: Span) -> Reason:
    return Reason(
        f"it is an output of `{method}()` at line {made_at.start.line}, a view torch forbids modifying in place while it requires grad; this raises at once",
        RAISES_NOW,
        (),
        f"`.clone()` the output of `{method}()` before writing it",
    )


def stale_reason(path: str, name: str, read_at: Span) -> Reason:
    return Reason(
        f"`{name}` still refers to the same tensor and is read again at line {read_at.start.line}, where it silently sees the modified values",
        f"silently changes `{name}` read at line {read_at.start.line}",
        (Related(path, read_at, f"`{name}` is read here after the in-place write"),),
        "pass a `.clone()`, or use the out-of-place form (inplace=False)",
    )


def step_reason(path: str, retained: Span, later_backward: Span) -> Reason:
    return Reason(
        f"`backward(retain_graph=True)` at line {retained.start.line} kept a graph that saved those parameters alive, "
        f"and `backward()` at line {later_backward.start.line} goes through it again; it will raise '{BACKWARD_ERROR}'",
        RAISES_AT_BACKWARD,
        (
            Related(path, retained, "the graph is kept alive here"),
            Related(path, later_backward, "and backpropagated through again here"),
        ),
        "call every backward() through a shared graph before stepping, or recompute the forward after step()",
    )
