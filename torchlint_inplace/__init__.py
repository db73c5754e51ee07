"""torchlint-inplace: find the in-place tensor mutations that break autograd, before anything runs."""

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """`torchlint_inplace.trace` and its errors, imported on first use: the static linter never loads torch."""
    if name in ("trace", "InplaceCulpritError", "InplaceRefusalError"):
        from . import runtime

        return getattr(runtime, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
