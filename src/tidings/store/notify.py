"""Wake-ups through the database (W2): LISTEN on a dedicated connection for what the
PostgreSQL dialect NOTIFYs at commit.

PostgreSQL only; SQLite wakes its dispatcher in-process. Polling stays the correctness path:
a lost notification only costs latency, never a delivery.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Any

import asyncpg
from sqlalchemy.engine import URL

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
        self._on_notify(decode_hint(payload))

    async def healthy(self) -> bool:
        """A dead LISTEN connection hears nothing; check it answers, so it can be replaced."""
        if self._conn is None or self._conn.is_closed():
            return False
        try:
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
