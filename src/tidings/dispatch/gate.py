"""How far a dispatcher's realtime claims may run ahead of its sends.

Left alone, a dispatcher woken for many busy channels claims for all of them at once: every
due row is leased before the first send has finished. The database takes those claims side
by side while the sends wait, a second dispatcher finds nothing left to lease (W1), and
rows sit leased for as long as it takes to send everything before them. The gate lets a
few claims run at a time, and only while the rows already leased and still waiting for a
send slot are fewer than `ahead`; past it, claims wait for sends to catch up.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

#: Claim transactions one dispatcher runs at once: enough to overlap their round trips,
#: few enough that a burst over many channels does not queue on the database.
CLAIMS_AT_ONCE = 4


class ClaimGate:
    def __init__(self, ahead: int, at_once: int = CLAIMS_AT_ONCE) -> None:
        if ahead < 1 or at_once < 1:
            raise ValueError("a claim gate needs ahead >= 1 and at_once >= 1")
        self.ahead = ahead
        #: Rows leased by this dispatcher that have not yet gone to a send (or back).
        self.waiting = 0
        self._claiming = asyncio.Semaphore(at_once)
        self._room = asyncio.Event()
        self._room.set()

    @contextlib.asynccontextmanager
    async def claim(self) -> AsyncIterator[None]:
        """Hold one of the claim places once there is room; claimers take turns in order."""
        async with self._claiming:
            while self.waiting >= self.ahead:
                await self._room.wait()
            yield

    def leased(self, rows: int) -> Queued:
        """Count a claim's rows in; each leaves through the answer when it goes to a send."""
        self.waiting += rows
        if self.waiting >= self.ahead:
            self._room.clear()
        return Queued(self, rows)

    def _left(self, rows: int) -> None:
        self.waiting -= rows
        if self.waiting < self.ahead:
            self._room.set()


class Queued:
    """One claim's rows still waiting for a send."""

    def __init__(self, gate: ClaimGate, rows: int) -> None:
        self._gate = gate
        self.rows = rows

    def one(self) -> None:
        """A row went to a send, or was given back unsent."""
        if self.rows > 0:
            self.rows -= 1
            self._gate._left(1)

    def release(self) -> None:
        """The claim is over: whatever did not go to a send was given back."""
        if self.rows > 0:
            self._gate._left(self.rows)
            self.rows = 0
