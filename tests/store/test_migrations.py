"""Migrations equal the declared schema, on an empty SQLite file and an empty PostgreSQL."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import Connection

from tests.conftest import postgres
from tidings.core.errors import SchemaError
from tidings.store import migrate
from tidings.store.schema import metadata


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    server = postgres()
    name = server.create_database("tidings_migrate")
    try:
        yield server.url(name).replace("postgresql://", "postgresql+psycopg://", 1)
    finally:
        server.drop_database(name)


def test_upgrade_head_on_an_empty_database_equals_the_declared_schema(empty_database: str) -> None:
    engine = create_engine(empty_database)
    try:
        with engine.begin() as conn:
            migrate.upgrade(conn)
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(context, metadata) == []
            tables = set(inspect(conn).get_table_names())
        assert tables >= {t.name for t in metadata.sorted_tables}
        with engine.begin() as conn:  # a second upgrade is a no-op
            migrate.upgrade(conn)
    finally:
        engine.dispose()


NOW = "2026-01-01 00:00:00"
OLD_ROWS = [
    "INSERT INTO events (kind, subject, severity, title, body, labels, data, created_at)"
    f" VALUES ('a.b', 's1', 'info', '', '', '{{}}', '{{}}', '{NOW}'),"
    f" ('a.b', 's2', 'info', '', '', '{{}}', '{{}}', '{NOW}')",
    "INSERT INTO channels (name, kind, config, enabled, mode, digest_period_s, filter,"
    " rate_per_min, rate_burst, max_attempts, retry_backoff_s, timeout_s, templates, created_at,"
    " updated_at) VALUES ('c', 'inbox', '{}', true, 'realtime', 3600, '{}', 0, 1, 3, 30, 15,"
    f" '{{}}', '{NOW}', '{NOW}')",
    "INSERT INTO deliveries (event_id, channel_id, state, attempts, next_attempt_at, created_at)"
    f" VALUES (1, 1, 'sent', 1, '{NOW}', '{NOW}'), (2, 1, 'pending', 0, '{NOW}', '{NOW}')",
]


def _store_old_rows(conn: Connection) -> None:
    """The schema at revision 0006, holding `OLD_ROWS`."""
    migrate.upgrade(conn, "0006")
    for statement in OLD_ROWS:
        conn.execute(text(statement))


def test_n1_rows_stored_before_message_ids_each_get_a_random_one(empty_database: str) -> None:
    engine = create_engine(empty_database)
    try:
        with engine.begin() as conn:
            _store_old_rows(conn)
        with engine.begin() as conn:
            migrate.upgrade(conn)
        with engine.connect() as conn:
            ids = [r[0] for r in conn.execute(text("SELECT message_id FROM deliveries"))]
        assert len(ids) == 2
        assert len(set(ids)) == 2
        assert all(re.fullmatch(r"msg_[0-9a-f]{32}", i) for i in ids)
    finally:
        engine.dispose()


def test_o7_attempt_rows_stored_twice_before_0017_keep_the_first(empty_database: str) -> None:
    attempt = (
        "INSERT INTO attempts (delivery_id, worker_id, status, duration_ms, started_at,"
        " finished_at) VALUES (1, 'w', 'delivered', {ms}, '{at}', '{at}')"
    )
    later = "2026-01-01 00:00:01"
    engine = create_engine(empty_database)
    try:
        with engine.begin() as conn:
            _store_old_rows(conn)
            migrate.upgrade(conn, "0014_history_scale")
            for ms, at in ((5, NOW), (6, NOW), (7, later)):  # the second is the first again
                conn.execute(text(attempt.format(ms=ms, at=at)))
        with engine.begin() as conn:
            migrate.upgrade(conn)
        with engine.connect() as conn:
            kept = conn.execute(text("SELECT duration_ms FROM attempts ORDER BY id")).all()
        assert [ms for (ms,) in kept] == [5, 7]
    finally:
        engine.dispose()


def test_every_foreign_key_has_an_index_that_leads_with_it() -> None:
    """A delete follows each foreign key (CASCADE or SET NULL) to the rows that name the
    deleted one: without an index leading with the column, every deleted row scans the table
    (a retention batch of 1,000 deliveries took ~10 s at 200,000 rows)."""
    unindexed = []
    for table in metadata.sorted_tables:
        leading = {ix.columns[0].name for ix in table.indexes if ix.columns}
        leading |= {
            c.columns[0].name
            for c in table.constraints
            if getattr(c, "columns", None) and not hasattr(c, "elements")
        }
        unindexed += [
            f"{table.name}.{fk.parent.name}"
            for fk in table.foreign_keys
            if fk.parent.name not in leading
        ]
    assert unindexed == []


def test_the_revisions_known_without_alembic_are_the_migrations_shipped() -> None:
    """`migrate.REVISIONS` (what every command checks a database against, without Alembic)
    lists the package's migrations in order, the head last."""
    shipped = [r.revision for r in migrate.scripts().walk_revisions()]
    assert list(migrate.REVISIONS) == shipped[::-1]
    assert migrate.head() == migrate.scripts().get_current_head()


def test_the_revision_read_with_sql_is_alembics(empty_database: str) -> None:
    engine = create_engine(empty_database)

    def both() -> tuple[str | None, str | None]:
        with engine.connect() as conn:
            return migrate.current(conn), MigrationContext.configure(conn).get_current_revision()

    try:
        assert both() == (None, None)
        for revision in ("0001", "0014_history_scale", "head"):
            with engine.begin() as conn:
                migrate.upgrade(conn, revision)
            found, alembics = both()
            assert found == alembics
            assert found == (migrate.head() if revision == "head" else revision)
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO alembic_version VALUES ('0017')"))
        with engine.connect() as conn, pytest.raises(SchemaError, match="several schema"):
            migrate.current(conn)
        with engine.begin() as conn:
            conn.execute(text("DELETE FROM alembic_version"))
        assert both() == (None, None)
    finally:
        engine.dispose()
