"""Wake-ups (W2): an idle dispatcher sleeps until new work is announced or the poll timer ends.

In-process (SQLite, and the API of `serve` on any backend) through the notifier the store
calls after a publish; across processes on PostgreSQL through LISTEN/NOTIFY. Polling stays
the correctness path: a missed wake-up only costs latency.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from tidings.store import Store
from tidings.store.notify import Hint, LocalNotifier, PostgresListener

log = logging.getLogger("tidings.dispatch.wakeup")
HEALTH_CHECK_S = 15.0


class Wakeup:
    def __init__(self, store: Store, notifier: LocalNotifier | None = None) -> None:
        self._store = store
        self._notifier = notifier
        self._event = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._listener: PostgresListener | None = None
        #: The database offers a listening connection (kept and replaced when it dies).
        self._can_listen = False
        self._watch: asyncio.Task[None] | None = None
        # Channels named by the wake-ups since the last `take_hint`; None: look at them all.
        self._hint: set[int] | None = set()

    def notify(self, hint: Hint = None) -> None:
        """Safe from any thread (the sync facade publishes from another one)."""
        self._loop.call_soon_threadsafe(self._woken, hint)

    def _woken(self, hint: Hint) -> None:
        if hint is None or self._hint is None:
            self._hint = None
        else:
            self._hint |= hint
        self._event.set()

    def take_hint(self) -> Hint:
        """The channels the wake-ups named (None: any channel may have work), and forget them."""
        hint, self._hint = self._hint, set()
        return None if hint is None else frozenset(hint)

    async def start(self) -> None:
        if self._notifier is not None:
            self._notifier.subscribe(self.notify)
        await self._listen()  # listening before the dispatcher reports it has started
        if self._can_listen:
            self._watch = asyncio.create_task(self._keep_listening(), name="tidings-listen")

    async def wait(self, timeout_s: float) -> bool:
        """True when woken, False when the timeout passed."""
        if self._hint is None or self._hint:
            self._event.clear()
            return True  # a wake-up not yet taken (its waiter may have been cancelled)
        try:
            await asyncio.wait_for(self._event.wait(), timeout=max(timeout_s, 0.0))
        except TimeoutError:
            return False
        finally:
            self._event.clear()
        return True

    async def close(self) -> None:
        if self._notifier is not None:
            self._notifier.unsubscribe(self.notify)
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        await self._drop_listener()

    async def _keep_listening(self) -> None:
        """Check the LISTEN connection answers, and replace it when it does not."""
        while True:
            await asyncio.sleep(HEALTH_CHECK_S)
            if self._listener is None or not await self._listener.healthy():
                await self._listen()
                self.notify()  # anything published while we were deaf

    async def _listen(self) -> None:
        await self._drop_listener()
        self._listener = self._store.listener(self.notify)
        if self._listener is None:
            return
        self._can_listen = True
        try:
            await self._listener.start()
        except Exception as error:
            log.warning("cannot LISTEN for wake-ups (polling meanwhile): %s", error)
            await self._drop_listener()

    async def _drop_listener(self) -> None:
        if self._listener is not None:
            await self._listener.close()
            self._listener = None
