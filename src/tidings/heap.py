"""Garbage-collector settings for long-running processes: tidings' own (worker, serve, run)
call `settle` after start-up, and so may an application that publishes large batches
(`tidings.settle_heap`).

Start-up leaves a large heap of objects that live as long as the process (modules, SQLAlchemy
compiled statements, templates). Left in the collector's generations, every full pass walks
them again; under a delivery storm that was a tenth of the dispatcher's CPU. Freezing them
after start-up and collecting the young generation less often keeps that cost off the send path.
"""

from __future__ import annotations

import gc

#: Allocations between young-generation passes (CPython's default is 700).
YOUNG_THRESHOLD = 50_000


def settle() -> None:
    """Move everything alive now out of the collector's sight; call once start-up is done."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
