"""Send slots: how many sends a dispatcher runs at once, handed out fairly between channels.

A plain semaphore serves waiters in arrival order: a channel draining a backlog keeps dozens
of sends waiting for a slot, and a quiet channel's one message queues behind all of them.
Here each channel waits in its own line and a freed slot goes to the next channel in turn,
so a channel with one message waits for at most one send of each busy channel.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator


class SendSlots:
    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("send slots need size >= 1")
        self._free = size
        # channel id -> its waiters in arrival order; the dict's order is the channels' turns.
        self._lines: dict[int, deque[asyncio.Future[None]]] = {}

    @property
    def free(self) -> int:
        return self._free

    @contextlib.asynccontextmanager
    async def slot(self, channel_id: int) -> AsyncIterator[None]:
        """Hold one slot for a send of `channel_id`."""
        await self._acquire(channel_id)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, channel_id: int) -> None:
        if self._free > 0 and not self._lines:
            self._free -= 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._lines.setdefault(channel_id, deque()).append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()  # handed a slot as it was cancelled: pass it on
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

    def _release(self) -> None:
        """Hand the slot to the first waiter of the channel whose turn it is; that channel
        then goes to the back of the turns."""
        while self._lines:
            channel_id = next(iter(self._lines))
            line = self._lines.pop(channel_id)
            waiter = line.popleft()
            if line:
                self._lines[channel_id] = line
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1
