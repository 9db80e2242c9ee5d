"""How far a dispatcher's realtime claims may run ahead of its sends.

Left alone, a dispatcher woken for many busy channels claims for all of them at once: every
due row is leased before the first send has finished. The database takes those claims side
by side while the sends wait, a second dispatcher finds nothing left to lease (W1), and
rows sit leased for as long as it takes to send everything before them. The gate lets a
few claims run at a time, and only while the rows already leased and still waiting for a
send slot are fewer than `ahead`; past it, claims wait for sends to catch up.

A quiet channel (no rows waiting, and its last claim took less than it asked for) may
claim while fewer than twice `ahead` wait, and has claim places of its own: room kept for
the channels other than a busy one, so a quiet channel's one message is neither leased
only after a backlog's next claim has gone out, nor queued behind the claims of a hundred
other quiet channels' messages. A quiet claim asks for at most its share of the room that
busy channels leave (they fill it up to `ahead` and one claim more), so that all of those
places can claim at once; a channel whose claim came back full is busy from then on, until
a claim comes back short, and never takes the quiet channels' places.
"""

from __future__ import annotations

import asyncio

#: Claim transactions one dispatcher runs at once: enough to overlap their round trips,
#: few enough that a burst over many channels does not queue on the database.
CLAIMS_AT_ONCE = 4
#: Claims of channels with no rows waiting that run at once, beside those: such claims are
#: small (a channel's first, or a quiet channel's one message), and many at once.
FRESH_AT_ONCE = 16
#: How much more than `ahead` may wait once channels with nothing waiting claim too.
RESERVED_FACTOR = 2


class ClaimGate:
    def __init__(
        self, ahead: int, at_once: int = CLAIMS_AT_ONCE, fresh_at_once: int = FRESH_AT_ONCE
    ) -> None:
        if ahead < 1 or at_once < 1 or fresh_at_once < 1:
            raise ValueError("a claim gate needs ahead >= 1 and at_once >= 1")
        self.ahead = ahead
        #: Rows leased by this dispatcher that have not yet gone to a send (or back).
        self.waiting = 0
        #: Rows waiting by channel; a channel with none has no entry.
        self._by_channel: dict[int, int] = {}
        self._claiming = asyncio.Semaphore(at_once)
        self._fresh = asyncio.Semaphore(fresh_at_once)
        #: The most rows one quiet channel's claim asks for: its share of half of `ahead`.
        self.fresh_share = max(1, ahead // (2 * fresh_at_once))
        #: Channels whose last claim took all it asked for.
        self._busy: set[int] = set()
        #: Set when room may have come (each waiter checks its own).
        self._changed = asyncio.Event()
        #: Claims of channels with nothing waiting that wait for room.
        self._fresh_waiting = 0

    def claim(self, channel_id: int = 0, rows: int = 1) -> Place:
        """Hold one of the claim places once there is room for `channel_id` (`async with`),
        answering how many of the `rows` asked for the claim may take; claimers take turns
        in order.

        A busy channel, or one with rows waiting, may take them all once fewer than `ahead`
        wait. A quiet one takes at most its share (`fresh_share`) of what is left of twice
        `ahead`, held for it until the block ends
        (by then `leased` counts what it took): however many such claims run together, they
        never lease more than that."""
        return Place(self, channel_id, rows)

    def _room(self, rows: int, fresh: bool) -> int:
        if not fresh:
            return rows if self.waiting < self.ahead else 0
        return min(rows, self.fresh_share, RESERVED_FACTOR * self.ahead - self.waiting)

    def leased(self, rows: int, channel_id: int = 0, asked: int | None = None) -> Queued:
        """Count a claim's rows in; each leaves through the answer when it goes to a send.
        `asked`: what the claim asked for (a claim that took it all makes the channel busy;
        one that took less, quiet)."""
        if asked is not None:
            if rows >= asked:
                self._busy.add(channel_id)
            else:
                self._busy.discard(channel_id)
        self.waiting += rows
        self._by_channel[channel_id] = self._by_channel.get(channel_id, 0) + rows
        return Queued(self, rows, channel_id)

    def found_nothing(self, channel_id: int) -> None:
        """A claim of the channel leased nothing: it is quiet."""
        self._busy.discard(channel_id)

    def _left(self, rows: int, channel_id: int) -> None:
        self.waiting -= rows
        left = self._by_channel.get(channel_id, 0) - rows
        if left > 0:
            self._by_channel[channel_id] = left
        else:
            self._by_channel.pop(channel_id, None)
        # Wake waiters only when one of them may go: a busy channel's claim waits below
        # `ahead`, and waking it for every send in between costs a task switch each.
        if self.waiting < self.ahead or (
            self._fresh_waiting and self.waiting < RESERVED_FACTOR * self.ahead
        ):
            self._changed.set()


class Place:
    """A claim place of the gate, held for an `async with` block (`ClaimGate.claim`). A
    class rather than a generator's context manager: it is taken before every realtime
    claim, and the generator's machinery was a dozen calls of it."""

    __slots__ = ("_channel_id", "_gate", "_held", "_places", "_rows")

    def __init__(self, gate: ClaimGate, channel_id: int, rows: int) -> None:
        self._gate = gate
        self._channel_id = channel_id
        self._rows = rows
        self._held = 0
        self._places: asyncio.Semaphore | None = None

    async def __aenter__(self) -> int:
        gate = self._gate
        fresh = self._channel_id not in gate._by_channel and self._channel_id not in gate._busy
        places = gate._fresh if fresh else gate._claiming
        await places.acquire()
        self._places = places
        try:
            while (room := gate._room(self._rows, fresh)) <= 0:
                gate._changed.clear()
                gate._fresh_waiting += fresh
                try:
                    await gate._changed.wait()
                finally:
                    gate._fresh_waiting -= fresh
        except BaseException:
            self._places = None
            places.release()
            raise
        self._held = room if fresh else 0
        gate.waiting += self._held
        return room

    async def __aexit__(self, *_exc: object) -> None:
        gate = self._gate
        gate.waiting -= self._held
        self._held = 0
        gate._changed.set()
        if self._places is not None:
            self._places.release()
            self._places = None


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
