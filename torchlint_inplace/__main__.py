"""`python -m torchlint_inplace` is the `torchlint-inplace` command."""

from .cli import main

main(prog_name="torchlint-inplace")
