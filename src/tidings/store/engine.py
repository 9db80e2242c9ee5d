"""Connection setup per backend: the SQLite pragmas and write locking, the PostgreSQL pool.

SQLite: WAL so readers never wait for the writer, a busy timeout so concurrent writers wait
rather than fail, foreign keys on, and every write transaction opened with BEGIN IMMEDIATE
so two writers never deadlock upgrading a read lock (W1).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, Connection
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

SQLITE_BUSY_TIMEOUT_MS = 30_000
READ_ONLY = "tidings_read_only"


def create_engine(url: URL, *, pool_size: int = 10) -> AsyncEngine:
    if url.get_backend_name() == "sqlite":
        return _sqlite_engine(url)
    return create_async_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
        pool_recycle=1800,
    )


def _sqlite_engine(url: URL) -> AsyncEngine:
    engine = create_async_engine(
        url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000, "check_same_thread": False}
    )
    sync_engine = engine.sync_engine

    @event.listens_for(sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control from the driver so BEGIN is ours to issue.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        read_only = conn.get_execution_options().get(READ_ONLY, False)
        conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

    return engine
