"""The rule catalogue: one module per rule, installed as `torchlint_inplace.rules`."""
