"""One object per distinct frozenset kept in the memo.

A model zoo's analysis keeps hundreds of thousands of small frozensets alive in its memo (path
conditions, the files each run read, the hooks in force), most of them equal to one another: on
timm 570 k of them, 85 k distinct, 150 MB at 216 bytes or more each, a third of them empty.
Frozensets are values, never compared by identity, so equal ones can be one object.

Only sets of plain values (strings, numbers, `Assumption`s) are shared: the table outlives the
memo entries that made a set, and a set of `ClassInfo`s kept there would keep their syntax
trees alive after their files are forgotten (it kept 1.4 M syntax nodes of timm's evicted files).
"""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")
# Past this many distinct sets the table starts again: sharing saves memory, it is never needed.
MAX_SHARED = 200_000
_EMPTY: frozenset[object] = frozenset()
_shared: dict[frozenset[object], frozenset[object]] = {}


def shared(items: frozenset[T]) -> frozenset[T]:
    """The one kept frozenset equal to `items`."""
    if not items:
        return _EMPTY  # type: ignore[return-value]
    known = _shared.get(items)
    if known is None:
        if len(_shared) >= MAX_SHARED:
            _shared.clear()
        known = _shared[items] = items
    return known  # type: ignore[return-value]
