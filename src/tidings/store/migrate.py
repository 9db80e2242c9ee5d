"""The Alembic migrations shipped inside the package: applying them, and reading which one a
database is at (so commands that must not migrate can say what to do instead).

Only applying them needs Alembic. Which revision a database is at is one row read with
SQL, checked against the revisions below (a test holds them to the migrations shipped):
every command checks, and importing Alembic and reading its scripts cost each one ~70 ms.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

from tidings.core.errors import SchemaError
from tidings.store.dialects import dialect_for

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

MIGRATIONS = Path(__file__).parent / "migrations"
#: Every revision the package ships, in the order they apply (not their names' order: some
#: were written side by side); the last is the schema this tidings needs.
REVISIONS = (
    "0001",
    "0002",
    "0003",
    "0004",
    "0005",
    "0006",
    "0010",
    "0011",
    "0012",
    "0013",
    "0008",
    "0007",
    "0009",
    "0016",
    "0014_history_scale",
    "0017",
    "0018",
    "0019",
)
#: Where Alembic records a database's revision.
VERSION_TABLE = "alembic_version"


def alembic_config(connection: Connection | None = None, url: str | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if url is not None:
        config.set_main_option("sqlalchemy.url", url)
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@functools.cache
def scripts() -> ScriptDirectory:
    """The migrations as Alembic reads them."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config())


def head() -> str:
    """The revision this tidings' schema is at."""
    return REVISIONS[-1]


def known(revision: str) -> bool:
    """Whether `revision` is one of this tidings' migrations (else a newer tidings wrote it)."""
    return revision in REVISIONS


def current(connection: Connection) -> str | None:
    """The revision the database is at; None when it has no tidings schema. Reads only."""
    if not inspect(connection).has_table(VERSION_TABLE):
        return None
    found = connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    if len(found) > 1:
        raise SchemaError(f"the database records several schema revisions: {', '.join(found)}")
    return found[0] if found else None


def upgrade(connection: Connection, revision: str = "head", *, name: str = "the database") -> None:
    """Migrate inside the caller's transaction; concurrent starters wait for each other. A
    database migrated by a newer tidings is refused, untouched (`name` names it then)."""
    from alembic import command

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
