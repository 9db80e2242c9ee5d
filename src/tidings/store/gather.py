"""Concurrent calls gathered into one: each caller hands in one item and awaits its own
answer, while one call of `run(items)` answers every item that arrived meanwhile.

No SQL here; the store uses it for group commit (`tidings.store.group_commit`) and for
token lookups.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

I = TypeVar("I")  # noqa: E741 - the item, beside R the result
R = TypeVar("R")

#: One answer per item, in the order given: a result, or the error that item alone gets.
Run = Callable[[list[I]], Awaitable[list[R | Exception]]]
Waiting = list[tuple[I, "asyncio.Future[R]"]]


class Gathered(Generic[I, R]):
    """Calls `run` with the items that arrived while earlier calls were running, at most
    `max_items` at once and `in_flight` calls at a time. There is no timer: items asked
    for in one turn of the event loop go together, and a lone caller goes at once.

    A caller cancelled before its item was taken withdraws it; once taken, the item's fate
    is its group's. An error `run` raises (rather than answering per item) is every item's
    answer."""

    def __init__(self, run: Run[I, R], *, max_items: int, in_flight: int = 1) -> None:
        self._run = run
        self._max_items = max_items
        self._in_flight = in_flight
        self._waiting: Waiting[I, R] = []
        self._running: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._kick_due = False

    async def __call__(self, item: I) -> R:
        loop = asyncio.get_running_loop()
        if self._loop is not loop and (self._waiting or self._running):
            # Another event loop's groups are running (a second loop over the same store):
            # this item goes alone rather than into a loop it cannot await.
            (answer,) = await self._run([item])
            if isinstance(answer, Exception):
                raise answer
            return answer
        self._loop = loop
        future: asyncio.Future[R] = loop.create_future()
        self._waiting.append((item, future))
        if not self._kick_due:  # once the callers of this turn have queued their items
            self._kick_due = True
            loop.call_soon(self._kick)
        return await future

    def _kick(self) -> None:
        self._kick_due = False
        assert self._loop is not None
        while self._waiting and len(self._running) < self._in_flight:
            taken = [(i, f) for i, f in self._waiting[: self._max_items] if not f.done()]
            del self._waiting[: self._max_items]
            if taken:
                task = self._loop.create_task(self._answer(taken))
                self._running.add(task)
                task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if not task.cancelled():
            self._kick()

    async def _answer(self, taken: Waiting[I, R]) -> None:
        try:
            answers = await self._run([item for item, _ in taken])
        except asyncio.CancelledError:
            for _, future in taken:
                future.cancel()
            raise
        except Exception as error:
            answers = [error] * len(taken)
        for (_, future), answer in zip(taken, answers, strict=True):
            if future.done():  # its caller was cancelled while the group ran
                continue
            if isinstance(answer, Exception):
                future.set_exception(answer)
            else:
                future.set_result(answer)
