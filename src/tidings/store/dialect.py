"""The few statements that differ between PostgreSQL and SQLite, in one place."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection


def insert_ignoring_conflict(conn: Connection, table: Table, *index_elements: str) -> Any:
    """INSERT … ON CONFLICT (index_elements) DO NOTHING, for either backend."""
    module: Any = postgresql if conn.dialect.name == "postgresql" else sqlite
    return module.insert(table).on_conflict_do_nothing(index_elements=list(index_elements))


def is_postgres(conn: Connection) -> bool:
    return conn.dialect.name == "postgresql"
