"""Digest segmentation (D5): how many entries, oldest first, fit in one message.

Pure: the caller passes a `fits(n)` predicate that renders the first n entries and measures
them in the channel's own unit, so every flavour (JSON, markdown, text) segments the same way.
"""

from __future__ import annotations

from collections.abc import Callable


def fitting_prefix(count: int, fits: Callable[[int], bool]) -> int:
    """The largest n ≤ count with fits(n), assuming a message only grows as entries are added.

    0 means not even the first entry fits on its own: it must be shortened, never dropped.
    Galloping (1, 2, 4, … then bisecting the last step): each probe renders its n entries,
    so probing near the answer rather than from the middle of a 500-entry batch keeps a
    message of k entries to about 4k entry renders instead of about 500.
    """
    if count <= 0 or not fits(1):
        return 0
    low, high = 1, count  # fits(low) holds; the answer is at most high
    probe = 2
    while probe <= count:
        if not fits(probe):
            high = probe - 1
            break
        low = probe
        probe *= 2
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low
