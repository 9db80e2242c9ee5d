"""One line per run of the same failure, not one per poll.

A database that is away, or a disk that is full, fails every channel's job on every look: a
log line each time buries the one that says what happened. The first failure of a run is
said at once; the same failure again at most once per `every_s`, with how many were held
back; a different failure at once; and the end of the run once, when a job succeeds again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _Run:
    cause: str
    said_at: float
    held_back: int = 0
    total: int = 1


class RepeatedFailures:
    def __init__(self, every_s: float, monotonic: Callable[[], float]) -> None:
        self._every_s = every_s
        self._monotonic = monotonic
        self._runs: dict[object, _Run] = {}

    def failed(self, key: object, cause: str) -> int | None:
        """Whether to say this failure of `key`: None to stay quiet, else how many of the same
        were held back since it was last said (0: a new failure)."""
        now = self._monotonic()
        run = self._runs.get(key)
        if run is None or run.cause != cause:
            self._runs[key] = _Run(cause, now, total=1 + (run.total if run else 0))
            return 0
        run.total += 1
        if now - run.said_at < self._every_s:
            run.held_back += 1
            return None
        held_back, run.held_back, run.said_at = run.held_back, 0, now
        return held_back

    def succeeded(self, key: object) -> int:
        """`key` works again: how many failures in a row it had (0: none, nothing to say)."""
        run = self._runs.pop(key, None)
        return 0 if run is None else run.total
