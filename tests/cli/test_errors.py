"""A database that cannot be reached, opened or written is one line naming it (password
masked) and the cause; --debug or TIDINGS_DEBUG=1 adds the traceback. Real subprocesses."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.api.server import free_port
from tests.cli.process import one_line_error, tidings_cli
from tests.conftest import postgres


def test_a_missing_sqlite_directory(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'nowhere' / 'tidings.db'}"
    for argv in (["db", "upgrade"], ["worker"]):
        line = one_line_error(tidings_cli(*argv, "--db", url))
        assert line == (
            f"tidings: database {url}: the directory {tmp_path / 'nowhere'} does not exist"
        )
    assert not (tmp_path / "nowhere").exists()


def test_a_refused_connection_masks_the_password() -> None:
    port = free_port()
    done = tidings_cli("channel", "list", "--db", f"postgresql://app:s3cret-pw@127.0.0.1:{port}/t")
    line = one_line_error(done)
    assert line.startswith(f"tidings: database postgresql://app:***@127.0.0.1:{port}/t: ")
    assert "Connection refused" in line
    assert "s3cret-pw" not in done.stderr + done.stdout
    assert "Event loop is closed" not in done.stderr


def test_an_unknown_role_and_an_unknown_database() -> None:
    server = postgres()
    role = f"nobody_{uuid.uuid4().hex[:8]}"
    no_role = f"postgresql://{role}@{server.host}:{server.port}/postgres"
    line = one_line_error(tidings_cli("db", "upgrade", "--db", no_role))
    assert line == f'tidings: database {no_role}: role "{role}" does not exist'
    no_db = server.url(f"nodb_{uuid.uuid4().hex[:8]}")
    line = one_line_error(tidings_cli("deliveries", "list", "--db", no_db))
    assert line == f'tidings: database {no_db}: database "{no_db.rsplit("/", 1)[1]}" does not exist'


@pytest.fixture
def unprivileged_url() -> Iterator[str]:
    """A fresh database and a role that may connect to it but not create tables."""
    server = postgres()
    name = server.create_database("tidings_perm")
    role = f"tidings_ro_{uuid.uuid4().hex[:8]}"
    with server.admin() as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
    try:
        yield f"postgresql://{role}@{server.host}:{server.port}/{name}"
    finally:
        server.drop_database(name)
        with server.admin() as conn:
            conn.execute(f'DROP ROLE IF EXISTS "{role}"')


def test_no_permission_to_create_the_schema(unprivileged_url: str) -> None:
    line = one_line_error(tidings_cli("db", "upgrade", "--db", unprivileged_url))
    assert line.startswith(f"tidings: database {unprivileged_url}: permission denied")


def test_debug_shows_the_traceback() -> None:
    url = f"postgresql://app@127.0.0.1:{free_port()}/tidings"
    for done in (
        tidings_cli("--debug", "channel", "list", "--db", url),
        tidings_cli("channel", "list", "--db", url, "--debug"),
        tidings_cli("channel", "list", "--db", url, env={"TIDINGS_DEBUG": "1"}),
    ):
        assert done.returncode == 1
        assert "Traceback (most recent call last)" in done.stderr
        assert done.stderr.strip().splitlines()[-1].startswith(f"tidings: database {url}: ")
