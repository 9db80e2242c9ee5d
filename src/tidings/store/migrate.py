"""The Alembic migrations shipped inside the package: applying them, and reading which one a
database is at (so commands that must not migrate can say what to do instead)."""

from __future__ import annotations

import functools
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy.engine import Connection

from tidings.core.errors import SchemaError
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


@functools.cache
def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config())


def head() -> str:
    """The revision this tidings' schema is at."""
    found = _scripts().get_current_head()
    assert found is not None, "the package ships its migrations"
    return found


def known(revision: str) -> bool:
    """Whether `revision` is one of this tidings' migrations (else a newer tidings wrote it)."""
    try:
        return _scripts().get_revision(revision) is not None
    except CommandError:
        return False


def current(connection: Connection) -> str | None:
    """The revision the database is at; None when it has no tidings schema. Reads only."""
    return MigrationContext.configure(connection).get_current_revision()


def upgrade(connection: Connection, revision: str = "head", *, name: str = "the database") -> None:
    """Migrate inside the caller's transaction; concurrent starters wait for each other. A
    database migrated by a newer tidings is refused, untouched (`name` names it then)."""
    dialect_for(connection).migration_lock(connection)
    found = current(connection)
    if found is not None and not known(found):
        raise SchemaError(f"{name} {too_new(found)}")
    command.upgrade(alembic_config(connection), revision)


def check(found: str | None, name: str) -> None:
    """Refuse a database not at this tidings' schema, saying what to run (commands other than
    `serve`, `worker` and `db upgrade` never migrate)."""
    if found == head():
        return
    if found is None:
        raise SchemaError(f"{name} has no tidings schema: run `tidings db upgrade`")
    if not known(found):
        raise SchemaError(f"{name} {too_new(found)}")
    raise SchemaError(
        f"{name} is at schema revision {found}, this tidings needs {head()}: "
        "run `tidings db upgrade`"
    )


def too_new(found: str) -> str:
    return (
        f"is at schema revision {found}, newer than this tidings knows (up to {head()}): "
        "upgrade tidings"
    )
