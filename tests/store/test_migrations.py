"""Migrations equal the declared schema, on an empty SQLite file and an empty PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from tests.conftest import postgres
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
