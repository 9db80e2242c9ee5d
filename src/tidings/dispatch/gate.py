"""How far a dispatcher's realtime claims may run ahead of its sends.

Left alone, a dispatcher woken for many busy channels claims for all of them at once: every
due row is leased before the first send has finished. The database takes those claims side
by side while the sends wait, a second dispatcher finds nothing left to lease (W1), and
rows sit leased for as long as it takes to send everything before them. The gate lets a
few claims run at a time, and only while the rows already leased and still waiting for a
send slot are fewer than `ahead`; past it, claims wait for sends to catch up.

A channel with no rows waiting may claim while fewer than twice `ahead` wait: room kept for
the channels other than a busy one, so a quiet channel's one message is not leased only
after a backlog's next claim has gone out.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator

#: Claim transactions one dispatcher runs at once: enough to overlap their round trips,
#: few enough that a burst over many channels does not queue on the database.
CLAIMS_AT_ONCE = 4
#: How much more than `ahead` may wait once channels with nothing waiting claim too.
RESERVED_FACTOR = 2


class ClaimGate:
    def __init__(self, ahead: int, at_once: int = CLAIMS_AT_ONCE) -> None:
        if ahead < 1 or at_once < 1:
            raise ValueError("a claim gate needs ahead >= 1 and at_once >= 1")
        self.ahead = ahead
        #: Rows leased by this dispatcher that have not yet gone to a send (or back).
        self.waiting = 0
        self._by_channel: Counter[int] = Counter()
        self._claiming = asyncio.Semaphore(at_once)
        #: Set when room may have come (each waiter checks its own).
        self._changed = asyncio.Event()

    @contextlib.asynccontextmanager
    async def claim(self, channel_id: int = 0) -> AsyncIterator[None]:
        """Hold one of the claim places once there is room for `channel_id`; claimers take
        turns in order."""
        async with self._claiming:
            while not self._has_room(channel_id):
                self._changed.clear()
                await self._changed.wait()
            yield

    def _has_room(self, channel_id: int) -> bool:
        if self.waiting < self.ahead:
            return True
        return self._by_channel[channel_id] == 0 and self.waiting < RESERVED_FACTOR * self.ahead

    def leased(self, rows: int, channel_id: int = 0) -> Queued:
        """Count a claim's rows in; each leaves through the answer when it goes to a send."""
        self.waiting += rows
        self._by_channel[channel_id] += rows
        return Queued(self, rows, channel_id)

    def _left(self, rows: int, channel_id: int) -> None:
        self.waiting -= rows
        self._by_channel[channel_id] -= rows
        drained = self._by_channel[channel_id] <= 0
        if drained:
            del self._by_channel[channel_id]
        if self.waiting < self.ahead or (drained and self.waiting < RESERVED_FACTOR * self.ahead):
            self._changed.set()


class Queued:
    """One claim's rows still waiting for a send."""

    def __init__(self, gate: ClaimGate, rows: int, channel_id: int = 0) -> None:
        self._gate = gate
        self.rows = rows
        self._channel_id = channel_id

    def one(self) -> None:
        """A row went to a send, or was given back unsent."""
        if self.rows > 0:
            self.rows -= 1
            self._gate._left(1, self._channel_id)

    def release(self) -> None:
        """The claim is over: whatever did not go to a send was given back."""
        if self.rows > 0:
            self._gate._left(self.rows, self._channel_id)
            self.rows = 0
