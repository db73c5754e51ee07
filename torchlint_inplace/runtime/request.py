"""What the server asks of one child: a file, the findings on its lines, a device.

Built by `forkserver.py` from a JSON request, read by the orchestration (`probe.py`: which lines,
which fixes) and by the harness (`harness.py`: the device, the configured constructor arguments
and inputs, the memory limit to name), so it sits below both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..diagnostics import Fix
from .inputs import Spec


@dataclass
class Request:
    file: Path
    codes: dict[int, list[str]]  # finding line -> rule codes on it
    device: str
    specs: dict[str, Spec] = field(default_factory=dict)
    fixes: dict[int, dict[str, Fix]] = field(default_factory=dict)  # finding line -> code -> its fix
    memory_bytes: int | None = None  # the child's address-space limit, to name when it runs out
