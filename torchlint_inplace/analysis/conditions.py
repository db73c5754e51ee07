"""Conditions: what must hold on a path for a finding there to happen.

A branch the analysis cannot decide (`if attn_drop > 0`, `if self.training`, `if config.x is not
None`) runs both ways; each side assumes its test (an `Assumption`). Assuming the same test again
on that path is answered, not branched, so a write under `if not self.training` never meets a
read under `if self.training`. A finding made on a path carries the assumptions that path made,
and says them: a configuration's default that makes the hazard unreachable is what makes a
finding conditional, and those are reported as warnings (see `against_default`).
"""

from __future__ import annotations

from dataclasses import dataclass

TRAINING = "self.training"
# The subject of the assumption that a method its class's other methods call, but none reached
# with the configuration analysed, runs at all (its `test` is the method's name).
REACHED = "reached"
# The subject of the assumptions that tell apart the options of a `Choice` its own conditions do
# not (`== 0`, `== 1`: one per option, exclusive as equalities are).
OPTION = "option"


@dataclass(frozen=True, order=True, slots=True)
class Assumption:
    """`subject test` assumed to hold (or not): `attn_drop > 0`, `self.training`, `act == 'relu'`."""

    subject: str  # the configuration value as written: `attn_drop`, `self.training`, `config.x`
    test: str  # "" (truthiness), "> 0", "== 'relu'", "is None", ...
    holds: bool
    default: str | None = None  # the subject's default, as written, when it has one
    against_default: bool = False  # the default makes the assumption false

    @property
    def key(self) -> tuple[str, str]:
        return (self.subject, self.test)

    def negated(self) -> Assumption:
        with_default = self.default is not None and not self.against_default
        return Assumption(self.subject, self.test, not self.holds, self.default, with_default)

    def text(self) -> str:
        if self.subject == TRAINING and not self.test:
            return "in training" if self.holds else "in eval mode"
        if self.subject == REACHED:
            return f"`{self.test}` runs (its callers here do not call it with their defaults)"
        if self.test == "is None":
            phrase = f"`{self.subject}` is None" if self.holds else f"`{self.subject}` is set"
        elif not self.test:
            phrase = f"`{self.subject}` is true" if self.holds else f"`{self.subject}` is false"
        else:
            phrase = f"`{self.subject} {self.test}`" if self.holds else f"not `{self.subject} {self.test}`"
        return f"{phrase} (default {self.default})" if self.against_default and self.default is not None else phrase


Condition = frozenset[Assumption]
ALWAYS: Condition = frozenset()
# `if x.grad_fn is not None:` / `if x.requires_grad:` on an activation: whether this run records
# autograd at all. One assumption for every such test, since they all ask the same question.
RECORDING = Assumption("autograd", "records", True)


def records_nothing(condition: Condition) -> bool:
    """The path assumed autograd records nothing: no save on it, or before it, is ever checked."""
    return any(assumption.key == RECORDING.key and not assumption.holds for assumption in condition)


def phrases(condition: Condition) -> list[str]:
    """What a finding's path assumed, worth saying: `attn_drop > 0` (default 0.0), `in training`."""
    return [assumption.text() for assumption in sorted(condition, key=_order) if _worth_saying(assumption)]


def wording(condition: Condition) -> str:
    """`when `attn_drop > 0` (default 0.0), in training`; "" when nothing is assumed worth saying."""
    shown = phrases(condition)
    return "when " + ", ".join(shown) if shown else ""


def _order(assumption: Assumption) -> tuple[bool, str, str, bool]:
    # `holds` last: a message's words must not depend on a set's order between runs
    return (assumption.subject == TRAINING, assumption.subject, assumption.test, assumption.holds)


def _worth_saying(assumption: Assumption) -> bool:
    """Assumptions that hold by default go without saying, except the mode: training is what
    backward() needs, yet a reader deserves to know a finding depends on it."""
    if assumption.subject == TRAINING:
        return True
    if assumption.key == RECORDING.key or assumption.subject.startswith(OPTION):
        return False  # the hazards it matters to are not reported without it; an option's is bookkeeping
    return assumption.against_default or assumption.default is None


def against_defaults(condition: Condition) -> bool:
    """The configuration's defaults exclude this path: nobody gets the finding without changing one."""
    return any(assumption.against_default for assumption in condition)


def consistent(condition: Condition) -> bool:
    """No test assumed both ways, and no value assumed equal to two different constants."""
    keys: dict[tuple[str, str], bool] = {}
    equal: dict[str, str] = {}
    for assumption in condition:
        if keys.setdefault(assumption.key, assumption.holds) != assumption.holds:
            return False
        if assumption.holds and assumption.test.startswith("== "):
            if equal.setdefault(assumption.subject, assumption.test) != assumption.test:
                return False
    return True
