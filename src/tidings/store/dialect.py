"""The few statements that differ between PostgreSQL and SQLite, in one place."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import BigInteger, ColumnElement, Table, any_, literal
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection


def insert_ignoring_conflict(conn: Connection, table: Table, *index_elements: str) -> Any:
    """INSERT … ON CONFLICT (index_elements) DO NOTHING, for either backend."""
    module: Any = postgresql if conn.dialect.name == "postgresql" else sqlite
    return module.insert(table).on_conflict_do_nothing(index_elements=list(index_elements))


def is_postgres(conn: Connection) -> bool:
    return conn.dialect.name == "postgresql"


def ids_in(conn: Connection, column: ColumnElement[Any], ids: Iterable[int]) -> ColumnElement[bool]:
    """`column IN ids`. On PostgreSQL one array parameter (`= ANY($1)`), so the statement text
    is the same for every batch size and the server reuses one prepared plan."""
    values = list(ids)
    if is_postgres(conn):
        return column == any_(literal(values, postgresql.ARRAY(BigInteger)))
    return column.in_(values)
