"""Runtime parts of torchlint-inplace: the only place that imports torch.

`trace()` explains the "modified by an inplace operation" error with the saving and the
mutating source line; `run_script` runs a script under it (`torchlint-inplace trace`).
"""

from .report import InplaceCulpritError, SavedEvent, TensorInfo, WriteEvent
from .tracer import Tracer, trace

__all__ = ["InplaceCulpritError", "SavedEvent", "TensorInfo", "Tracer", "WriteEvent", "trace"]
