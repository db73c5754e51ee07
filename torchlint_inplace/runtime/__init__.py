"""Runtime parts of torchlint-inplace: the only place that imports torch.

`trace()` explains the "modified by an inplace operation" error with the saving and the
mutating source line (`InplaceCulpritError`), and the errors autograd raises at the write itself
(`InplaceRefusalError`); its `reports` hold the silent corruption it saw (`SilentReport`).
`run_script` runs a script under it (`torchlint-inplace trace`).
`confirm.py` (`--confirm`) imports neither torch nor user code itself, so the names below are
loaded on first use: importing this package costs nothing until the tracer is wanted.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what `__getattr__` loads, for the type checker
    from .refusals import InplaceRefusalError as InplaceRefusalError
    from .report import InplaceCulpritError as InplaceCulpritError
    from .report import SavedEvent as SavedEvent
    from .report import SilentReport as SilentReport
    from .report import TensorInfo as TensorInfo
    from .report import WriteEvent as WriteEvent
    from .tracer import Tracer as Tracer
    from .tracer import trace as trace

_EXPORTS = {
    "InplaceCulpritError": ".report",
    "InplaceRefusalError": ".refusals",
    "SilentReport": ".report",
    "SavedEvent": ".report",
    "TensorInfo": ".report",
    "WriteEvent": ".report",
    "Tracer": ".tracer",
    "trace": ".tracer",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
