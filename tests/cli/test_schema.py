"""Only `serve`, `worker` and `db upgrade` migrate; every other command leaves a database it
cannot use untouched and says what to run, in one line. `serve` and `worker` refuse a schema
newer than they know. Real subprocesses on a SQLite file and a fresh PostgreSQL database."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import create_engine, text

from tests.api.server import free_port
from tests.cli.process import one_line_error, tidings_cli
from tests.conftest import postgres
from tidings.store import migrate

HEAD = migrate.head()
READS = [
    ["channel", "list"],
    ["deliveries", "list"],
    ["publish", "--kind", "a.b", "--subject", "s"],
    ["token", "create", "--name", "n", "--scope", "read"],
]


@pytest.fixture(params=["sqlite", "postgresql"])
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database with nothing in it: a SQLite path not yet created, or a new PostgreSQL one."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
        return
    server = postgres()
    name = server.create_database("tidings_cli")
    try:
        yield server.url(name)
    finally:
        server.drop_database(name)


def tables(url: str) -> set[str]:
    if url.startswith("sqlite"):
        path = url.removeprefix("sqlite:///")
        with contextlib.closing(sqlite3.connect(path)) as conn:
            return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    with psycopg.connect(url) as conn:
        found = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        return {r[0] for r in found}


def set_revision(url: str, revision: str) -> None:
    """Migrate to `revision`, or (for one this tidings does not know) pretend a newer one did."""
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.begin() as conn:
            if migrate.known(revision):
                migrate.upgrade(conn, revision)
            else:
                migrate.upgrade(conn)
                conn.execute(text("UPDATE alembic_version SET version_num = :r"), {"r": revision})
    finally:
        engine.dispose()


@pytest.mark.parametrize("argv", READS, ids=lambda a: " ".join(a[:2]))
def test_commands_that_read_do_not_create_a_schema(fresh_url: str, argv: list[str]) -> None:
    line = one_line_error(tidings_cli(*argv, "--db", fresh_url))
    if fresh_url.startswith("sqlite"):
        assert line == f"tidings: database {fresh_url} does not exist: run `tidings db upgrade`"
        assert not Path(fresh_url.removeprefix("sqlite:///")).exists()
    else:
        assert line == (
            f"tidings: database {fresh_url} has no tidings schema: run `tidings db upgrade`"
        )
        assert tables(fresh_url) == set()


def test_an_empty_sqlite_file_is_left_empty(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()
    line = one_line_error(tidings_cli("channel", "list", "--db", f"sqlite:///{path}"))
    assert "has no tidings schema: run `tidings db upgrade`" in line
    assert tables(f"sqlite:///{path}") == set()


def test_db_upgrade_migrates_and_then_reads_work(fresh_url: str) -> None:
    done = tidings_cli("db", "upgrade", "--db", fresh_url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"database {fresh_url} is up to date"
    assert {"channels", "deliveries", "alembic_version"} <= tables(fresh_url)
    listed = tidings_cli("channel", "list", "--json", "--db", fresh_url)
    assert (listed.returncode, listed.stdout.strip()) == (0, "[]")


def test_an_older_schema_is_named_with_what_to_run(fresh_url: str) -> None:
    set_revision(fresh_url, "0006")
    line = one_line_error(tidings_cli("channel", "list", "--db", fresh_url))
    assert line == (
        f"tidings: database {fresh_url} is at schema revision 0006, this tidings needs {HEAD}: "
        "run `tidings db upgrade`"
    )
    assert tidings_cli("db", "upgrade", "--db", fresh_url).returncode == 0
    assert tidings_cli("channel", "list", "--db", fresh_url).returncode == 0


@pytest.mark.parametrize(
    "argv",
    [["worker"], ["serve", "--port", "0"], ["db", "upgrade"], ["channel", "list"]],
    ids=lambda a: " ".join(a[:2]),
)
def test_a_newer_schema_is_refused_and_left_alone(fresh_url: str, argv: list[str]) -> None:
    set_revision(fresh_url, "9999")
    before = tables(fresh_url)
    if argv[0] == "serve":
        argv = ["serve", "--port", str(free_port())]
    line = one_line_error(tidings_cli(*argv, "--db", fresh_url, timeout=120))
    assert line == (
        f"tidings: database {fresh_url} is at schema revision 9999, newer than this tidings "
        f"knows (up to {HEAD}): upgrade tidings"
    )
    assert tables(fresh_url) == before
