"""Connection setup per backend: the SQLite pragmas and write locking, the PostgreSQL pool.

SQLite: WAL so readers never wait for the writer, a busy timeout so concurrent writers wait
rather than fail, foreign keys on, and every write transaction opened with BEGIN IMMEDIATE
so two writers never deadlock upgrading a read lock (W1).
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy
from sqlalchemy import event, exc
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from tidings.core import jsontext

SQLITE_BUSY_TIMEOUT_MS = 30_000
READ_ONLY = "tidings_read_only"
#: A pooled PostgreSQL connection idle this long is pinged before it is used again.
PING_AFTER_IDLE_S = 2.0
_IDLE_SINCE = "tidings_idle_since"


def create_engine(url: URL, *, pool_size: int = 10) -> AsyncEngine:
    if url.get_backend_name() == "sqlite":
        return _sqlite_engine(url)
    engine = create_async_engine(
        url,
        json_deserializer=jsontext.loads,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_recycle=1800,
        # The most recently used connection first: a busy dispatcher keeps reusing a warm
        # one (its prepared statements), and the rest go idle and get checked (below).
        pool_use_lifo=True,
        # No JIT: tidings' statements are short, and a read the planner prices high (the
        # dashboard's day of attempts) spent a quarter of its time compiling itself.
        connect_args={"server_settings": {"jit": "off"}},
    )
    _ping_when_idle(engine)
    return engine


def _ping_when_idle(engine: AsyncEngine) -> None:
    """Check a connection that sat idle before handing it out (a database restart kills
    them all); one in steady use is not pinged, which would cost every claim a round trip.
    A connection that died in use fails its statement once; that error drops the pool."""

    @event.listens_for(engine.sync_engine, "checkin")
    def _checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info[_IDLE_SINCE] = time.monotonic()

    @event.listens_for(engine.sync_engine, "checkout")
    def _checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        idle_since = record.info.get(_IDLE_SINCE)
        if idle_since is None or time.monotonic() - idle_since < PING_AFTER_IDLE_S:
            return
        try:
            dbapi_connection.ping()
        except Exception as error:
            raise exc.DisconnectionError(f"pooled connection is dead: {error}") from error


def _sqlite_engine(url: URL) -> AsyncEngine:
    engine = create_async_engine(
        url,
        json_deserializer=jsontext.loads,
        connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000, "check_same_thread": False},
    )
    _sqlite_setup(engine.sync_engine)
    return engine


def sqlite_thread_engine(url: URL) -> Engine:
    """The plain (pysqlite) engine the store runs whole SQLite transactions on, one thread
    hop each: aiosqlite hops to its thread for every execute, fetch and close, and SQLite
    works in C with the GIL released, so a transaction in a thread overlaps the sends."""
    engine = sqlalchemy.create_engine(
        url.set(drivername="sqlite+pysqlite"),
        json_deserializer=jsontext.loads,
        connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000, "check_same_thread": False},
    )
    _sqlite_setup(engine)
    return engine


def _sqlite_setup(sync_engine: Engine) -> None:
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
