"""The statuses a probe reports for a finding's line, and which of two is the stronger evidence.

Several drivers (and, in the server, several devices) can speak for one line; the probe keeps
each line's strongest status, and `forkserver.py` merges the children's reports the same way,
so the order lives here, below both.
"""

from __future__ import annotations

CONFIRMED, CHANGES, BENIGN, NOT_REACHED = "confirmed: raises", "confirmed: changes results", "benign", "not reached"
# When several drivers (or devices) speak for one line, the strongest evidence wins.
RANK = {CONFIRMED: 4, CHANGES: 3, BENIGN: 2, NOT_REACHED: 1}


def rank(status: str) -> int:
    """How strong the evidence is; `confirmed: changes results (how)` ranks as its kind."""
    return RANK.get(status.split(" (", 1)[0], 0)


def stronger(first: str | None, second: str) -> str:
    return second if first is None or rank(second) > rank(first) else first
