"""The Store: every database operation tidings performs, the writes named after transitions.

Stateless between calls: caches belong to the dispatcher (it passes what it knows), counts of
fenced writes to whoever reads the returned row counts, and new work is announced through one
injected callback (`on_work`, the in-process notifier) besides the dialect's own wake-up.
Foreign database errors become `tidings.core.errors` at this boundary; `now` overrides the
clock in tests (C4).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime

from sqlalchemy.engine import Connection

from tidings.core.errors import Conflict, SchemaError, StoreError, TidingsError
from tidings.core.model import (
    AttemptRecord,
    Channel,
    Claim,
    Event,
    EventInput,
    PublishResult,
    ResendResult,
)
from tidings.core.states import State
from tidings.store import (
    channel_ops,
    claims,
    express,
    group_commit,
    inbox,
    migrate,
    outcomes,
    publishing,
    resending,
    rotation,
    scheduling,
    sealing,
    sweep,
)
from tidings.store.admin import AdminWrites
from tidings.store.clock import AppClock, TxClock, utc_now
from tidings.store.direct import Direct, nothing_stored
from tidings.store.gather import Gathered
from tidings.store.notify import OnWork, PostgresListener
from tidings.store.operations import Operations
from tidings.store.reads import Reads
from tidings.store.sealing import Sensitive, everything

Events = Mapping[int, Event]
log = logging.getLogger("tidings.store")
#: The longest `Store.warm` waits (a database that does not answer yet must not hold up a
#: Hub's opening or a start-up; the first real statement waits its own timeouts).
WARM_WITHIN_S = 5.0


class Store(Operations, AdminWrites, Reads):
    def __init__(
        self,
        url: str,
        *,
        clock: AppClock = utc_now,
        pool_size: int = 10,
        on_work: OnWork | None = None,
        secret_keys: Sequence[str] | None = None,
        sensitive: Sensitive = everything,
    ) -> None:
        """`secret_keys`: base64 keys (the first encrypts), instead of the environment's or
        the key file's; `sensitive`: which config fields of a kind are secret (S4)."""
        super().__init__(
            url, clock=clock, pool_size=pool_size, secret_keys=secret_keys, sensitive=sensitive
        )
        #: Called after this process stored new work: the in-process wake-up (W2).
        self._on_work = on_work
        #: The channels this process's publishes fan out to, read again when they change.
        self._known_channels = publishing.KnownChannels()
        #: Single publishes of this process, committed in groups (`publish_one`).
        self._groups: Gathered[EventInput, PublishResult] = Gathered(
            self._publish_group,
            max_items=group_commit.MAX_GROUP,
            in_flight=group_commit.GROUPS_IN_FLIGHT,
        )
        #: The gathered statements' own driver connections (PostgreSQL), one per gathering,
        #: each opened on its first statement.
        direct = self.dialect.express_claims
        # Claims only: their commits need not wait for the WAL flush (`tidings.store.express`),
        # and they take a handful of rows by key.
        claims = functools.partial(self._direct, relaxed_commits=True, rows_by_index=True)
        self._direct_express: Direct | None = claims() if direct else None
        self._direct_express_small: Direct | None = claims() if direct else None
        self._direct_sent: Direct | None = self._direct() if direct else None
        # A single publish that may hand off reads its few channels by key: as for the
        # claims, a plan made while the table was small would scan all of it until the next
        # ANALYZE (a publish took 0.64–0.72 ms beside 10,000 channels, 0.58–0.61 ms so).
        self._direct_publish: Direct | None = self._direct(rows_by_index=True) if direct else None
        #: Express claims of this process, one statement for those asked at once; small
        #: ones (a quiet channel's) apart from large ones (a backlog's), so that they
        #: neither wait for a large claim's statement nor share it.
        self._express: Gathered[express.Ask, Claim | None] = Gathered(
            functools.partial(self._express_group, self._direct_express),
            max_items=express.MAX_ASKS,
            in_flight=express.GROUPS_IN_FLIGHT,
        )
        self._express_small: Gathered[express.Ask, Claim | None] = Gathered(
            functools.partial(self._express_group, self._direct_express_small),
            max_items=express.MAX_ASKS,
            in_flight=express.GROUPS_IN_FLIGHT,
        )
        #: Delivered rows of this process's claims (O1), one statement for those that
        #: finished sending at once.
        self._sent: Gathered[outcomes.Sent, int] = Gathered(
            self._sent_group,
            max_items=outcomes.MAX_SENT_CLAIMS,
            in_flight=outcomes.SENT_GROUPS_IN_FLIGHT,
        )

    def _direct(self, *, relaxed_commits: bool = False, rows_by_index: bool = False) -> Direct:
        return Direct(
            self.url,
            self.engine.dialect,
            relaxed_commits=relaxed_commits,
            rows_by_index=rows_by_index,
        )

    def _channels_changed(self) -> None:
        # The next publish reads them (one statement) rather than trying a plan of the
        # channels known before, which the database would refuse (a round trip lost).
        self._known_channels.forget()

    async def warm(self, *, publish: bool = False, dispatch: bool = False) -> None:
        """Open the connections a publish (`publish`) or a dispatcher's sends (`dispatch`)
        take first, and send each one's statement once, changing nothing (PostgreSQL).

        A new server connection's first statement took ~10 ms (its catalog caches, its
        plan, the driver's prepare), and a process's first event paid that on each of
        them in turn: ~50 ms from publish to receipt, where the next took 3. Best effort,
        within WARM_WITHIN_S: a database that does not answer, or has no schema yet, is
        left for the first real statement to report."""
        if self.backend != "postgresql":
            return  # SQLite: nothing to open (and opening a missing file would create it)
        warming: list[Awaitable[object]] = []
        if publish:
            known = self._known_channels
            warming.append(self._run(lambda conn, _clock: known.read(conn), read_only=True))
            warming.append(_warm(self._direct_publish, publishing.warm_direct))
        if dispatch:
            warming.append(self._run(scheduling.warm, read_only=True))
            warming.append(_warm(self._direct_express_small, express.warm_direct))
            warming.append(_warm(self._direct_sent, outcomes.warm_direct))
        try:
            async with asyncio.timeout(WARM_WITHIN_S):
                answers = await asyncio.gather(*warming, return_exceptions=True)
        except TimeoutError:
            log.debug("warm-up: no answer within %g s", WARM_WITHIN_S)
            return
        for failed in answers:
            if isinstance(failed, TidingsError):
                log.debug("warm-up: %s", failed)
            elif isinstance(failed, BaseException):
                raise failed

    async def close(self) -> None:
        for direct in (
            self._direct_express,
            self._direct_express_small,
            self._direct_sent,
            self._direct_publish,
        ):
            if direct is not None:
                await direct.close()
        await super().close()

    # -- schema ---------------------------------------------------------------------------

    async def migrate(self) -> None:
        """Bring the schema to this tidings' revision (one a newer tidings wrote is refused),
        then open the secrets (S4): a missing or wrong key stops here with a ConfigError;
        secrets stored in plain by an older version are sealed now."""
        missing = self.missing_directory()
        if missing is not None:  # said before the driver's thread fails noisily on it
            raise StoreError(f"database error: {missing}", cause=missing)
        with self.translated():
            async with self.engine.begin() as conn:
                await conn.run_sync(migrate.upgrade, "head", name=self._name)
        if await self.reseal():
            await self.clear_free_space()  # no plain copy left behind in the file

    async def rotate_key(self, *, finish: bool = False) -> rotation.Rotation:
        """S4: start a key rotation (a new primary key, every channel sealed under it, the
        old keys readable), or `finish` it (the old keys forgotten)."""
        done = await (rotation.finish(self) if finish else rotation.start(self))
        if done.resealed:
            await self.clear_free_space()
        return done

    async def reseal(self) -> int:
        """Seal every channel's secrets under the primary key (after an upgrade, or a key
        rotation); how many channels were written."""
        return await self._run(lambda conn, clock: sealing.reseal(conn, clock.now()))

    async def check_schema(self) -> None:
        """Refuse (SchemaError) a database that is not at this tidings' schema, changing
        nothing: a missing SQLite file is not created, an empty database gets no tables."""
        if self.file_missing():
            raise SchemaError(f"{self._name} does not exist: run `tidings db upgrade`")
        found = await self._run(lambda conn, _clock: migrate.current(conn), read_only=True)
        migrate.check(found, self._name)

    @property
    def _name(self) -> str:
        return f"database {self.shown_url}"

    async def ping(self) -> bool:
        """Readiness: the database answers."""
        try:
            await self._run(lambda conn, _clock: conn.exec_driver_sql("SELECT 1"), read_only=True)
        except StoreError:
            return False
        return True

    # -- publishing (E1–E3) and wake-ups (W2) ---------------------------------------------

    async def publish(
        self, inputs: Sequence[EventInput], *, now: datetime | None = None
    ) -> list[PublishResult]:
        # One statement writes (PostgreSQL: `publish_statement`), so no BEGIN and COMMIT.
        results = await self._run(
            publishing.publish_events,
            list(inputs),
            None,  # every channel
            self._known_channels,
            now=now,
            one_statement=True,
        )
        self._new_work(_pending_channels(results))
        return results

    async def publish_one(self, item: EventInput) -> PublishResult:
        """Publish one event, in one transaction with the others this process publishes at
        the same moment (group commit); answered once that transaction has committed. Its
        own failure is its own: another event of the group that fails does not fail it."""
        return await self._groups(item)

    async def _publish_group(self, inputs: list[EventInput]) -> list[PublishResult | Exception]:
        answers = await self._publish_direct(inputs)
        if answers is None:
            run = functools.partial(self._run, one_statement=True)
            answers = await group_commit.publish_group(run, inputs, self._known_channels)
        self._new_work(_pending_channels([a for a in answers if isinstance(a, PublishResult)]))
        return answers

    async def _publish_direct(
        self, inputs: list[EventInput]
    ) -> list[PublishResult | Exception] | None:
        """The group on the store's own driver connection, when it can go there; None when
        it goes through the engine (no channels known yet, or they changed; the statement
        failed on what it was given, having stored nothing: the engine's group commit then
        finds the guilty event). A failure that may have stored the group is its answer."""
        direct = self._direct_publish
        if direct is None or not direct.serves() or self._known_channels.seen is None:
            return None
        try:
            results = await publishing.publish_direct(
                direct, inputs, self._known_channels, self._keys_first_events
            )
        except (StoreError, Conflict) as error:
            if nothing_stored(error):
                return None
            return [error] * len(inputs)
        return None if results is None else list(results)

    async def _keys_first_events(self, keys: list[str]) -> dict[str, PublishResult]:
        def op(conn: Connection, _clock: TxClock) -> dict[str, PublishResult]:
            return {key: publishing.key_first_event(conn, key) for key in keys}

        return await self._run(op, read_only=True)

    def publish_in(self, conn: Connection, inputs: Sequence[EventInput]) -> list[PublishResult]:
        """Publish inside a caller's own sync connection and transaction (E1)."""
        self.sealer.put_on(conn)
        results = publishing.publish_events(conn, self.tx_clock(conn), list(inputs))
        # Early if the caller rolls back; the dispatcher then finds nothing.
        self._new_work(_pending_channels(results))
        return results

    def _new_work(self, channel_ids: Iterable[int]) -> None:
        hint = frozenset(channel_ids)
        if hint and self._on_work is not None:
            self._on_work(hint)

    @property
    def listens(self) -> bool:
        """The database can wake other processes' dispatchers (LISTEN/NOTIFY)."""
        return self.dialect.cross_process_wakeups

    def listener(
        self, on_notify: OnWork, on_lost: Callable[[], None] = lambda: None
    ) -> PostgresListener | None:
        """A LISTEN connection for cross-process wake-ups, where the database has one;
        `on_lost` is called the moment it ends."""
        return self.dialect.listener(self.url, on_notify, on_lost)

    # -- claims (C1, C2, C6, D1–D4) -------------------------------------------------------

    async def claim_realtime(
        self,
        channel_id: int,
        limit: int,
        lease_s: float,
        owner: str,
        *,
        swept: bool = True,
        known_events: Events | None = None,
        now: datetime | None = None,
    ) -> Claim | None:
        """`known_events`: events the caller read before (immutable, E3), not read again."""
        return await self._run(
            claims.claim_realtime,
            channel_id,
            limit,
            lease_s,
            owner,
            swept,
            known_events,
            now=now,
        )

    async def claim_express(
        self,
        channel: Channel,
        limit: int,
        lease_s: float,
        owner: str,
        *,
        known_events: Events | None = None,
        alone: bool = False,
    ) -> Claim | None:
        """A realtime claim in one statement where the database allows it and `channel` (the
        caller's copy, checked again) needs no more; None: make the full `claim_realtime`.
        Concurrent express claims (a dispatcher's many small channels) share a statement;
        `alone`: the caller knows no other claim is asked in its turn of the loop."""
        if not self.dialect.express_claims or not express.may_serve(channel, limit):
            return None
        ask = express.Ask(channel, limit, lease_s, owner, known_events)
        if limit <= express.SMALL_ASK:
            return await self._express_small(ask, alone=alone)
        return await self._express(ask, alone=alone)

    async def _express_group(
        self, direct: Direct | None, asks: list[express.Ask]
    ) -> list[Claim | Exception | None]:
        if direct is not None and direct.serves():
            claims = await express.claim_many_direct(direct, asks, self.load_channels)
        else:
            claims = await self._run(express.claim_many, asks, one_statement=True)
        return list(claims)

    async def load_channels(self, ids: list[int]) -> dict[int, Channel | None]:
        """Channels by id, as stored now (None for one deleted)."""

        def op(conn: Connection, _clock: TxClock) -> dict[int, Channel | None]:
            return {i: channel_ops.load_channel(conn, i) for i in ids}

        return await self._run(op, read_only=True)

    async def digest_due(self, channel_id: int, *, now: datetime | None = None) -> bool:
        return await self._run(claims.digest_due, channel_id, now=now, read_only=True)

    async def claim_digest(
        self,
        channel_id: int,
        lease_s: float,
        owner: str,
        *,
        limit: int = claims.MAX_DIGEST_BATCH,
        swept: bool = True,
        known_events: Events | None = None,
        now: datetime | None = None,
    ) -> Claim | None:
        return await self._run(
            claims.claim_digest, channel_id, limit, lease_s, owner, swept, known_events, now=now
        )

    async def sweep(self, channel_id: int, *, now: datetime | None = None) -> int:
        """C2/O5 without a claim: release lost leases, end spent and expired rows."""

        def op(conn: Connection, clock: TxClock) -> int:
            channel = channel_ops.load_channel(conn, channel_id)
            return 0 if channel is None else sweep.sweep(conn, clock, channel)

        return await self._run(op, now=now)

    async def leased(self, token: str) -> Claim | None:
        """The rows `token` still holds, with their channel and events (W4 reports)."""
        return await self._run(claims.leased, token, read_only=True)

    async def take_token(self, channel_id: int, *, now: datetime | None = None) -> bool:
        """One more token from the channel's bucket (the next message of a digest, D4)."""
        return await self._run(claims.take_token, channel_id, now=now)

    # -- outcomes (O1–O5, D5, W3), fenced by the lease token (C3): rows changed -----------

    async def mark_sent(
        self,
        token: str,
        ids: Sequence[int],
        attempts: Sequence[AttemptRecord] = (),
        *,
        now: datetime | None = None,
    ) -> int:
        if now is not None or not self.dialect.outcome_in_one_statement:
            return await self._outcome(outcomes.mark_sent, token, ids, attempts, now=now)
        return await self._sent(outcomes.Sent(token, ids, attempts))

    async def _sent_group(self, claims: list[outcomes.Sent]) -> list[int | Exception]:
        direct = self._direct_sent
        if direct is not None and direct.serves():
            changed = await outcomes.mark_sent_many_direct(direct, claims)
        else:
            changed = await self._run(outcomes.mark_sent_many, claims, one_statement=True)
        return list(changed)

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

    async def exhaust(
        self,
        token: str,
        ids: Sequence[int],
        error: str,
        attempts: Sequence[AttemptRecord] = (),
        *,
        now: datetime | None = None,
    ) -> int:
        # Not one statement: a failure escalates and is announced in the same transaction.
        return await self._run(outcomes.exhaust, token, ids, attempts, error, now=now)

    async def fail(
        self,
        token: str,
        ids: Sequence[int],
        error: str,
        attempts: Sequence[AttemptRecord] = (),
        *,
        now: datetime | None = None,
    ) -> int:
        return await self._run(outcomes.fail, token, ids, attempts, error, now=now)

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
        return await self._run(
            outcomes.rate_limited, token, ids, attempts, channel_id, delay_s, error, now=now
        )

    async def defer(
        self,
        token: str,
        ids: Sequence[int],
        attempts: Sequence[AttemptRecord] = (),
        *,
        now: datetime | None = None,
    ) -> int:
        return await self._outcome(outcomes.defer, token, ids, attempts, now=now)

    async def _outcome(
        self,
        op: Callable[..., int],
        token: str,
        ids: Sequence[int],
        attempts: Sequence[AttemptRecord],
        *args: object,
        now: datetime | None = None,
    ) -> int:
        one = self.dialect.outcome_in_one_statement
        return await self._run(op, token, ids, attempts, *args, now=now, one_statement=one)

    # -- operators (M1) and the inbox -----------------------------------------------------

    async def resend(
        self, delivery_id: int, operator: str, request_id: str, *, now: datetime | None = None
    ) -> ResendResult:
        result = await self._run(resending.resend, delivery_id, operator, request_id, now=now)
        if result.requeued:
            self._new_work([result.delivery.channel_id])
        return result

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


async def _warm(direct: Direct | None, warm: Callable[[Direct], Awaitable[None]]) -> None:
    """`warm(direct)` where the connection serves now (not busy, not another loop's)."""
    if direct is not None and direct.serves():
        await warm(direct)


def _pending_channels(results: Sequence[PublishResult]) -> set[int]:
    return {
        d.channel_id for r in results if r.created for d in r.deliveries if d.state is State.PENDING
    }
