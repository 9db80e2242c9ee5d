"""The Store: every database operation tidings performs, named after its transition.

Async methods over SQLAlchemy Core. Each runs one short transaction: the SQL lives in the
sibling modules as plain functions of a sync `Connection`, run here through `run_sync`, so a
caller's own transaction (sync or async) can run them too. Foreign database errors become
`tidings.core.errors` at this boundary. `now` overrides the clock in tests (C4).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import exc
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncEngine

from tidings.core.errors import Conflict, StoreError, TidingsError
from tidings.core.model import (
    AttemptRecord,
    Channel,
    ChannelSpec,
    Claim,
    DeliveryDetail,
    DeliveryQuery,
    DeliveryView,
    Event,
    EventInput,
    Page,
    PublishResult,
    ResendResult,
)
from tidings.core.states import Failure, State
from tidings.store import (
    channel_ops,
    claiming,
    dashboard,
    history,
    inbox,
    migrate,
    outcomes,
    publishing,
    resending,
    scheduling,
    stats,
    tokens,
)
from tidings.store.clock import AppClock, TxClock, utc_now
from tidings.store.engine import READ_ONLY, create_engine, sqlite_thread_engine
from tidings.store.notify import OnWork, PostgresListener
from tidings.store.url import parse

log = logging.getLogger("tidings.store")
#: Threads running SQLite read transactions beside the one writer thread. Writes go through
#: a single thread: SQLite takes one writer at a time anyway, and writers on several threads
#: waited for its lock in the busy handler's sleeps (e2e on SQLite, single runs: 0.72 ->
#: 0.80-0.87 x raw).
SQLITE_READERS = 3
#: Events a store keeps from its claims (an event published to many channels is claimed by
#: each of them; 4,096 events of a few KiB are a few MiB).
EVENTS_REMEMBERED = 4096


class _Abandoned(Exception):
    """Rolls back the transaction of a caller that was cancelled while it ran."""


T = TypeVar("T")
Op = Callable[..., T]


class Store:
    def __init__(self, url: str, *, clock: AppClock = utc_now, pool_size: int = 10) -> None:
        self.url = parse(url)
        self.engine: AsyncEngine = create_engine(self.url, pool_size=pool_size)
        # SQLite: every store operation runs as one transaction on a thread of its own.
        self._threaded: Engine | None = None
        self._threads: ThreadPoolExecutor | None = None  # the writer
        self._readers: ThreadPoolExecutor | None = None
        if self.backend == "sqlite":
            self._threaded = sqlite_thread_engine(self.url)
            self._threads = ThreadPoolExecutor(1, thread_name_prefix="tidings-db-write")
            self._readers = ThreadPoolExecutor(SQLITE_READERS, thread_name_prefix="tidings-db-read")
        self._clock = clock
        #: C3: writes refused because the lease had passed to another worker.
        self.fenced_writes = 0
        #: Events of recent claims, by id: a claim reads only the events not in here.
        self._events: OrderedDict[int, Event] = OrderedDict()
        #: Channels of the last `due_channels` answer, by id (see scheduling.due_channels).
        self._due_before: dict[int, Channel] = {}
        #: Called after this process stored new work: the in-process wake-up (W2).
        self.work_listeners: list[OnWork] = []

    @property
    def backend(self) -> str:
        return self.url.get_backend_name()

    @property
    def sync_engine(self) -> Engine:
        """The engine that runs the store's statements (its events see every one of them)."""
        return self._threaded if self._threaded is not None else self.engine.sync_engine

    async def close(self) -> None:
        await self.engine.dispose()
        if self._threads is not None and self._threaded is not None:
            self._threads.shutdown(wait=True)
            if self._readers is not None:
                self._readers.shutdown(wait=True)
            self._threaded.dispose()

    async def _run(
        self,
        op: Op[T],
        *args: Any,
        now: datetime | None = None,
        read_only: bool = False,
        one_statement: bool = False,
    ) -> T:
        """Run `op` in a transaction of its own; on PostgreSQL, a read (`read_only`) or an op
        that sends a single statement (`one_statement`) runs without BEGIN and COMMIT: one
        round trip, not three. (A read's statements then each see their own snapshot, as
        they would in a READ COMMITTED transaction; a single statement is atomic anyway.)"""

        def call(conn: Connection) -> T:
            return op(conn, TxClock(conn, now, self._clock), *args)

        try:
            if self._threads is not None:
                return await self._in_thread(call, read_only)
            async with self.engine.connect() as conn:
                if read_only or one_statement:
                    await conn.execution_options(isolation_level="AUTOCOMMIT")
                async with conn.begin():
                    return await conn.run_sync(call)
        except TidingsError:
            raise
        except exc.IntegrityError as error:
            raise Conflict(f"conflicts with stored data: {error.orig}") from error
        except (exc.DBAPIError, exc.InterfaceError, OSError) as error:
            raise StoreError(f"database error: {error}") from error

    async def _in_thread(self, call: Callable[[Connection], T], read_only: bool) -> T:
        """Run `call` in one SQLite transaction on a store thread (the writer, unless
        `read_only`).

        A caller cancelled meanwhile (a stopping dispatcher) gets the transaction rolled
        back if it has not committed yet, as the connection's exit would have done.
        """
        assert self._threads is not None
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

        threads = self._readers if read_only and self._readers is not None else self._threads
        future = asyncio.get_running_loop().run_in_executor(threads, transaction)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            abandoned.set()
            with contextlib.suppress(BaseException):
                await future
            raise

    # -- schema ---------------------------------------------------------------------------

    async def migrate(self) -> None:
        async with self.engine.begin() as conn:
            await conn.run_sync(migrate.upgrade)

    async def ping(self) -> bool:
        """Readiness: the database answers."""
        try:
            await self._run(lambda conn, _clock: conn.exec_driver_sql("SELECT 1"), read_only=True)
        except StoreError:
            return False
        return True

    # -- publishing (E1–E3) ---------------------------------------------------------------

    async def publish(
        self, inputs: Sequence[EventInput], *, now: datetime | None = None
    ) -> list[PublishResult]:
        results = await self._run(publishing.publish_events, list(inputs), now=now)
        self._new_work(_pending_channels(results))
        return results

    def publish_in(self, conn: Connection, inputs: Sequence[EventInput]) -> list[PublishResult]:
        """Publish inside a caller's own sync connection and transaction (E1)."""
        results = publishing.publish_events(conn, TxClock(conn, None, self._clock), list(inputs))
        # Early if the caller rolls back; the dispatcher then finds nothing.
        self._new_work(_pending_channels(results))
        return results

    def _new_work(self, channel_ids: Iterable[int]) -> None:
        hint = frozenset(channel_ids)
        if not hint:
            return
        for listener in self.work_listeners:
            listener(hint)

    def listener(self, on_notify: OnWork) -> PostgresListener | None:
        """A LISTEN connection for cross-process wake-ups, on PostgreSQL only."""
        return PostgresListener(self.url, on_notify) if self.backend == "postgresql" else None

    # -- claims (C1, C2, C6, D1–D3) -------------------------------------------------------

    async def claim_realtime(
        self,
        channel_id: int,
        limit: int,
        lease_s: float,
        owner: str,
        *,
        swept: bool = True,
        now: datetime | None = None,
    ) -> Claim | None:
        claim = await self._run(
            claiming.claim_realtime,
            channel_id,
            limit,
            lease_s,
            owner,
            swept,
            self._events,
            now=now,
        )
        return self._remember_events(claim)

    async def digest_due(self, channel_id: int, *, now: datetime | None = None) -> bool:
        return await self._run(claiming.digest_due, channel_id, now=now, read_only=True)

    async def claim_digest(
        self,
        channel_id: int,
        lease_s: float,
        owner: str,
        *,
        limit: int = claiming.MAX_DIGEST_BATCH,
        swept: bool = True,
        now: datetime | None = None,
    ) -> Claim | None:
        claim = await self._run(
            claiming.claim_digest, channel_id, limit, lease_s, owner, swept, self._events, now=now
        )
        return self._remember_events(claim)

    def _remember_events(self, claim: Claim | None) -> Claim | None:
        """Keep the claim's events for the next claims (immutable, E3), the most recent
        EVENTS_REMEMBERED of them."""
        if claim is not None:
            remembered = self._events
            for item in claim.items:
                remembered[item.event.id] = item.event
                remembered.move_to_end(item.event.id)
            while len(remembered) > EVENTS_REMEMBERED:
                remembered.popitem(last=False)
        return claim

    async def leased(self, token: str) -> Claim | None:
        """The rows `token` still holds, with their channel and events (W4 reports)."""
        return await self._run(claiming.leased, token, read_only=True)

    async def take_token(self, channel_id: int, *, now: datetime | None = None) -> bool:
        """One more token from the channel's bucket (the next message of a digest, D4)."""
        return await self._run(claiming.take_token, channel_id, now=now)

    # -- outcomes (O1–O7, D5, W3), fenced by the lease token (C3) -------------------------

    async def mark_sent(
        self,
        token: str,
        ids: Sequence[int],
        attempts: Sequence[AttemptRecord] = (),
        *,
        now: datetime | None = None,
    ) -> int:
        if self.backend == "postgresql" and attempts:
            changed = await self._run(
                outcomes.mark_sent_logged, token, ids, attempts, now=now, one_statement=True
            )
            self._count_fenced(len(ids), changed, "mark_sent")
            return changed
        return await self._outcome(outcomes.mark_sent, token, ids, attempts, now=now)

    async def schedule_retry(
        self,
        token: str,
        ids: Sequence[int],
        delay_s: float,
        error: str,
        attempts: Sequence[AttemptRecord] = (),
        *,
        now: datetime | None = None,
    ) -> int:
        return await self._outcome(
            outcomes.schedule_retry, token, ids, attempts, delay_s, error, now=now
        )

    async def fail(
        self,
        token: str,
        ids: Sequence[int],
        failure: Failure,
        error: str,
        attempts: Sequence[AttemptRecord] = (),
        *,
        now: datetime | None = None,
    ) -> int:
        return await self._outcome(outcomes.fail, token, ids, attempts, failure, error, now=now)

    async def rate_limited(
        self,
        token: str,
        channel_id: int,
        ids: Sequence[int],
        delay_s: float,
        error: str,
        attempts: Sequence[AttemptRecord] = (),
        *,
        now: datetime | None = None,
    ) -> int:
        def op(conn: Connection, clock: TxClock, tok: str, row_ids: Sequence[int]) -> int:
            return outcomes.rate_limited(conn, clock, tok, channel_id, row_ids, delay_s, error)

        return await self._outcome(op, token, ids, attempts, now=now)

    async def defer(
        self,
        token: str,
        ids: Sequence[int],
        attempts: Sequence[AttemptRecord] = (),
        *,
        now: datetime | None = None,
    ) -> int:
        return await self._outcome(outcomes.defer, token, ids, attempts, now=now)

    async def record_attempts(self, records: Sequence[AttemptRecord]) -> None:
        await self._run(lambda conn, _clock: outcomes.insert_attempts(conn, records))

    async def _outcome(
        self,
        op: Op[int],
        token: str,
        ids: Sequence[int],
        attempts: Sequence[AttemptRecord],
        *args: Any,
        now: datetime | None = None,
    ) -> int:
        def both(conn: Connection, clock: TxClock) -> int:
            changed = op(conn, clock, token, ids, *args)
            outcomes.insert_attempts(conn, attempts)
            return changed

        changed = await self._run(both, now=now)
        self._count_fenced(len(ids), changed, getattr(op, "__name__", "outcome"))
        return changed

    def _count_fenced(self, asked: int, changed: int, what: str) -> None:
        if changed < asked:
            self.fenced_writes += asked - changed
            log.warning(
                "fenced %d stale write(s) (%s): the lease passed to another worker",
                asked - changed,
                what,
            )

    # -- channels (and C7) ----------------------------------------------------------------

    async def create_channel(self, spec: ChannelSpec) -> Channel:
        return await self._run(channel_ops.create, spec)

    async def get_channel(self, channel_id: int) -> Channel:
        return await self._run(
            lambda conn, _clock: channel_ops.get(conn, channel_id), read_only=True
        )

    async def get_channel_by_name(self, name: str) -> Channel:
        return await self._run(
            lambda conn, _clock: channel_ops.get_by_name(conn, name), read_only=True
        )

    async def list_channels(self) -> list[Channel]:
        return await self._run(lambda conn, _clock: channel_ops.list_all(conn), read_only=True)

    async def update_channel(self, channel_id: int, spec: ChannelSpec) -> Channel:
        return await self._run(channel_ops.update_spec, channel_id, spec)

    async def update_channel_config(self, channel_id: int, changes: dict[str, Any]) -> None:
        """Merge keys into a channel's config (a provider-requested change, not an edit)."""
        await self._run(channel_ops.merge_config, channel_id, changes)

    async def enable_channel(self, channel_id: int) -> Channel:
        channel, _ = await self._run(channel_ops.set_enabled, channel_id, True, None)
        return channel

    async def disable_channel(self, channel_id: int, reason: str | None = None) -> int:
        """C7: disable and skip its pending deliveries; returns how many were skipped."""
        _, skipped = await self._run(channel_ops.set_enabled, channel_id, False, reason)
        return skipped

    async def delete_channel(self, channel_id: int) -> None:
        await self._run(lambda conn, _clock: channel_ops.remove(conn, channel_id))

    # -- operators (M1, M2) ---------------------------------------------------------------

    async def resend(
        self, delivery_id: int, operator: str, request_id: str, *, now: datetime | None = None
    ) -> ResendResult:
        result = await self._run(resending.resend, delivery_id, operator, request_id, now=now)
        if result.requeued:
            self._new_work([result.delivery.channel_id])
        return result

    async def list_deliveries(
        self,
        query: DeliveryQuery | None = None,
        page: int | None = None,
        page_size: int | None = None,
    ) -> Page[DeliveryView]:
        def op(conn: Connection, _clock: TxClock) -> Page[DeliveryView]:
            return history.list_deliveries(conn, query or DeliveryQuery(), page, page_size)

        return await self._run(op, read_only=True)

    async def get_delivery(self, delivery_id: int) -> DeliveryDetail:
        return await self._run(
            lambda conn, _clock: history.get_delivery(conn, delivery_id), read_only=True
        )

    async def get_event(self, event_id: int) -> PublishResult:
        return await self._run(
            lambda conn, _clock: history.get_event(conn, event_id), read_only=True
        )

    # -- scheduling, C5 and the inbox ----------------------------------------------------

    async def due_channels(self, *, now: datetime | None = None) -> list[Channel]:
        known = dict(self._due_before)  # the last answer's channels, reused if unchanged
        due = await self._run(scheduling.due_channels, known, now=now, read_only=True)
        self._due_before = {c.id: c for c in due}
        return due

    async def next_due_at(self) -> datetime | None:
        return await self._run(lambda conn, _clock: scheduling.next_due_at(conn), read_only=True)

    async def largest_timeout(self) -> tuple[float, str] | None:
        return await self._run(
            lambda conn, _clock: scheduling.largest_timeout(conn), read_only=True
        )

    async def inbox_put(
        self,
        channel_id: int,
        message_id: str,
        batch_id: int | None,
        delivery_ids: Sequence[int],
        title: str,
        body: str,
    ) -> None:
        await self._run(
            inbox.put, channel_id, message_id, batch_id, list(delivery_ids), title, body
        )

    async def inbox_recent(
        self, channel_id: int | None = None, limit: int = 50
    ) -> list[inbox.InboxMessage]:
        return await self._run(
            lambda conn, _clock: inbox.recent(conn, channel_id, limit), read_only=True
        )

    # -- API tokens -----------------------------------------------------------------------

    async def create_token(
        self, name: str, scopes: Sequence[str], token_hash: str
    ) -> tokens.TokenInfo:
        return await self._run(tokens.create, name, list(scopes), token_hash)

    async def find_token(self, token_hash: str) -> tokens.TokenInfo | None:
        return await self._run(lambda conn, _clock: tokens.find(conn, token_hash), read_only=True)

    async def count_tokens(self) -> int:
        return await self._run(lambda conn, _clock: tokens.count(conn), read_only=True)

    # -- statistics -----------------------------------------------------------------------

    async def delivery_counts(self) -> list[tuple[str, str, int]]:
        return await self._run(
            lambda conn, _clock: stats.counts_by_channel_state(conn), read_only=True
        )

    async def oldest_pending(self) -> list[tuple[str, datetime]]:
        return await self._run(
            lambda conn, _clock: stats.oldest_pending_by_channel(conn), read_only=True
        )

    # -- admin UI -------------------------------------------------------------------------

    async def channel_health(
        self, *, now: datetime | None = None
    ) -> dict[int, dashboard.ChannelHealth]:
        """Per channel id: last success, failed attempts in the last hour, open rows, oldest."""
        return await self._run(dashboard.channel_health, now=now, read_only=True)

    async def state_counts(self) -> dict[str, int]:
        return await self._run(lambda conn, _clock: dashboard.state_counts(conn), read_only=True)

    async def hourly_attempts(
        self, hours: int = 24, *, now: datetime | None = None
    ) -> list[dashboard.HourBucket]:
        """Delivered and failed attempts per hour over the last `hours`, oldest first."""
        return await self._run(dashboard.hourly_attempts, hours, now=now, read_only=True)

    async def failed_ids(self, query: DeliveryQuery, limit: int) -> tuple[list[int], int]:
        """The failed rows a history filter matches (at most `limit`, oldest first), and the
        total: what a bulk resend would requeue."""
        return await self._run(
            lambda conn, _clock: dashboard.failed_ids(conn, query, limit), read_only=True
        )


def _pending_channels(results: Sequence[PublishResult]) -> set[int]:
    return {
        d.channel_id for r in results if r.created for d in r.deliveries if d.state is State.PENDING
    }
