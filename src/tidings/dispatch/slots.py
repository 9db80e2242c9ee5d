"""Send slots: how many sends a dispatcher runs at once, handed out fairly between channels.

A plain semaphore serves waiters in arrival order: a channel draining a backlog keeps dozens
of sends waiting for a slot, and a quiet channel's one message queues behind all of them.
Here each channel waits in its own line and a freed slot goes to the next channel in turn,
so a channel with one message waits for at most one send of each busy channel.

A few slots are kept for channels with no send in flight: a channel already sending leaves
them free, so a quiet channel's message starts at once rather than when the next of the
backlog's sends ends (under load, one of the longer waits on its way).

On a full core, sends in flight beyond what the core can serve add no throughput, only
queueing: each turn of the event loop serves every one of them, and a quiet channel's event
needs several turns (its wake-up, claim, send and answer) on its way. So while the loop is
saturated and channels send together, one channel holds at most a share of the slots; the
rest stay free and the turns short. A channel sending alone keeps every slot, and so does a
backlog to a slow receiver: the loop is idle between its answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import AsyncIterator

#: One slot in this many is kept for channels with no send in flight (none below 16).
RESERVED_EVERY = 16
#: While channels send together on a saturated loop, one channel holds at most one slot in
#: this many (and always more than the reserved ones).
SHARE_EVERY = 3
#: The loop counts as saturated once a callback waits this long for its turn (smoothed),
#: and as calm again below CALM_S; the gap keeps the share from flapping.
SATURATED_S = 0.002
CALM_S = 0.0005
#: Weight of the newest wait in the smoothed one, measured this often while slots are taken.
LAG_WEIGHT = 0.2
PROBE_EVERY_S = 0.005
#: Channels send together while a slot passed from one to another this recently.
TOGETHER_S = 1.0


class SendSlots:
    def __init__(self, size: int, reserved: int | None = None) -> None:
        if size < 1:
            raise ValueError("send slots need size >= 1")
        self._free = size
        #: Slots a channel with sends in flight leaves free.
        self.reserved = size // RESERVED_EVERY if reserved is None else reserved
        #: Sends in flight by channel; a channel with none has no entry (a plain dict: a
        #: Counter's `__missing__` and `__delitem__` are Python calls on every send).
        self._in_flight: dict[int, int] = {}
        # channel id -> its waiters in arrival order; the dict's order is the channels' turns.
        self._lines: dict[int, deque[asyncio.Future[None]]] = {}
        self._size = size
        #: What one channel may hold while the loop is saturated and channels send together.
        self.share = max(size // SHARE_EVERY, self.reserved + 1)
        self.saturated = False
        self._lag = 0.0
        self._probing = False
        self._last_taker: int | None = None
        self._passed_at = -math.inf

    @property
    def free(self) -> int:
        return self._free

    @contextlib.asynccontextmanager
    async def slot(self, channel_id: int) -> AsyncIterator[None]:
        """Hold one slot for a send of `channel_id`."""
        await self.acquire(channel_id)
        try:
            yield
        finally:
            self.release(channel_id)

    def _may_take(self, channel_id: int) -> bool:
        held = self._in_flight.get(channel_id)
        if held is None:
            return self._free > 0
        if held >= self.share and self.saturated and self._together():
            return False
        return self._free > self.reserved

    def _together(self) -> bool:
        return time.monotonic() - self._passed_at < TOGETHER_S

    def _take(self, channel_id: int) -> None:
        self._free -= 1
        self._in_flight[channel_id] = self._in_flight.get(channel_id, 0) + 1
        if channel_id != self._last_taker:
            if self._last_taker is not None:
                self._passed_at = time.monotonic()
            self._last_taker = channel_id
        if not self._probing:
            self._probing = True
            asyncio.get_running_loop().call_later(PROBE_EVERY_S, self._probe)

    def _probe(self) -> None:
        """Time how long a callback waits for its turn, every PROBE_EVERY_S while any slot
        is taken. (A callback scheduled anew each turn would keep the loop from ever
        sleeping, and a timer's own lateness is measured in whole milliseconds by uvloop.)"""
        asyncio.get_running_loop().call_soon(self._probed, time.monotonic())

    def _probed(self, scheduled: float) -> None:
        self._lag += LAG_WEIGHT * (time.monotonic() - scheduled - self._lag)
        if self.saturated and self._lag < CALM_S:
            self.saturated = False
            while self._hand_on():  # what the share held back
                pass
        elif not self.saturated and self._lag > SATURATED_S:
            self.saturated = True
        if self._free < self._size:
            asyncio.get_running_loop().call_later(PROBE_EVERY_S, self._probe)
        else:
            self._probing = False

    async def acquire(self, channel_id: int) -> None:
        """`slot` without its context manager (~1.3 µs a send less): each `acquire` must
        be followed by one `release`, also when what it guarded failed."""
        # A channel with nothing in flight goes ahead of the lines: the reserved slots are
        # its own, and any other free slot is one no channel in line may take.
        if self._may_take(channel_id) and (not self._lines or channel_id not in self._in_flight):
            self._take(channel_id)
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._lines.setdefault(channel_id, deque()).append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release(channel_id)  # handed a slot as it was cancelled: pass it on
            else:
                self._leave(channel_id, waiter)
            raise

    def _leave(self, channel_id: int, waiter: asyncio.Future[None]) -> None:
        line = self._lines.get(channel_id)
        if line is None:
            return
        with contextlib.suppress(ValueError):
            line.remove(waiter)
        if not line:
            del self._lines[channel_id]

    def release(self, channel_id: int) -> None:
        left = self._in_flight.get(channel_id, 0) - 1
        if left > 0:
            self._in_flight[channel_id] = left
        else:
            self._in_flight.pop(channel_id, None)
        self._free += 1
        self._hand_on()

    def _hand_on(self) -> bool:
        """Hand a free slot to the first waiter of the first channel in turn that may take
        it; that channel then goes to the back of the turns. Says whether one was handed."""
        while self._lines:
            for channel_id in self._lines:
                if self._may_take(channel_id):
                    break
            else:
                return False  # kept: for a channel with nothing in flight, or by the share
            line = self._lines.pop(channel_id)
            waiter = line.popleft()
            if line:
                self._lines[channel_id] = line
            if not waiter.done():
                self._take(channel_id)
                waiter.set_result(None)
                return True
        return False
