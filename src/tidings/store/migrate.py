"""Apply the Alembic migrations shipped inside the package."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import text
from sqlalchemy.engine import Connection

MIGRATIONS = Path(__file__).parent / "migrations"
# Any constant works; it only has to be the same for every tidings process on one database.
_ADVISORY_LOCK_ID = 0x7469_6469


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
    if connection.dialect.name == "postgresql":
        connection.execute(text(f"SELECT pg_advisory_xact_lock({_ADVISORY_LOCK_ID})"))
    command.upgrade(alembic_config(connection), revision)
