"""A PostgreSQL connection of the store's own for its busiest statements, sent on the driver
without SQLAlchemy's execution layers and pool.

A dispatcher draining thousands of small channels sends a gathered express claim or a
delivered outcome every few claims. Through the engine each cost ~0.28 ms of this process's
CPU (0.45 ms with 70 rows back: the pool's checkout, the greenlet, the compiled-statement
cache, the result's rows); on the driver's own connection 0.04 ms (0.09 ms). The statements
are still built with SQLAlchemy, compiled once for PostgreSQL, and their parameters pass
through the same bind processing.

A `Direct` serves one statement at a time, from the event loop that opened it; a caller
it cannot serve (busy, another loop) takes the engine as before. A connection that failed
or was closed under it (a restart) is dropped, and the next statement opens a new one: as
with the pool, a connection that dies idle fails one statement, which its caller handles
like any other database error.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg
from sqlalchemy.engine import URL, Dialect
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ClauseElement

from tidings.core.errors import Conflict, StoreError, TidingsError
from tidings.store.notify import CONNECT_TIMEOUT_S
from tidings.store.runner import cause

#: How the connection shows in `pg_stat_activity`.
APPLICATION_NAME = "tidings-direct"
#: What the driver raises for a statement or a connection: translated here. (A connection
#: the server ended while it was idle may answer its next statement with an internal error.)
DRIVER_ERRORS = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    OSError,
    TimeoutError,
)


class Compiled:
    """A statement compiled once for the driver: its SQL, its parameters in order, and
    the values and bind processing SQLAlchemy would have given them."""

    def __init__(self, statement: ClauseElement, dialect: Dialect) -> None:
        compiled = statement.compile(dialect=dialect)
        assert isinstance(compiled, SQLCompiler)
        self.sql = str(compiled)
        self.names: tuple[str, ...] = tuple(compiled.positiontup or ())
        #: Values bound in the statement itself (literals SQLAlchemy made parameters).
        self.fixed: dict[str, Any] = {
            name: compiled.binds[name].effective_value
            for name in self.names
            if not compiled.binds[name].required
        }
        self.processors = {
            name: processor
            for name in self.names
            if (
                processor := dialect.type_descriptor(compiled.binds[name].type).bind_processor(
                    dialect
                )
            )
        }

    def arguments(self, params: Mapping[str, Any]) -> list[Any]:
        values = []
        for name in self.names:
            value = params[name] if name in params else self.fixed[name]
            processor = self.processors.get(name)
            values.append(value if processor is None else processor(value))
        return values


@functools.lru_cache(maxsize=32)
def compiled(statement: ClauseElement, dialect: Dialect) -> Compiled:
    """Statements built once (the hot ones are) are compiled once."""
    return Compiled(statement, dialect)


class Direct:
    def __init__(
        self,
        url: URL,
        dialect: Dialect,
        *,
        relaxed_commits: bool = False,
        rows_by_index: bool = False,
    ) -> None:
        self._dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._dialect = dialect
        #: Its transactions commit without waiting for the WAL flush (`synchronous_commit`
        #: off for the session): for statements whose loss in a crash is safe, as a claim's.
        self.relaxed_commits = relaxed_commits
        #: Its statements find rows through indexes only (`enable_seqscan` off for the
        #: session, which prices table scans out): for statements that touch a handful of
        #: rows by key, as a claim's. A generic plan made while the table was small (a young
        #: database, or statistics not yet taken again) scanned every delivery on each
        #: claim, ~0.1 ms at a thousand rows and growing with the table until the next
        #: ANALYZE replaced the plan.
        self.rows_by_index = rows_by_index
        self._conn: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._busy = False

    def serves(self) -> bool:
        """Whether a statement may go on this connection now."""
        if self._busy:
            return False
        return self._loop is None or self._loop is asyncio.get_running_loop()

    async def fetch(self, statement: ClauseElement, params: Mapping[str, Any]) -> Sequence[Any]:
        """The statement's rows (asyncpg records: mappings by column name). Only when
        `serves()` said so; its errors come back as tidings errors."""
        if not self.serves():
            raise RuntimeError("Direct.fetch while it cannot serve")
        self._busy = True
        try:
            prepared = compiled(statement, self._dialect)
            conn = await self._open()
            rows: Sequence[Any] = await conn.fetch(prepared.sql, *prepared.arguments(params))
            return rows
        except asyncio.CancelledError:
            # The statement may still be running on the server: this connection goes.
            self._drop()
            raise
        except TidingsError:
            raise
        except DRIVER_ERRORS as error:
            if not isinstance(error, asyncpg.PostgresError) or self._conn_closed():
                self._drop()  # the connection, not the statement, failed
            raise _translated(error) from error
        finally:
            self._busy = False

    async def close(self) -> None:
        if self._conn is None:
            return
        if self._loop is not asyncio.get_running_loop():
            self._drop()  # it cannot be awaited from here
            return
        conn, self._conn = self._conn, None
        try:
            await conn.close(timeout=5)
        except DRIVER_ERRORS:
            conn.terminate()

    async def _open(self) -> Any:
        if self._conn is not None and not self._conn.is_closed():
            return self._conn
        self._conn = None
        try:
            conn = await asyncpg.connect(
                self._dsn,
                timeout=CONNECT_TIMEOUT_S,
                # As the engine's connections: tidings' statements are too short for JIT.
                server_settings={
                    "application_name": APPLICATION_NAME,
                    "jit": "off",
                    **({"synchronous_commit": "off"} if self.relaxed_commits else {}),
                    **({"enable_seqscan": "off"} if self.rows_by_index else {}),
                },
            )
        except DRIVER_ERRORS as error:
            raise _translated(error) from error
        self._conn = conn
        self._loop = asyncio.get_running_loop()
        return conn

    def _conn_closed(self) -> bool:
        return self._conn is None or bool(self._conn.is_closed())

    def _drop(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.terminate()


def nothing_stored(error: BaseException) -> bool:
    """Whether `error`, raised by `Direct.fetch`, certainly stored nothing: the server
    refused the statement, so its own transaction rolled back. (A connection lost on the
    way leaves that unknown: the statement may have committed.)"""
    return isinstance(error.__cause__, asyncpg.PostgresError)


def _translated(error: BaseException) -> TidingsError:
    """As the runner translates the engine's errors: a clash with stored data is a
    Conflict, anything else a StoreError in the driver's own words."""
    if isinstance(error, asyncpg.IntegrityConstraintViolationError):
        return Conflict(f"conflicts with stored data: {cause(error)}")
    said = cause(error)
    return StoreError(f"database error: {said}", cause=said)
