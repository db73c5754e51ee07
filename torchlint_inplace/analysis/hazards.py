"""Turns "this write hits a tensor autograd still needs" into the words a finding carries.

Every message names the concrete reason: the op that saved the tensor and its line, or the
fact that the tensor is a leaf requiring grad. Without a reason there is no finding.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..diagnostics import Related, Span
from .values import SaveRecord

BACKWARD_ERROR = "one of the variables needed for gradient computation has been modified by an inplace operation"
LEAF_ERROR = "a leaf Variable that requires grad is being used in an in-place operation"

RAISES_AT_BACKWARD = "raises at backward"
RAISES_NOW = "raises now (leaf)"


@dataclass(frozen=True)
class Hazard:
    reason: str  # the clause after "but"
    consequence: str
    related: tuple[Related, ...]


def saved_hazard(path: str, target: str, records: list[SaveRecord], at: Span) -> Hazard:
    first = records[0]
    earlier = "in an earlier loop iteration " if first.span.start > at.start else ""
    if first.what == target:
        whom = "it"
    elif first.what == "its result":
        whom = "its result"
    else:
        whom = f"`{first.what}` (an alias of it)"
    reason = f"`{first.op}` at line {first.span.start.line} {earlier}saved {whom} for backward; backward() will raise '{BACKWARD_ERROR}'"
    related = tuple(Related(path, record.span, f"`{record.op}` saved `{record.what}` for backward here") for record in records)
    return Hazard(reason, RAISES_AT_BACKWARD, related)


def leaf_hazard(path: str, origin: Span | None) -> Hazard:
    where = f" (created at line {origin.start.line})" if origin is not None else ""
    related = (Related(path, origin, "the leaf tensor that requires grad is created here"),) if origin is not None else ()
    return Hazard(f"it is a leaf tensor that requires grad{where}; this raises at once: '{LEAF_ERROR}'", RAISES_NOW, related)


def message(action: str, hazard: Hazard) -> str:
    return f"{action}, but {hazard.reason}"
