"""Wake-ups (W2): an idle dispatcher sleeps until new work is announced or the poll timer ends.

In-process (SQLite, and the API of `serve` on any backend) through the notifier the store
calls after a publish; across processes on PostgreSQL through LISTEN/NOTIFY. Polling stays
the correctness path: a missed wake-up only costs latency.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from tidings.store import Store
from tidings.store.notify import Hint, LocalNotifier, OnHandOff, PostgresListener

log = logging.getLogger("tidings.dispatch.wakeup")
#: Takes the channels a wake-up named, on the loop's thread, and answers those it left for
#: `wait`'s caller.
OnNews = Callable[[frozenset[int]], frozenset[int]]
#: How often a LISTEN connection that still looks open is checked to answer.
HEALTH_CHECK_S = 15.0
#: While it is down, the dispatcher looks for work at least this often.
DEAF_POLL_S = 1.0
#: Reconnection backoff: from the first wait, doubling up to the last.
RECONNECT_FIRST_S = 0.5
RECONNECT_MAX_S = 10.0


class Wakeup:
    def __init__(self, store: Store, notifier: LocalNotifier | None = None) -> None:
        self._store = store
        self._notifier = notifier
        self._event = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._listener: PostgresListener | None = None
        #: Set the moment the listening connection ends.
        self._lost = asyncio.Event()
        #: True while the database offers a listening connection but this one is down.
        self.deaf = False
        self._watch: asyncio.Task[None] | None = None
        # Channels named by the wake-ups since the last `take_hint`; None: look at them all.
        self._hint: set[int] | None = set()
        # A wake-up not yet answered by `wait`, and a `ring` not yet answered.
        self._news = False
        self._rung = False
        #: Given first the channels each wake-up names (see `OnNews`): the dispatcher starts
        #: their jobs in the turn of the loop the news came in, rather than in the turn its
        #: loop wakes in and the next, when the jobs it starts run.
        self.on_news: OnNews | None = None
        #: While set: (owner, lease_s, taker) of the seat each LISTEN connection takes.
        self._seat: tuple[str, float, OnHandOff] | None = None
        self._seat_paused = False

    async def take_seat(self, owner: str, lease_s: float, on_handoff: OnHandOff) -> None:
        """Wait for hand-offs (`tidings.store.handoff`) on this and every later LISTEN
        connection, for `owner` with leases of `lease_s`."""
        self._seat = (owner, lease_s, on_handoff)
        if self._listener is not None:
            await self._seated(self._listener)

    async def leave_seat(self) -> None:
        """Wait for hand-offs no longer (a dispatcher that stops)."""
        self._seat = None
        if self._listener is not None:
            await self._listener.leave_seat()

    async def seat_wanted(self, wanted: bool) -> None:
        """Leave the seat for now (False: a busy dispatcher, whose hand-offs would wait for
        it while others idle), or take one again (True); the request stays."""
        self._seat_paused = not wanted
        if self._listener is None or self._seat is None:
            return
        if wanted:
            await self._seated(self._listener)
        else:
            await self._listener.leave_seat()

    async def _seated(self, listener: PostgresListener) -> None:
        if self._seat is None or self._seat_paused:
            return
        try:
            if await listener.take_seat(*self._seat) is None:
                log.info("every seat for hand-offs is taken: this dispatcher claims its work")
        except Exception as error:  # a claim then serves instead; the watch reconnects
            log.warning("cannot take a seat for hand-offs: %s", error)

    def notify(self, hint: Hint = None) -> None:
        """Safe from any thread (the sync facade publishes from another one). On the loop's
        own thread (a LISTEN callback, a publish in this process) the waiter is woken at
        once rather than a turn of the loop later."""
        try:
            here = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            here = False
        if here:
            self._woken(hint)
        else:
            self._loop.call_soon_threadsafe(self._woken, hint)

    def ring(self) -> None:
        """Wake the waiter without news: the dispatcher's own reasons (a job ended, a stop).
        `wait` then answers False, as after its timeout."""
        self._rung = True
        self._event.set()

    def _woken(self, hint: Hint) -> None:
        if hint and self.on_news is not None:
            hint = self.on_news(hint)
            if not hint:
                return  # all taken
        if hint is None or self._hint is None:
            self._hint = None
        else:
            self._hint |= hint
        self._news = True
        self._event.set()

    def take_hint(self) -> Hint:
        """The channels the wake-ups named (None: any channel may have work), and forget them."""
        hint, self._hint = self._hint, set()
        return None if hint is None else frozenset(hint)

    async def start(self) -> None:
        if self._notifier is not None:
            self._notifier.subscribe(self.notify)
        if not self._store.listens:
            return
        # Listening before the dispatcher reports it has started.
        if not await self._listen():
            self._lost.set()  # the watch reconnects, with backoff
        self._watch = asyncio.create_task(self._keep_listening(), name="tidings-listen")

    async def wait(self, timeout_s: float) -> bool:
        """True when woken by news, False when rung or the timeout passed (at most
        DEAF_POLL_S while deaf). Without a task of its own: a wake-up reaches the caller in
        one turn of the loop, which under load is what a quiet channel's event waits for."""
        if not (self._news or self._rung or self._hint is None or self._hint):
            if self.deaf:
                timeout_s = min(timeout_s, DEAF_POLL_S)
            try:
                async with asyncio.timeout(max(timeout_s, 0.0)):
                    await self._event.wait()
            except TimeoutError:
                pass
        self._event.clear()
        self._rung = False
        # A wake-up not yet taken counts too (its waiter may have been cancelled).
        news = self._news or self._hint is None or bool(self._hint)
        self._news = False
        return news

    async def close(self) -> None:
        if self._notifier is not None:
            self._notifier.unsubscribe(self.notify)
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        await self._drop_listener()

    def _connection_lost(self) -> None:
        self._loop.call_soon_threadsafe(self._lost.set)

    async def _keep_listening(self) -> None:
        """Replace the LISTEN connection the moment it ends, or when it stops answering."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._lost.wait(), HEALTH_CHECK_S)
            healthy = self._listener is not None and await self._listener.healthy()
            if healthy and not self._lost.is_set():
                continue
            self._lost.clear()
            await self._reconnect()

    async def _reconnect(self) -> None:
        """Listen again, with backoff; meanwhile the dispatcher polls every DEAF_POLL_S."""
        self.deaf = True
        log.warning(
            "wake-up connection lost; looking for work every %g s while reconnecting",
            DEAF_POLL_S,
        )
        self.notify()  # look now: anything published since it went deaf
        delay = RECONNECT_FIRST_S
        while not await self._listen():
            await asyncio.sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX_S)
        self.deaf = False
        log.info("wake-up connection restored")
        self.notify()  # anything published while reconnecting

    async def _listen(self) -> bool:
        """Open a listening connection; False when the database offers none or it failed."""
        await self._drop_listener()
        listener = self._store.listener(self.notify, self._connection_lost)
        if listener is None:
            return False
        try:
            await listener.start()
        except Exception as error:
            log.warning("cannot LISTEN for wake-ups (polling meanwhile): %s", error)
            await listener.close()
            return False
        self._listener = listener
        await self._seated(listener)
        return True

    async def _drop_listener(self) -> None:
        if self._listener is not None:
            await self._listener.close()
            self._listener = None
