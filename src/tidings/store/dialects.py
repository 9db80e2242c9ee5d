"""Which Dialect a connection speaks: PostgreSQL or SQLite."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from tidings.store.dialect import Dialect
from tidings.store.postgres import POSTGRES
from tidings.store.sqlite import SQLITE

_BY_NAME: dict[str, Dialect] = {d.name: d for d in (POSTGRES, SQLITE)}


def dialect_for(conn: Connection) -> Dialect:
    """The Dialect of `conn`'s database."""
    return _BY_NAME[conn.dialect.name]


def dialect_named(name: str) -> Dialect:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"tidings runs on sqlite or postgresql, not {name!r}") from None
