"""torchlint-inplace: find the in-place tensor mutations that break autograd, before anything runs."""

__version__ = "0.1.0"
