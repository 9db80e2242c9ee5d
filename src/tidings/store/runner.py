"""How a store operation runs: one short transaction each, its foreign errors translated.

An operation is a plain function of a sync `Connection` and the transaction's clock, so a
caller's own transaction (sync or async) can run it too. PostgreSQL runs it on the async
engine's connection (`run_sync`); SQLite runs whole transactions on store threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import exc
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncEngine

from tidings.core.errors import Conflict, StoreError, TidingsError
from tidings.store.clock import AppClock, TxClock, utc_now
from tidings.store.dialect import Dialect
from tidings.store.dialects import dialect_named
from tidings.store.engine import READ_ONLY, create_engine, sqlite_thread_engine
from tidings.store.sealing import Sealer, Sensitive, everything
from tidings.store.url import parse, shown

#: Threads running SQLite read transactions beside the one writer thread. Writes go through
#: a single thread: SQLite takes one writer at a time anyway, and writers on several threads
#: waited for its lock in the busy handler's sleeps.
SQLITE_READERS = 3

#: How much of a database error's text goes into a StoreError (and so into a log line).
MAX_CAUSE_CHARS = 300

T = TypeVar("T")
#: What the database and its drivers raise; translated at this boundary.
FOREIGN_ERRORS = (exc.DBAPIError, exc.InterfaceError, OSError)
Op = Callable[..., T]


class _Abandoned(Exception):
    """Rolls back the transaction of a caller that was cancelled while it ran."""


def cause(error: BaseException) -> str:
    """The driver's own words, on one line: SQLAlchemy's text adds the statement and its
    parameters (kilobytes in a log line, and values that may be secrets)."""
    orig = getattr(error, "orig", None)
    text = str(orig if orig is not None else error) or type(error).__name__
    return " ".join(text.split())[:MAX_CAUSE_CHARS]


class Runner:
    """The engine of one database and the way its operations run."""

    def __init__(
        self,
        url: str,
        *,
        clock: AppClock = utc_now,
        pool_size: int = 10,
        secret_keys: Sequence[str] | None = None,
        sensitive: Sensitive = everything,
    ) -> None:
        self.url = parse(url)
        #: Seals and opens channel secrets (S4); every operation finds it on its connection.
        self.sealer = Sealer(self.url, secret_keys, sensitive)
        #: The URL as the user gave it, password masked: for messages on the command line.
        self.shown_url = shown(url)
        self.dialect: Dialect = dialect_named(self.url.get_backend_name())
        self.engine: AsyncEngine = create_engine(self.url, pool_size=pool_size)
        self._clock = clock
        # SQLite: every operation runs as one transaction on a store thread.
        self._threaded: Engine | None = None
        self._writer: ThreadPoolExecutor | None = None
        self._readers: ThreadPoolExecutor | None = None
        if self.dialect.transactions_on_threads:
            self._threaded = sqlite_thread_engine(self.url)
            self._writer = ThreadPoolExecutor(1, thread_name_prefix="tidings-db-write")
            self._readers = ThreadPoolExecutor(SQLITE_READERS, thread_name_prefix="tidings-db-read")

    @property
    def backend(self) -> str:
        return self.dialect.name

    @property
    def sync_engine(self) -> Engine:
        """The engine that runs the store's statements (its events see every one of them)."""
        return self._threaded if self._threaded is not None else self.engine.sync_engine

    async def close(self) -> None:
        await self.engine.dispose()
        if self._writer is not None and self._readers is not None and self._threaded:
            self._writer.shutdown(wait=True)
            self._readers.shutdown(wait=True)
            self._threaded.dispose()

    def tx_clock(self, conn: Connection, now: datetime | None = None) -> TxClock:
        return TxClock(conn, now, self._clock)

    async def _run(
        self,
        op: Op[T],
        *args: Any,
        now: datetime | None = None,
        read_only: bool = False,
        one_statement: bool = False,
    ) -> T:
        """Run `op(conn, clock, *args)` in a transaction of its own. On PostgreSQL a read
        (`read_only`) or an op that sends a single statement (`one_statement`) runs without
        BEGIN and COMMIT: one round trip, not three. (A read's statements then each see their
        own snapshot, as in a READ COMMITTED transaction; a single statement is atomic.)"""

        def call(conn: Connection) -> T:
            self.sealer.put_on(conn)
            return op(conn, TxClock(conn, now, self._clock), *args)

        try:
            if self._writer is not None:
                return await self._in_thread(call, read_only)
            async with self.engine.connect() as conn:
                if read_only or one_statement:
                    await conn.execution_options(isolation_level="AUTOCOMMIT")
                async with conn.begin():
                    return await conn.run_sync(call)
        except TidingsError:
            raise
        except FOREIGN_ERRORS as error:
            raise self._translate(error) from error

    @contextlib.contextmanager
    def translated(self) -> Iterator[None]:
        """Foreign database errors raised in the block become tidings errors."""
        try:
            yield
        except TidingsError:
            raise
        except FOREIGN_ERRORS as error:
            raise self._translate(error) from error

    def _translate(self, error: Exception) -> TidingsError:
        """A clash with stored data is a Conflict; anything else (unreachable, refused, no
        permission) a StoreError carrying the database's own words."""
        if isinstance(error, exc.IntegrityError):
            return Conflict(f"conflicts with stored data: {cause(error)}")
        said = self.missing_directory() or cause(error)
        return StoreError(f"database error: {said}", cause=said)

    def file_missing(self) -> bool:
        """A SQLite database whose file does not exist (opening it would create it)."""
        database = self.url.database
        return self.backend == "sqlite" and bool(database) and not Path(str(database)).exists()

    def missing_directory(self) -> str | None:
        """SQLite says only "unable to open database file" when the directory is missing."""
        if self.backend != "sqlite" or not self.url.database:
            return None
        directory = Path(self.url.database).parent
        return None if directory.is_dir() else f"the directory {directory} does not exist"

    async def clear_free_space(self) -> None:
        """Overwrite what rewritten rows left behind in the file (old copies of sealed
        secrets, S4): on SQLite, the WAL is checkpointed and emptied and the file rebuilt
        (VACUUM). PostgreSQL's old row versions are out of reach of a dump or a SELECT."""
        if self._writer is None or self._threaded is None:
            return
        engine = self._threaded

        def rebuild() -> None:
            raw = engine.raw_connection()
            try:
                cursor = raw.cursor()
                cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                cursor.execute("VACUUM")
                cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                cursor.close()
            finally:
                raw.close()

        await asyncio.get_running_loop().run_in_executor(self._writer, rebuild)

    async def _in_thread(self, call: Callable[[Connection], T], read_only: bool) -> T:
        """Run `call` in one SQLite transaction on a store thread (the writer, unless
        `read_only`). A caller cancelled meanwhile (a stopping dispatcher) gets the
        transaction rolled back if it has not committed yet, as the connection's exit would."""
        assert self._writer is not None
        assert self._readers is not None
        assert self._threaded is not None
        engine = self._threaded
        abandoned = threading.Event()

        def transaction() -> T:
            with engine.connect() as conn:
                if read_only:
                    conn = conn.execution_options(**{READ_ONLY: True})
                with conn.begin():
                    result = call(conn)
                    if abandoned.is_set():
                        raise _Abandoned
                    return result

        threads = self._readers if read_only else self._writer
        future = asyncio.get_running_loop().run_in_executor(threads, transaction)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            abandoned.set()
            with contextlib.suppress(BaseException):
                await future
            raise
