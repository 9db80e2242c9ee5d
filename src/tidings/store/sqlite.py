"""SQLite's hooks: the application's clock decides (one file on one host), writers are
serialised by BEGIN IMMEDIATE rather than row locks, and attempt rows go straight to the driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import ColumnElement, Table, type_coerce
from sqlalchemy.engine import Connection
from sqlalchemy.sql.expression import UnaryExpression
from sqlalchemy.sql.operators import custom_op

from tidings.store.dialect import Dialect
from tidings.store.schema import UTCDateTime, sqlite_text


class SqliteDialect(Dialect):
    name: ClassVar[str] = "sqlite"
    transactions_on_threads: ClassVar[bool] = True

    def claim_order_time(self, column: ColumnElement[Any], by_id: bool) -> ColumnElement[Any]:
        """For a digest's lease (by id), a unary + on the time — a no-op SQLite documents for
        this — keeps the time off the index: without statistics SQLite prefers the claim
        index (it constrains one more column) and then sorts every due row by id, where the
        live rows' id index gives the order."""
        if not by_id:
            return column
        return type_coerce(UnaryExpression(column, operator=custom_op("+")), UTCDateTime)

    def insert_attempts(
        self, conn: Connection, table: Table, rows: Sequence[dict[str, Any]]
    ) -> None:
        """Straight to the driver's executemany: through SQLAlchemy each value went through its
        bind processing in Python, a large share of the time a claim's write took. A row
        already stored (same delivery, worker, start and status: an outcome written again) is
        left out, as on PostgreSQL."""
        if not rows:
            return
        names = [c.name for c in table.c if c.name != "id"]
        # Named parameters, each bound once and used twice: Python 3.12's sqlite3 warns of
        # numbered ones (`?1`) given a sequence, and 3.14's refuses them.
        same = " AND ".join(f"{n} = :{n}" for n in _ATTEMPT_IDENTITY)
        sql = (
            f"INSERT INTO {table.name} ({', '.join(names)})"
            f" SELECT {', '.join(f':{n}' for n in names)}"
            f" WHERE NOT EXISTS (SELECT 1 FROM {table.name} WHERE {same})"
        )
        conn.exec_driver_sql(sql, [{n: _plain(row[n]) for n in names} for row in rows])


#: What makes two attempt rows the same attempt.
_ATTEMPT_IDENTITY = ("delivery_id", "started_at", "worker_id", "status")


def _plain(value: Any) -> Any:
    return sqlite_text(value) if isinstance(value, datetime) else value


SQLITE = SqliteDialect()
