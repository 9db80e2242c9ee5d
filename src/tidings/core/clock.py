"""The clock, injected: wall time for what is stored and compared with the database, and a
monotonic time for deadlines within a process.

Pure code takes a `Clock` (or a `now`) and never reads the time itself; `SYSTEM_CLOCK` is the
one place the real clock is read, and tests pass a clock they move by hand.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """Wall time, timezone-aware UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin, never going back (leases' local deadlines)."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()


SYSTEM_CLOCK: Clock = SystemClock()
