"""PostgreSQL's hooks: its clock decides (C4), rows are locked with SKIP LOCKED (W1), a batch
of rows travels as one typed array per column (attempt rows as one JSON text), a claim commits
without waiting for the WAL flush, an outcome and its attempt rows are one statement, and
NOTIFY wakes other processes (W2).
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    ColumnElement,
    Select,
    String,
    Table,
    Text,
    Update,
    any_,
    bindparam,
    cast,
    func,
    literal,
    literal_column,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import URL, Connection
from sqlalchemy.sql.dml import Insert
from sqlalchemy.types import TypeEngine

from tidings.core import jsontext, ratelimit
from tidings.store import sealing
from tidings.store.dialect import (
    PRIOR_OWNER,
    PRIOR_STATE,
    ClaimStart,
    Dialect,
    LeaseShape,
    in_insert_order,
)
from tidings.store.notify import NOTIFY_CHANNEL, OnWork, PostgresListener, encode_hint
from tidings.store.schema import ATTEMPT_ONCE, UTCDateTime, channels, deliveries, rate_buckets

ORDINALITY = "n_"
ROWS_PARAM = "rows_json"
#: A batch's parameter for column `c` is `ARRAY_PARAM + c`.
ARRAY_PARAM = "col_"
#: Below this many rows a plain VALUES list is cheaper to build than the array statement.
RECORDSET_FROM_ROWS = 8
# Any constant works; it only has to be the same for every tidings process on one database.
_ADVISORY_LOCK_ID = 0x7469_6469
_IDS = postgresql.ARRAY(BigInteger)


class PostgresDialect(Dialect):
    name: ClassVar[str] = "postgresql"
    database_clock: ClassVar[bool] = True
    lease_sets_batch: ClassVar[bool] = True
    row_locks: ClassVar[bool] = True
    outcome_in_one_statement: ClassVar[bool] = True
    cross_process_wakeups: ClassVar[bool] = True
    express_claims: ClassVar[bool] = True
    publish_in_one_statement: ClassVar[bool] = True

    def ids_in(self, column: ColumnElement[Any], ids: Iterable[int]) -> ColumnElement[bool]:
        """`column = ANY($1)`: one array parameter, so the statement text is the same for every
        batch size and the server reuses one prepared plan."""
        return column == any_(literal(list(ids), _IDS))

    def ids_param(self, column: ColumnElement[Any], name: str) -> ColumnElement[bool]:
        return column == any_(bindparam(name, type_=_IDS))

    def insert(self, table: Table) -> Insert:
        return postgresql.insert(table)

    def insert_rows(
        self,
        conn: Connection,
        table: Table,
        values: Sequence[Mapping[str, Any]],
        returning: Sequence[ColumnElement[Any]],
        constants: Mapping[str, ColumnElement[Any]],
        skip_conflicts_on: str | None,
    ) -> list[tuple[Any, ...]]:
        """Many rows as one array per column
        (`INSERT … SELECT … FROM unnest($1::text[], $2::bigint[], …) WITH ORDINALITY`): one
        statement text (so one prepared plan) for every batch size, and the values travel in
        asyncpg's binary encoding, which the server reads without parsing a JSON document:
        about a third of the time `json_populate_recordset(NULL::table, :rows)` took to read
        them, and a tenth of its planning. A few rows go as a VALUES list."""
        if len(values) < RECORDSET_FROM_ROWS:
            return super().insert_rows(conn, table, values, returning, constants, skip_conflicts_on)
        names = tuple(values[0])  # every row has exactly these keys
        stmt = (
            _with_constants(table, names, constants) if constants else _all_from_rows(table, names)
        )
        if skip_conflicts_on is not None:
            stmt = stmt.on_conflict_do_nothing(index_elements=[skip_conflicts_on])
        params = _column_arrays(table, names, values)
        if not returning:
            conn.execute(stmt, params)
            return []
        return in_insert_order(conn.execute(stmt.returning(*returning), params).all())

    def insert_attempts(
        self, conn: Connection, table: Table, rows: Sequence[dict[str, Any]]
    ) -> None:
        """Attempt rows as one JSON text, leaving out any already stored (`_attempts_insert`)."""
        if not rows:
            return
        names = tuple(c.name for c in table.c if c.name != "id")
        doc = jsontext.dumps(list(rows)).decode()
        conn.execute(_attempts_insert(table, names), {ROWS_PARAM: doc})

    def update_with_attempts(
        self,
        conn: Connection,
        update: Update,
        params: dict[str, Any],
        attempts: Table,
        attempt_rows: Sequence[dict[str, Any]],
    ) -> int:
        """The outcome and its attempt rows in ONE statement (a CTE each): sent without BEGIN
        and COMMIT, one round trip where UPDATE, INSERT, BEGIN and COMMIT were four."""
        if not attempt_rows:
            return super().update_with_attempts(conn, update, params, attempts, attempt_rows)
        return len(self.changed_with_attempts(conn, update, params, attempts, attempt_rows))

    def changed_with_attempts(
        self,
        conn: Connection,
        update: Update,
        params: dict[str, Any],
        attempts: Table,
        attempt_rows: Sequence[dict[str, Any]],
    ) -> list[int]:
        """As `update_with_attempts`, in one statement too; the ids of the rows changed."""
        stmt, rows_param = with_attempts(update, attempts, attempt_rows)
        return list(conn.execute(stmt, {**params, **rows_param}).scalars())

    def lease(
        self, conn: Connection, shape: LeaseShape, params: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        """One statement: pick (a materialised CTE), update by primary key, answer the
        updated rows joined with what they were; a digest's batch id set on the way (D3)."""
        found = conn.execute(_lease_statement(shape), dict(params)).mappings()
        return [dict(row) for row in found]

    def relaxed_claim_start(self, conn: Connection, channel_id: int) -> ClaimStart | None:
        """The channel, its rate bucket as it stands and the time it was read, in one statement
        (not locked: enough for a channel without a rate limit, which reads the bucket only
        for a provider's pause; a limited channel locks it next).

        Relaxed commit: the same statement makes the claim's commit skip waiting for its WAL
        flush. Should the database crash before the flush, the claim is forgotten and its rows
        are sent again, as after any lost lease — at least once, never lost. Publishes and
        outcomes still wait for the flush.
        """
        row = conn.execute(_CHANNEL_FOR_CLAIM, {"channel": channel_id}).mappings().first()
        if row is None:
            return None, None
        if row["bucket_updated_at"] is None:  # no bucket yet: the lock creates it
            return sealing.channel(conn, row), None
        bucket = ratelimit.Bucket(
            tokens=row["bucket_tokens"],
            updated_at=row["bucket_updated_at"],
            paused_until=row["bucket_paused_until"],
        )
        return sealing.channel(conn, row), (bucket, row["clock_now"])

    def announce(self, conn: Connection, channel_ids: Iterable[int]) -> None:
        """NOTIFY at commit; the payload names the channels, so an idle dispatcher claims at
        once instead of first asking which channels are due."""
        conn.execute(
            text("SELECT pg_notify(:channel, :hint)"),
            {"channel": NOTIFY_CHANNEL, "hint": encode_hint(channel_ids)},
        )

    def listener(
        self, url: URL, on_notify: OnWork, on_lost: Callable[[], None]
    ) -> PostgresListener:
        return PostgresListener(url, on_notify, on_lost)

    def try_exclusive(self, conn: Connection, name: str) -> bool:
        """A transaction-level advisory lock: released at commit, never waited for."""
        key = zlib.crc32(f"tidings:{name}".encode())
        return bool(conn.scalar(text("SELECT pg_try_advisory_xact_lock(:key)"), {"key": key}))

    def migration_lock(self, conn: Connection) -> None:
        conn.execute(text(f"SELECT pg_advisory_xact_lock({_ADVISORY_LOCK_ID})"))


POSTGRES = PostgresDialect()


_CHANNEL_FOR_CLAIM = (
    select(
        channels,
        func.set_config("synchronous_commit", "off", True).label("async_commit"),
        rate_buckets.c.tokens.label("bucket_tokens"),
        rate_buckets.c.updated_at.label("bucket_updated_at"),
        rate_buckets.c.paused_until.label("bucket_paused_until"),
        func.clock_timestamp(type_=UTCDateTime).label("clock_now"),
    )
    .select_from(channels.outerjoin(rate_buckets, rate_buckets.c.channel_id == channels.c.id))
    .where(channels.c.id == bindparam("channel"))
)


@functools.cache
def recordset_source(table: Table) -> Any:
    """`json_populate_recordset(NULL::table, :rows_json) WITH ORDINALITY AS rows_(…, n_)`:
    the rows typed by the table itself, in the order given. Order them by `n_`."""
    return (
        func.json_populate_recordset(
            literal_column(f"NULL::{table.name}"), cast(bindparam(ROWS_PARAM, type_=Text), JSON)
        )
        .table_valued(*(c.name for c in table.c), with_ordinality=ORDINALITY)
        .render_derived()
        .alias("rows_")
    )


@functools.cache
def _all_from_rows(table: Table, names: tuple[str, ...]) -> Any:
    """The whole statement when every value comes from the rows: built once."""
    return postgresql.insert(table).from_select(list(names), _array_rows(table, names))


def _with_constants(
    table: Table, names: tuple[str, ...], constants: Mapping[str, ColumnElement[Any]]
) -> Any:
    picked = _array_rows(table, names, *constants.values())
    return postgresql.insert(table).from_select([*names, *constants], picked)


def _array_rows(table: Table, names: tuple[str, ...], *more: ColumnElement[Any]) -> Select[Any]:
    """The rows' columns `names` and then `more`, in the order the rows were given (so their
    ids are too: `in_insert_order`)."""
    source = _arrays_source(table, names)
    picked = (_from_array(table.c[name], source.c[name]) for name in names)
    return select(*picked, *more).order_by(source.c[ORDINALITY])


@functools.cache
def _arrays_source(table: Table, names: tuple[str, ...]) -> Any:
    """`unnest($1::text[], $2::bigint[], …) WITH ORDINALITY AS rows_(a, b, …, n_)`: one array
    parameter per column (`_column_arrays`), whatever the number of rows."""
    arrays = (
        bindparam(
            ARRAY_PARAM + name, type_=postgresql.ARRAY(_array_item(table.c[name]), dimensions=1)
        )
        for name in names
    )
    return (
        func.unnest(*arrays)
        .table_valued(*names, with_ordinality=ORDINALITY)
        .render_derived()
        .alias("rows_")
    )


def _array_item(column: Column[Any]) -> TypeEngine[Any]:
    """The type of a column's array items. Text for strings: an explicit cast to varchar(n)
    would cut a value too long, which the insert into the column refuses. Text for JSON too:
    documents serialised here (`_column_values`), cast back by the server (`_from_array`).
    The column's own type otherwise: SQLAlchemy's ARRAY applies its bind processing (e.g.
    UTCDateTime's) to each item, as for a single value."""
    if isinstance(column.type, JSON | String):
        return Text()
    return column.type


def _from_array(column: Column[Any], value: ColumnElement[Any]) -> ColumnElement[Any]:
    return cast(value, column.type) if isinstance(column.type, JSON) else value


def _column_arrays(
    table: Table, names: tuple[str, ...], values: Sequence[Mapping[str, Any]]
) -> dict[str, list[Any]]:
    """The parameters of `_arrays_source`: the rows as one list per column."""
    return {
        ARRAY_PARAM + name: _column_values(table.c[name], [row[name] for row in values])
        for name in names
    }


def _column_values(column: Column[Any], items: list[Any]) -> list[Any]:
    """A JSON column's documents as JSON texts, by `jsontext` (integers beyond 64 bits stay
    exact); None is NULL, as a JSON null was in the recordset these rows used to travel in."""
    if not isinstance(column.type, JSON):
        return items
    return [None if item is None else jsontext.dumps(item).decode() for item in items]


@functools.cache
def _lease_statement(shape: LeaseShape) -> Select[Any]:
    picked = shape.picked.cte("picked").prefix_with("MATERIALIZED")
    values = dict(shape.values)
    if shape.by_id:
        # The batch id is the smallest id taken, set only where still null (a second
        # UPDATE of the batch cost as much as the lease).
        first = select(func.min(picked.c.id)).scalar_subquery()
        values["batch_id"] = func.coalesce(deliveries.c.batch_id, first)
    # By primary key, whatever the planner guesses of the CTE's size: `IN (SELECT …)` let
    # it hash-join against a scan of the whole table.
    by_key = deliveries.c.id == any_(func.array(select(picked.c.id).scalar_subquery()))
    leased = update(deliveries).where(by_key).values(values).returning(*deliveries.c)
    taken = leased.cte("taken")
    return select(taken, picked.c[PRIOR_STATE], picked.c[PRIOR_OWNER]).join_from(
        taken, picked, picked.c.id == taken.c.id
    )


def with_attempts(
    update: Update, attempts: Table, attempt_rows: Sequence[dict[str, Any]]
) -> tuple[Select[Any], dict[str, str]]:
    """`update` and the insert of its attempt rows as one statement answering the ids it
    changed, and the parameter carrying the rows (beside the update's own)."""
    return _logged_ids(update, attempts), {ROWS_PARAM: jsontext.dumps(list(attempt_rows)).decode()}


@functools.lru_cache(maxsize=64)
def _logged_ids(update: Update, attempts: Table) -> Select[Any]:
    """`WITH changed AS (update RETURNING id), logged AS (INSERT attempts …) SELECT id`.
    Remembered per statement: the hot outcomes' statements are built once."""
    names = tuple(c.name for c in attempts.c if c.name != "id")
    changed = update.returning(deliveries.c.id).cte("changed")
    logged = _attempts_insert(attempts, names)
    return select(changed.c.id).add_cte(logged.cte("logged"))


@functools.cache
def _attempts_insert(attempts: Table, names: tuple[str, ...]) -> Insert:
    """The given attempt rows, but those already stored (`schema.ATTEMPT_ONCE`). An outcome
    is written again when its first write's answer was lost with the connection, and the
    first may still be committing: only the unique index sees that one (a check of what is
    stored would read the statement's snapshot, from before it committed)."""
    source = recordset_source(attempts)
    rows = select(*(source.c[n] for n in names)).order_by(source.c[ORDINALITY])
    stmt: Any = postgresql.insert(attempts).from_select(list(names), rows)
    result: Insert = stmt.on_conflict_do_nothing(index_elements=ATTEMPT_ONCE)
    return result
