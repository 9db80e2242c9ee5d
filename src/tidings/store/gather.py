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

    A caller that finds nothing running or waiting lets the other callers of its turn
    queue, and if none did, runs its item alone in its own task: an idle process's publish
    or claim then reaches the database without a task of its own and the turns of the loop
    that start it and hand its answer back. Callers that come while it runs wait for it,
    as for any group.

    A caller cancelled before its item was taken withdraws it; once taken, the item's fate
    is its group's, and a lone caller's is its own: cancelled, its run is too (a write may
    then have been stored or not, as any write cut short). An error `run` raises (rather
    than answering per item) is every item's answer."""

    def __init__(self, run: Run[I, R], *, max_items: int, in_flight: int = 1) -> None:
        self._run = run
        self._max_items = max_items
        self._in_flight = in_flight
        self._waiting: Waiting[I, R] = []
        self._running: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._kick_due = False
        #: A lone caller's item running in the caller's own task (see `_go_alone`).
        self._alone = False

    async def __call__(self, item: I, *, alone: bool = False) -> R:
        """`item`'s answer. `alone`: the caller knows no other caller comes in its turn of
        the loop, so a lone item goes at once rather than a turn later."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop and (self._waiting or self._running or self._alone):
            # Another event loop's groups are running (a second loop over the same store):
            # this item goes alone rather than into a loop it cannot await.
            (answer,) = await self._run([item])
            if isinstance(answer, Exception):
                raise answer
            return answer
        self._loop = loop
        if not (self._waiting or self._running or self._alone):
            return await self._go_alone(item, wait=not alone)
        future: asyncio.Future[R] = loop.create_future()
        self._waiting.append((item, future))
        if not self._kick_due:  # once the callers of this turn have queued their items
            self._kick_due = True
            loop.call_soon(self._kick)
        return await future

    async def _go_alone(self, item: I, *, wait: bool = True) -> R:
        self._alone = True
        try:
            if wait:
                await asyncio.sleep(0)  # the callers of this turn queue meanwhile
        except BaseException:
            self._end_alone()
            raise
        if self._waiting:
            # Not alone after all: this item goes first in their group, as it came first.
            assert self._loop is not None
            future: asyncio.Future[R] = self._loop.create_future()
            self._waiting.insert(0, (item, future))
            self._end_alone()
            return await future
        try:
            (answer,) = await self._run([item])
        except asyncio.CancelledError:
            raise
        except Exception as error:
            answer = error
        finally:
            self._end_alone()
        if isinstance(answer, Exception):
            raise answer
        return answer

    def _end_alone(self) -> None:
        self._alone = False
        if self._waiting and not self._kick_due:
            self._kick()

    def _kick(self) -> None:
        self._kick_due = False
        assert self._loop is not None
        while self._waiting and len(self._running) + self._alone < self._in_flight:
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
