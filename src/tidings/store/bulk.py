"""Multi-row inserts that come back in the order sent, fast on each backend.

PostgreSQL takes many rows as one JSON text, typed by the table itself
(`INSERT … SELECT … FROM json_populate_recordset(NULL::table, :rows)`): a thousand rows are
one parameter, and the statement text — so the server's prepared plan — is the same for
every batch size. Measured on a 1,000-event batch: 9 ms against 27 ms for a multi-row
VALUES list, the same as one array per column (`unnest`), whose elements asyncpg checks one
by one in Python: JSON moves that work to the server, which a worker busy sending can spare
better. A few rows, and SQLite (which binds parameters in C anyway), get SQLAlchemy's
multi-row VALUES.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    ColumnElement,
    Table,
    Text,
    bindparam,
    cast,
    func,
    literal_column,
    select,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from tidings.core import jsontext

ORDINALITY = "n_"
ROWS_PARAM = "rows_json"
#: Below this many rows a plain VALUES list is cheaper to build than the recordset statement.
RECORDSET_FROM_ROWS = 8


def insert_rows(
    conn: Connection,
    table: Table,
    values: Sequence[Mapping[str, Any]],
    returning: Sequence[Column[Any]] = (),
    *,
    constants: Mapping[str, ColumnElement[Any]] | None = None,
    skip_conflicts_on: str | None = None,
) -> list[tuple[Any, ...]]:
    """Insert `values` (all with the same keys) plus `constants` (SQL expressions, the same
    for every row); answer the `returning` columns, one row per inserted row, in the order of
    `values` — the first returning column must be the table's ascending integer id.

    With `skip_conflicts_on`, a row clashing on that unique column is not inserted and has no
    answer row.
    """
    if not values:
        return []
    constants = dict(constants or {})
    if conn.dialect.name == "postgresql" and len(values) >= RECORDSET_FROM_ROWS:
        stmt, params = _recordset_insert(table, list(values[0]), values, constants)
        if skip_conflicts_on is not None:
            stmt = stmt.on_conflict_do_nothing(index_elements=[skip_conflicts_on])
        if not returning:
            conn.execute(stmt, params)
            return []
        return _in_insert_order(conn.execute(stmt.returning(*returning), params).all())
    # A multi-row VALUES list (SQLAlchemy's "insertmanyvalues").
    dialect: Any = postgresql if conn.dialect.name == "postgresql" else sqlite
    listed = dialect.insert(table).values(constants) if constants else dialect.insert(table)
    if skip_conflicts_on is not None:
        listed = listed.on_conflict_do_nothing(index_elements=[skip_conflicts_on])
    if not returning:
        conn.execute(listed, list(values))
        return []
    return _in_insert_order(conn.execute(listed.returning(*returning), list(values)).all())


def _in_insert_order(rows: Any) -> list[tuple[Any, ...]]:
    """RETURNING rows of a multi-row insert, in the order the rows were sent.

    Neither database promises RETURNING order, but both take the source rows in order and
    give each the next id, so ascending ids are the order sent. (Asking SQLAlchemy to sort
    instead makes it insert one row per statement on SQLite.)
    """
    return [tuple(row) for row in sorted(rows, key=lambda row: int(row[0]))]


def _recordset_insert(
    table: Table,
    names: list[str],
    values: Sequence[Mapping[str, Any]],
    constants: Mapping[str, ColumnElement[Any]],
) -> tuple[Any, dict[str, str]]:
    """The statement and its one parameter: the rows as one JSON text."""
    document = jsontext.dumps(list(values))  # every row has exactly these keys
    params = {ROWS_PARAM: document.decode()}
    if not constants:
        return _plain_recordset_insert(table, tuple(names)), params
    source = recordset_source(table)
    rows = select(*(source.c[n] for n in names), *constants.values()).order_by(source.c[ORDINALITY])
    return postgresql.insert(table).from_select([*names, *constants], rows), params


@functools.cache
def _plain_recordset_insert(table: Table, names: tuple[str, ...]) -> Any:
    """The whole statement when every value comes from the rows: built once."""
    source = recordset_source(table)
    rows = select(*(source.c[n] for n in names)).order_by(source.c[ORDINALITY])
    return postgresql.insert(table).from_select(list(names), rows)


@functools.cache
def recordset_source(table: Table) -> Any:
    """`json_populate_recordset(NULL::table, :rows_json) WITH ORDINALITY AS rows_(…, n_)`:
    the rows typed by the table itself, in the order given (built once per table). Order
    them by `n_`."""
    return (
        func.json_populate_recordset(
            literal_column(f"NULL::{table.name}"), cast(bindparam(ROWS_PARAM, type_=Text), JSON)
        )
        .table_valued(*(c.name for c in table.c), with_ordinality=ORDINALITY)
        .render_derived()
        .alias("rows_")
    )
