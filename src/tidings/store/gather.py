"""Concurrent calls gathered into one: each caller hands in one item and awaits its own
answer, while one call of `run(items)` answers every item that arrived meanwhile.

No SQL here; the store uses it for group commit (`tidings.store.group_commit`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

I = TypeVar("I")  # noqa: E741 - the item, beside R the result
R = TypeVar("R")

#: One answer per item, in the order given: a result, or the error that item alone gets.
Run = Callable[[list[I]], Awaitable[list[R | Exception]]]


class Gathered(Generic[I, R]):
    """Calls `run` with whatever items arrived while its previous call was running (no timer:
    a lone caller is answered as soon as one call can be), at most `max_items` at once.

    One call of `run` is in flight at a time. A caller cancelled before its item was taken
    withdraws it; once taken, the item's fate is the group's. An error `run` raises (rather
    than answering per item) is every item's answer."""

    def __init__(self, run: Run[I, R], *, max_items: int) -> None:
        self._run = run
        self._max_items = max_items
        self._waiting: list[tuple[I, asyncio.Future[R]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def __call__(self, item: I) -> R:
        loop = asyncio.get_running_loop()
        flusher = self._flusher
        if flusher is not None and not flusher.done() and flusher.get_loop() is not loop:
            # Another event loop's group is running (a second loop over the same store):
            # this item goes alone rather than into a loop it cannot await.
            (answer,) = await self._run([item])
            if isinstance(answer, Exception):
                raise answer
            return answer
        future: asyncio.Future[R] = loop.create_future()
        self._waiting.append((item, future))
        if flusher is None or flusher.done():
            self._flusher = loop.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        while self._waiting:
            taken = [(i, f) for i, f in self._waiting[: self._max_items] if not f.done()]
            del self._waiting[: self._max_items]
            if taken:
                await self._answer(taken)

    async def _answer(self, taken: list[tuple[I, asyncio.Future[R]]]) -> None:
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
