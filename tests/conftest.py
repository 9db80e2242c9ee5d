"""Shared fixtures: every store test runs on a SQLite file and on a real PostgreSQL."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

import tidings
from tests.pg import Server, find_server
from tests.sink import Sink
from tidings.store import migrate

BACKENDS = ["sqlite", "postgresql"]
#: The secret key every process of the test run uses (S4), child processes included; tests of
#: the key's own rules set their own.
TEST_SECRET_KEY = "dGlkaW5ncy10ZXN0LWtleS0wMTIzNDU2Nzg5YWJjZGU="
os.environ.setdefault("TIDINGS_SECRET_KEY", TEST_SECRET_KEY)
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
TABLES = [
    "attempts",
    "resends",
    "rate_buckets",
    "inbox_messages",
    "deliveries",
    "events",
    "channels",
    "ui_sessions",
    "api_tokens",
    "channel_health",
    "bulk_resends",
    "secret_keys",
]


class _PostgresInfo:
    server: Server | None = None
    reason = ""
    database: str | None = None
    looked = False


PG = _PostgresInfo()


def postgres() -> Server:
    if not PG.looked:
        PG.server, PG.reason = find_server()
        PG.looked = True
    if PG.server is None:
        if IN_CI:
            pytest.fail(f"PostgreSQL is required under CI=true: {PG.reason}", pytrace=False)
        pytest.skip(f"PostgreSQL tests SKIPPED: {PG.reason}")
    return PG.server


#: What the test processes found: (a server was used, where from or why not). With
#: pytest-xdist the tests run in worker processes, which hand it to the controller.
FOUND: dict[bool, str] = {}


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if PG.looked:
        FOUND[PG.server is not None] = PG.reason
    for used, reason in sorted(FOUND.items()):
        line = reason if used else f"!!! {reason} — PostgreSQL tests were skipped !!!"
        terminalreporter.write_line(f"tidings: {line}", bold=not used, red=not used)


def pytest_sessionfinish(session: pytest.Session) -> None:
    handed = getattr(session.config, "workeroutput", None)  # set in an xdist worker
    if handed is not None and PG.looked:
        handed["tidings_postgres"] = (PG.server is not None, PG.reason)
    if PG.server is not None and PG.database is not None:
        PG.server.drop_database(PG.database)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """An xdist worker ended: keep what it found for the summary."""
    found = getattr(node, "workeroutput", {}).get("tidings_postgres")
    if found is not None:
        used, reason = found
        FOUND[bool(used)] = str(reason)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file; each test gets a copy (cheaper than migrating each time)."""
    path = tmp_path_factory.mktemp("template") / "template.db"
    _migrate(f"sqlite:///{path}")
    return path


def _postgres_database() -> str:
    """One migrated database for the session; tests truncate it before they start."""
    server = postgres()
    if PG.database is None:
        PG.database = server.create_database()
        _migrate(server.url(PG.database).replace("postgresql://", "postgresql+psycopg://", 1))
    return server.url(PG.database)


def _migrate(sync_url: str) -> None:
    engine = create_engine(sync_url)
    try:
        with engine.begin() as conn:
            migrate.upgrade(conn)
    finally:
        engine.dispose()


@pytest.fixture
def pg_url() -> str:
    """The session's PostgreSQL database, emptied, for tests that only make sense there."""
    url = _postgres_database()
    _truncate(url)
    return url


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db_url(backend: str, tmp_path: Path, sqlite_template: Path) -> Iterator[str]:
    if backend == "sqlite":
        path = tmp_path / "tidings.db"
        shutil.copy(sqlite_template, path)
        yield f"sqlite:///{path}"
        return
    url = _postgres_database()
    _truncate(url)
    yield url


def _truncate(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY CASCADE")


@pytest.fixture
async def hub(db_url: str) -> AsyncIterator[tidings.Hub]:
    async with tidings.Hub(db_url) as the_hub:
        yield the_hub


async def count(hub: tidings.Hub, table: str) -> int:
    async with hub.store.engine.connect() as conn:
        return int((await conn.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one())


@pytest.fixture
def sink() -> Iterator[Sink]:
    """A real HTTP receiver on 127.0.0.1, answering as each test scripts it."""
    with Sink() as the_sink:
        yield the_sink
