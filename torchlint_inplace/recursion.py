"""Room for LibCST's recursive walks over long expression chains.

LibCST visits and prints a tree recursively, several Python frames per link of a chain such
as `x + x + ... + x` or `x.relu().relu()...`: a thousand links exceed Python's default limit
of 1,000 frames. Longer chains never reach LibCST: `linting` asks Python's compiler first,
at the default limit, and it refuses nesting past three times that limit (about 3,000 links).
20,000 frames cover those, and Python 3.11 spends little C stack on Python-to-Python calls:
LibCST printed a 6,000-link chain under this limit, and overflowed the C stack at 10,000.
Wording a finding and building its fix index the whole tree (rule.FormRule.check).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

RECURSION_LIMIT = 20_000


@contextmanager
def deep_recursion() -> Iterator[None]:
    """Raises the recursion limit to RECURSION_LIMIT for the block (never lowers it)."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, RECURSION_LIMIT))
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)
