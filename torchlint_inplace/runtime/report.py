"""The culprit error (what was saved where, what wrote over it where, and which rule that is),
and the silent report (a write that raised nothing but changed what another reader gets).

The message starts with autograd's own sentence, so code and tests that match on "modified by an
inplace operation" keep working; the rest names both lines with code frames. Everything in the
message is also on the exception as data (`.saved`, `.writes`, `.rule`, `.fix`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .diagnosis import Diagnosis, diagnose
from .sites import Site, code_frame
from .statements import Variables


@dataclass(frozen=True)
class TensorInfo:
    shape: tuple[int, ...]
    dtype: str
    device: str
    type_name: str  # autograd's spelling, e.g. torch.FloatTensor

    @property
    def text(self) -> str:
        return f"{self.dtype.removeprefix('torch.')}[{', '.join(map(str, self.shape))}] on {self.device}"

    def to_dict(self) -> dict[str, object]:
        return {"shape": list(self.shape), "dtype": self.dtype.removeprefix("torch."), "device": self.device}


def tensor_info(tensor: torch.Tensor) -> TensorInfo:
    return TensorInfo(tuple(tensor.shape), str(tensor.dtype), str(tensor.device), tensor.type())


@dataclass(frozen=True)
class Related:
    """A second line of an explanation, and its role (`the views were made`, `the module was built`)."""

    role: str
    site: Site

    def to_dict(self) -> dict[str, object]:
        return {"role": self.role, **self.site.to_dict()}


def site_dict(site: Site | None) -> dict[str, object] | None:
    return site.to_dict() if site is not None else None


@dataclass(frozen=True)
class SavedEvent:
    """An op saving a tensor for backward."""

    op: str
    version: int
    site: Site | None

    @property
    def file(self) -> str | None:
        return self.site.file if self.site is not None else None

    @property
    def line(self) -> int | None:
        return self.site.line if self.site is not None else None

    @property
    def code(self) -> str:
        return self.site.code if self.site else ""


@dataclass(frozen=True)
class WriteEvent(SavedEvent):
    """An in-place op writing to the storage of a saved tensor; `version` is the one it leaves.
    `built` is where the torch module that did the write (`nn.ReLU(inplace=True)`) was built or
    made in place, when the tracer saw it: the line to edit, while `site` stays the call that ran it."""

    diagnosis: Diagnosis
    built: Related | None = None

    def lines_in(self, file: str) -> set[int]:
        """The lines of `file` a finding about this write may be reported at: the write's own,
        and the line that built the module that did it (where TIP004 reports)."""
        sites = (self.site, self.built.site if self.built is not None else None)
        return {site.line for site in sites if site is not None and site.file == file}


def write_event(
    op: str,
    version: int,
    site: Site | None,
    saved: SavedEvent,
    built: Related | None = None,
    local: Variables | None = None,
    detached: bool = False,
) -> WriteEvent:
    return WriteEvent(op, version, site, diagnose(op, site, saved.site, local, detached), built)


class InplaceCulpritError(RuntimeError):
    """A tensor saved for backward was modified in place; says by which line, and which line saved it.

    `at_write` is True in fail-fast mode (raised by the write itself, before it ran) and False
    when raised at backward, where autograd would have raised its version-counter error.
    """

    def __init__(
        self, tensor: TensorInfo, saved: SavedEvent, writes: tuple[WriteEvent, ...], version: int, at_write: bool
    ) -> None:
        self.tensor = tensor
        self.saved = saved
        self.writes = writes
        self.version = version
        self.at_write = at_write
        culprit = writes[-1].diagnosis if writes else None
        self.rule = culprit.code if culprit else None
        self.fix = culprit.fix if culprit else None
        super().__init__(self.render())

    def to_dict(self) -> dict[str, object]:
        """The error for `trace --format json`: the last write is the mutation to fix."""
        mutation = self.writes[-1] if self.writes else None
        return {
            "kind": "modified-before-backward",
            "at_write": self.at_write,
            "message": self.headline(),
            "rule": self.rule,
            "fix": self.fix,
            "tensor": self.tensor.to_dict(),
            "mutation": site_dict(mutation.site) if mutation else None,
            "built": mutation.built.to_dict() if mutation and mutation.built else None,
            "saved": {"op": self.saved.op, **(site_dict(self.saved.site) or {})},
            "writes": [
                {"op": write.op, "version": write.version, **(site_dict(write.site) or {})} for write in self.writes
            ],
            "text": str(self),
        }

    def headline(self) -> str:
        if self.at_write:
            return (
                f"in-place `{self.writes[-1].op}` modifies a tensor saved for a pending backward: backward() would raise "
                f'"one of the variables needed for gradient computation has been modified by an inplace operation"'
            )
        return (
            "one of the variables needed for gradient computation has been modified by an inplace operation: "
            f"[{self.tensor.type_name} [{', '.join(map(str, self.tensor.shape))}]] is at version {self.version}; "
            f"expected version {self.saved.version} instead."
        )

    def render(self) -> str:
        lines = [self.headline(), "", f"  tensor: {self.tensor.text}, saved at version {self.saved.version}", ""]
        lines += event_block(f"saved for backward by `{self.saved.op}`", self.saved.site)
        for group in _by_statement(self.writes):
            ops = ", ".join(f"`{write.op}`" for write in group)
            refused = self.at_write and group[-1] is self.writes[-1]
            state = "refused" if refused else f"now version {group[-1].version}"
            lines += event_block(f"modified in place by {ops} ({state})", group[0].site)
            if group[0].built is not None:
                lines += event_block(group[0].built.role, group[0].built.site)
        if not self.writes:
            lines += ["  modified in place by an op the tracer did not see (outside the traced block?)", ""]
        if self.rule:
            lines.append(f"  {self.rule}: {self.fix}")
        return "\n".join(lines).rstrip()


def _by_statement(writes: tuple[WriteEvent, ...]) -> list[list[WriteEvent]]:
    """Consecutive writes from one line run as one statement (`x[i] += v` is `add_` then `copy_`)."""
    groups: list[list[WriteEvent]] = []
    for write in writes:
        if groups and groups[-1][-1].site == write.site:
            groups[-1].append(write)
        else:
            groups.append([write])
    return groups


def event_block(title: str, site: Site | None) -> list[str]:
    if site is None:
        return [f"  {title} (no user code on the stack)", ""]
    return [f"  {title} at {site.location} in {site.function}:", *code_frame(site), ""]


@dataclass
class SilentReport:
    """One silent corruption: what happened (`summary`), the write, the second line, and the fix."""

    kind: str
    summary: str
    write: Site
    related: tuple[Related, ...]
    rule: str
    fix: str
    tensor: TensorInfo | None
    name: str | None
    built: Related | None = None  # where the torch module that wrote was built, when the write was its call
    count: int = 1

    @property
    def key(self) -> tuple[object, ...]:
        return (self.kind, self.write.file, self.write.line, tuple((r.site.file, r.site.line) for r in self.related))

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "summary": self.summary,
            "rule": self.rule,
            "fix": self.fix,
            "count": self.count,
            "tensor": {"name": self.name, **self.tensor.to_dict()} if self.tensor else None,
            "write": self.write.to_dict(),
            "built": self.built.to_dict() if self.built else None,
            "related": [related.to_dict() for related in self.related],
        }

    def render(self) -> str:
        times = f" ({self.count} times)" if self.count > 1 else ""
        lines = [f"silent corruption{times}: {self.summary}", ""]
        if self.tensor is not None:
            lines += [f"  tensor: {f'`{self.name}`, ' if self.name else ''}{self.tensor.text}", ""]
        lines += event_block("written in place", self.write)
        lines += [line for related in self.related for line in event_block(related.role, related.site)]
        if self.built is not None:
            lines += event_block(self.built.role, self.built.site)
        lines.append(f"  {self.rule}: {self.fix}")
        return "\n".join(lines)
