"""Apply the Alembic migrations shipped inside the package."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection

from tidings.store.dialects import dialect_for

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(connection: Connection | None = None, url: str | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if url is not None:
        config.set_main_option("sqlalchemy.url", url)
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def upgrade(connection: Connection, revision: str = "head") -> None:
    """Migrate inside the caller's transaction; concurrent starters wait for each other."""
    dialect_for(connection).migration_lock(connection)
    command.upgrade(alembic_config(connection), revision)
