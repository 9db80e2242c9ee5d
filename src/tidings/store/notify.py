"""Wake-ups through the database (W2): NOTIFY at commit, LISTEN on a dedicated connection.

PostgreSQL only; SQLite wakes its dispatcher in-process. Polling stays the correctness path:
a lost notification only costs latency, never a delivery.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

import asyncpg
from sqlalchemy import text
from sqlalchemy.engine import URL, Connection

from tidings.store.dialect import is_postgres

CHANNEL = "tidings_work"
log = logging.getLogger("tidings.store.notify")


def announce(conn: Connection) -> None:
    """Tell listening dispatchers there is new work; delivered when the transaction commits."""
    if is_postgres(conn):
        conn.execute(text(f"SELECT pg_notify('{CHANNEL}', '')"))


class PostgresListener:
    """A LISTEN connection that calls `on_notify` for each notification."""

    def __init__(self, url: URL, on_notify: Callable[[], None]) -> None:
        self._dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._on_notify = on_notify
        self._conn: Any = None

    async def start(self) -> None:
        self._conn = await asyncpg.connect(self._dsn)
        await self._conn.add_listener(CHANNEL, self._received)

    def _received(self, *_args: object) -> None:
        self._on_notify()

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
            with contextlib.suppress(OSError, asyncpg.PostgresError, TimeoutError):
                await self._conn.close(timeout=5)
            self._conn = None
