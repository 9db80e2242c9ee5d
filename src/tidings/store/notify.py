"""Wake-ups through the database (W2): LISTEN on a dedicated connection for what the
PostgreSQL dialect NOTIFYs at commit.

PostgreSQL only; SQLite wakes its dispatcher in-process. Polling stays the correctness path:
a lost notification only costs latency, never a delivery.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

import asyncpg
from sqlalchemy.engine import URL

from tidings.store import handoff

log = logging.getLogger("tidings.store.notify")

#: How the LISTEN connection shows in `pg_stat_activity`.
APPLICATION_NAME = "tidings-wakeups"
#: How long opening the LISTEN connection may take before it counts as failed.
CONNECT_TIMEOUT_S = 10.0
#: NOTIFY's channel; payloads must stay under 8,000 bytes, a longer hint is sent as "".
NOTIFY_CHANNEL = "tidings_work"
MAX_HINT_CHARS = 7000

#: Channel ids with new work, or None for "look at every channel".
Hint = frozenset[int] | None
OnWork = Callable[[Hint], None]
#: Takes a hand-off to this connection's seat, and how long ago (s) its publish ran.
OnHandOff = Callable[[handoff.HandOff, float], None]


def encode_hint(channel_ids: Iterable[int]) -> str:
    """The payload naming the channels, so an idle dispatcher claims at once instead of
    first asking which channels are due."""
    payload = ",".join(map(str, sorted(set(channel_ids))))
    return payload if len(payload) <= MAX_HINT_CHARS else ""


def decode_hint(payload: str) -> Hint:
    """The channels a payload names; None (every channel) for an empty or unreadable one."""
    try:
        return frozenset(map(int, payload.split(","))) if payload else None
    except ValueError:
        return None


class LocalNotifier:
    """In-process wake-ups: the store calls `announce` after it stored new work (its one
    injected callback); each dispatcher of the process subscribes. Subscribers must be safe
    to call from any thread (the sync facade publishes from another one)."""

    def __init__(self) -> None:
        self._subscribers: list[OnWork] = []

    def announce(self, hint: Hint) -> None:
        for subscriber in list(self._subscribers):
            subscriber(hint)

    def subscribe(self, subscriber: OnWork) -> None:
        self._subscribers.append(subscriber)

    def unsubscribe(self, subscriber: OnWork) -> None:
        with contextlib.suppress(ValueError):
            self._subscribers.remove(subscriber)


class _PromptConnection(asyncpg.Connection):  # type: ignore[misc]
    """A connection whose wake-ups reach `prompt` as they are read. asyncpg hands a
    listener each notification a turn of the event loop later: ~20 µs on an idle 2-core
    machine, on every wake-up's path. asyncpg calls this private method for each one; should
    a version stop calling it, the listener added still hears them, a turn later."""

    prompt: Callable[[str], None] | None = None

    def _process_notification(self, pid: int, channel: str, payload: str) -> None:
        if self.prompt is None or channel != NOTIFY_CHANNEL:
            super()._process_notification(pid, channel, payload)
            return
        try:
            self.prompt(payload)
        except Exception:  # not into the driver's reading of the connection
            log.exception("a wake-up's callback failed")


class PostgresListener:
    """A LISTEN connection that calls `on_notify` for each notification, and `on_lost` at
    once when the connection ends (the server closed it, a restart, a dropped network)."""

    def __init__(
        self, url: URL, on_notify: OnWork, on_lost: Callable[[], None] | None = None
    ) -> None:
        self._dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._on_notify = on_notify
        self._on_lost = on_lost
        self._conn: Any = None
        #: The seat this connection holds (`take_seat`), and who takes its hand-offs.
        self.seat: handoff.Seat | None = None
        #: Every generation of a seat this connection has taken: a publish that tested a
        #: seat just before it was left still hands off to it (its notification names the
        #: generation), so what names one is taken still, and by this connection alone.
        self._held: set[int] = set()
        #: This host's clock less the database's, as measured when the seat was taken.
        self._clock_offset_s = 0.0
        #: One statement at a time on the connection (the driver refuses two).
        self._turn = asyncio.Lock()

    async def start(self) -> None:
        self._conn = await asyncpg.connect(
            self._dsn,
            timeout=CONNECT_TIMEOUT_S,
            server_settings={"application_name": APPLICATION_NAME},
            connection_class=_PromptConnection,
        )
        self._conn.add_termination_listener(self._terminated)
        self._conn.prompt = self._heard
        await self._conn.add_listener(NOTIFY_CHANNEL, self._received)

    def _terminated(self, _conn: object) -> None:
        if self._on_lost is not None:
            self._on_lost()

    def _received(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        self._heard(payload)

    def _heard(self, payload: str) -> None:
        hint, handed = handoff.split(payload)
        if not handed:
            self._on_notify(decode_hint(hint))
            return
        found = handoff.decode(handed)
        named = decode_hint(hint)
        if found is not None:
            if found.generation in self._held and self._on_handoff is not None:
                late_s = time.time() - self._clock_offset_s - found.event.created_at.timestamp()
                self._on_handoff(found, late_s)
            if named is not None:
                # The handed rows are leased: no one need claim them.
                named -= found.channel_ids
                if not named:
                    return
        self._on_notify(named)

    async def take_seat(self, owner: str, lease_s: float, on_handoff: OnHandOff) -> int | None:
        """Take a free seat (`tidings.store.handoff`) for as long as this connection lives, so
        that publishes lease their rows to `owner` and `on_handoff` takes them; its number,
        None when all are taken. Measures the clock against the database's first, so that a
        hand-off's lease is counted from the database's time (C4)."""
        async with self._turn:
            if self.seat is None:
                before = time.time()
                server_now = await self._conn.fetchval("SELECT now()")
                self._clock_offset_s = (before + time.time()) / 2 - server_now.timestamp()
                self._on_handoff = on_handoff
                self.seat = await handoff.take_seat(self._conn, owner, lease_s)
                if self.seat is not None:
                    self._held.add(self.seat.generation)
            return None if self.seat is None else self.seat.number

    async def leave_seat(self) -> None:
        """Give the seat up: publishes hand nothing more to it (one that tested it a moment
        before may still: its notification is still taken, until the connection closes)."""
        async with self._turn:
            seat, self.seat = self.seat, None
            if seat is not None and self._conn is not None and not self._conn.is_closed():
                with contextlib.suppress(OSError, asyncpg.PostgresError, TimeoutError):
                    await handoff.leave_seat(self._conn, seat)

    async def healthy(self) -> bool:
        """A dead LISTEN connection hears nothing; check it answers, so it can be replaced."""
        if self._conn is None or self._conn.is_closed():
            return False
        try:
            async with self._turn:
                await self._conn.fetchval("SELECT 1", timeout=5)
        except (OSError, asyncpg.PostgresError, TimeoutError) as error:
            log.warning("wake-up connection failed its health check: %s", error)
            return False
        return True

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.remove_termination_listener(self._terminated)  # closing is not a loss
            with contextlib.suppress(OSError, asyncpg.PostgresError, TimeoutError):
                await conn.close(timeout=5)
