"""Digest segmentation (D5): how many entries, oldest first, fit in one message.

Pure: the caller passes a `fits(n)` predicate that renders the first n entries and measures
them in the channel's own unit, so every flavour (JSON, markdown, text) segments the same way.
"""

from __future__ import annotations

from collections.abc import Callable


def fitting_prefix(count: int, fits: Callable[[int], bool]) -> int:
    """The largest n ≤ count with fits(n), assuming a message only grows as entries are added.

    0 means not even the first entry fits on its own: it must be shortened, never dropped.
    Binary search: about log2(500) ≈ 9 renders for the largest batch.
    """
    low, high = 0, count
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low
