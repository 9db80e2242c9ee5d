"""The database differences behind one seam: one Dialect object per backend, with named hooks.

The portable SQL lives in the store's modules; a hook is only what PostgreSQL and SQLite must
do differently. The backends are `tidings.store.postgres` and `tidings.store.sqlite`;
`tidings.store.dialects.dialect_for(conn)` answers a connection's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Executable,
    Select,
    Table,
    bindparam,
    select,
    update,
)
from sqlalchemy.dialects import sqlite as sqlite_sql
from sqlalchemy.engine import URL, Connection
from sqlalchemy.sql.dml import Insert, Update

from tidings.core import ratelimit
from tidings.core.model import Channel
from tidings.store.notify import OnWork, PostgresListener
from tidings.store.schema import ATTEMPT_ONCE, deliveries, events

#: Columns a lease answers besides the row: its state and owner before the lease.
PRIOR_STATE = "prior_state"
PRIOR_OWNER = "prior_owner"


@dataclass(frozen=True, eq=False)
class LeaseShape:
    """A lease, portable: the rows it takes (`picked`: id, prior state and owner, locked and
    limited) and the values it sets. Hashed by identity: each is built once per shape, and a
    dialect keeps its statements for it."""

    picked: Select[Any]
    values: Mapping[str, Any]
    #: A digest's lease (D2/D3), which also gives the batch its id.
    by_id: bool


#: What a claim reads before it leases: the channel, and its rate bucket with the time it
#: was read when that came along for free (else None: the claim locks and reads it itself).
ClaimStart = tuple[Channel | None, tuple[ratelimit.Bucket, datetime] | None]


class Dialect:
    """The hooks, with the portable behaviour as the default (what SQLite does)."""

    name: ClassVar[str]
    #: C4: the database's clock decides leases and due times (PostgreSQL, shared by hosts);
    #: otherwise the application's (SQLite lives in one file on one host).
    database_clock: ClassVar[bool] = False
    #: D3: the lease statement sets a digest's batch id itself (else a second UPDATE does).
    lease_sets_batch: ClassVar[bool] = False
    #: Rows may be locked with `FOR UPDATE [SKIP LOCKED]`; SQLite's writers are serialised by
    #: BEGIN IMMEDIATE instead, so there is nothing to lock or skip.
    row_locks: ClassVar[bool] = False
    #: Whole transactions run on store threads (one writer) rather than on the event loop's
    #: async driver: SQLite works in C with the GIL released, so a transaction in a thread
    #: overlaps the sends, where an async driver hops threads for every statement.
    transactions_on_threads: ClassVar[bool] = False
    #: A realtime claim may be one statement without BEGIN/COMMIT (`tidings.store.express`).
    express_claims: ClassVar[bool] = False
    #: `announce` reaches other processes, which hear it through `listener`.
    cross_process_wakeups: ClassVar[bool] = False
    #: `update_with_attempts` sends one statement, which needs no BEGIN and COMMIT.
    outcome_in_one_statement: ClassVar[bool] = False
    #: A publish's events, deliveries and wake-up are one statement, which needs no BEGIN and
    #: COMMIT (`tidings.store.publish_statement`).
    publish_in_one_statement: ClassVar[bool] = False

    # -- statements ---------------------------------------------------------------------

    def ids_in(self, column: ColumnElement[Any], ids: Iterable[int]) -> ColumnElement[bool]:
        """`column IN ids`, for ids known now."""
        return column.in_(list(ids))

    def ids_param(self, column: ColumnElement[Any], name: str) -> ColumnElement[bool]:
        """`column IN :name` in a statement built once; the ids are bound at execution."""
        return column.in_(bindparam(name, expanding=True))

    def insert(self, table: Table) -> Insert:
        """An INSERT that can take `on_conflict_do_nothing`."""
        return sqlite_sql.insert(table)

    def insert_ignoring_conflict(self, table: Table, *index_elements: str) -> Insert:
        """INSERT … ON CONFLICT (index_elements) DO NOTHING."""
        insert: Any = self.insert(table)
        result: Insert = insert.on_conflict_do_nothing(index_elements=list(index_elements))
        return result

    def insert_rows(
        self,
        conn: Connection,
        table: Table,
        values: Sequence[Mapping[str, Any]],
        returning: Sequence[ColumnElement[Any]],
        constants: Mapping[str, ColumnElement[Any]],
        skip_conflicts_on: str | None,
    ) -> list[tuple[Any, ...]]:
        """Rows inserted by one multi-row VALUES list (see `tidings.store.bulk`). Constants that
        are plain values go into every row (a bound value set on the statement would be
        bound once for a statement that repeats it per row); SQL expressions stay in it."""
        listed: Any = self.insert(table)
        plain = {k: v.value for k, v in constants.items() if isinstance(v, BindParameter)}
        if plain:
            values = [{**row, **plain} for row in values]
        expressions = {k: v for k, v in constants.items() if k not in plain}
        if expressions:
            listed = listed.values(expressions)
        if skip_conflicts_on is not None:
            listed = listed.on_conflict_do_nothing(index_elements=[skip_conflicts_on])
        if not returning:
            conn.execute(listed, list(values))
            return []
        return in_insert_order(conn.execute(listed.returning(*returning), list(values)).all())

    def insert_attempts(
        self, conn: Connection, table: Table, rows: Sequence[dict[str, Any]]
    ) -> None:
        """Attempt rows (O7), the write after nearly every send; one already stored (an
        outcome written again) is left as it is."""
        insert: Any = self.insert(table)
        conn.execute(insert.on_conflict_do_nothing(index_elements=ATTEMPT_ONCE), list(rows))

    def update_with_attempts(
        self,
        conn: Connection,
        update: Update,
        params: dict[str, Any],
        attempts: Table,
        attempt_rows: Sequence[dict[str, Any]],
    ) -> int:
        """Run a fenced outcome's UPDATE and write its attempt rows; how many rows changed."""
        changed: int = conn.execute(update, params).rowcount
        if attempt_rows:
            self.insert_attempts(conn, attempts, attempt_rows)
        return changed

    def changed_with_attempts(
        self,
        conn: Connection,
        update: Update,
        params: dict[str, Any],
        attempts: Table,
        attempt_rows: Sequence[dict[str, Any]],
    ) -> list[int]:
        """Run a fenced outcome's UPDATE and write its attempt rows; the ids of the rows
        changed."""
        changed = list(conn.execute(update.returning(update.table.c.id), params).scalars())
        if attempt_rows:
            self.insert_attempts(conn, attempts, attempt_rows)
        return changed

    def for_update(self, stmt: Select[Any], *, skip_locked: bool = False) -> Select[Any]:
        """`stmt` locking the rows it reads until commit, where rows can be locked."""
        return stmt.with_for_update(skip_locked=skip_locked) if self.row_locks else stmt

    def claim_order_time(self, column: ColumnElement[Any], by_id: bool) -> ColumnElement[Any]:
        """The due-time column as a lease compares it (a digest's lease orders by id)."""
        return column

    def lease(
        self, conn: Connection, shape: LeaseShape, params: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        """Lease the rows `shape` picks; the leased rows with PRIOR_STATE and PRIOR_OWNER.
        Here: pick, then update the ids picked (a writer holds the database throughout)."""
        picked = {r["id"]: r for r in conn.execute(shape.picked, params).mappings()}
        if not picked:
            return []
        found = conn.execute(self._update_picked(shape), {**params, "ids": list(picked)})
        return [
            {
                **row,
                PRIOR_STATE: picked[row["id"]][PRIOR_STATE],
                PRIOR_OWNER: picked[row["id"]][PRIOR_OWNER],
            }
            for row in found.mappings()
        ]

    @functools.cache  # noqa: B019 - dialects are module-level singletons
    def _update_picked(self, shape: LeaseShape) -> Update:
        return (
            update(deliveries)
            .where(self.ids_param(deliveries.c.id, "ids"))
            .values(dict(shape.values))
            .returning(*deliveries.c)
        )

    @functools.cached_property
    def events_by_id(self) -> Executable:
        """Events by id, the ids bound at execution as `ids`."""
        return select(events).where(self.ids_param(events.c.id, "ids"))

    # -- transactions and wake-ups ------------------------------------------------------

    def relaxed_claim_start(self, conn: Connection, channel_id: int) -> ClaimStart | None:
        """Start a realtime claim whose commit need not wait for durability — a claim lost in
        a crash is re-sent like any lost lease (at least once, never lost) — reading the
        channel and its bucket in the same round trip; or None where there is no such
        setting (the claim then reads them itself)."""
        return None

    def announce(self, conn: Connection, channel_ids: Iterable[int]) -> None:
        """Tell other processes about new work at commit (W2); in-process wake-ups are the
        notifier's, called by the Store after commit."""

    def listener(
        self, url: URL, on_notify: OnWork, on_lost: Callable[[], None]
    ) -> PostgresListener | None:
        """A connection that hears other processes' announcements, or None (polling and the
        in-process notifier only)."""
        return None

    def try_exclusive(self, conn: Connection, name: str) -> bool:
        """Take the cluster-wide turn `name` for this transaction; False when another holds
        it. One writer holds the whole database here already."""
        return True

    def migration_lock(self, conn: Connection) -> None:
        """Make concurrent migrations of one database wait for each other."""


def in_insert_order(rows: Any) -> list[tuple[Any, ...]]:
    """RETURNING rows of a multi-row insert, in the order the rows were sent.

    Neither database promises RETURNING order, but both take the source rows in order and
    give each the next id, so ascending ids are the order sent. (Asking SQLAlchemy to sort
    instead makes it insert one row per statement on SQLite.)
    """
    return [tuple(row) for row in sorted(rows, key=lambda row: int(row[0]))]
