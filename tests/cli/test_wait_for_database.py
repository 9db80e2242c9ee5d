"""`tidings worker` (and `serve`) started before their database answers wait for it, saying so
in the log, and start once it does; a database that refuses them (an unknown role) or a wait
of 0 still ends the process at once with one line."""

from __future__ import annotations

import base64
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from tests.chaos.proxy import Proxy
from tests.cli.process import one_line_error, tidings_cli
from tests.conftest import postgres
from tests.pg import Server


class Output:
    """A process's output lines as they come, so a test waits for a line, not for a time."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        assert process.stdout is not None
        self._stream = process.stdout
        self._reader = threading.Thread(target=self._read, args=(self._stream,), daemon=True)
        self._reader.start()

    def close(self) -> None:
        """After the process ended: the reader has met the end of its output."""
        self._reader.join(10)
        self._stream.close()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, text: str, timeout_s: float = 60) -> str:
        while True:
            line = self.lines.get(timeout=timeout_s)
            if line is None:
                raise AssertionError(f"ended before {text!r}:\n{''.join(self.seen)}")
            self.seen.append(line)
            if text in line:
                return line


@pytest.fixture
def database() -> Iterator[tuple[Server, str]]:
    server = postgres()
    name = server.create_database("tidings_wait")
    try:
        yield server, name
    finally:
        server.drop_database(name)


@pytest.fixture
def refusing(database: tuple[Server, str]) -> Iterator[tuple[Proxy, str]]:
    """A proxy in front of the database that refuses every connection until healed (as
    while the database restarts), and the URL through it."""
    server, name = database
    proxy = Proxy(server.port)
    proxy.start()
    try:
        proxy.set("drop")
        yield proxy, f"postgresql://{server.user}@127.0.0.1:{proxy.port}/{name}"
    finally:
        proxy.stop()


def _env(url: str, wait_s: float) -> dict[str, str]:
    return {
        **os.environ,
        "TIDINGS_DB": url,
        "TIDINGS_DB_WAIT_S": str(wait_s),
        "TIDINGS_SECRET_KEY": base64.b64encode(os.urandom(32)).decode(),
    }


def test_a_worker_waits_for_its_database_and_starts_when_it_answers(
    refusing: tuple[Proxy, str],
) -> None:
    proxy, url = refusing
    worker = subprocess.Popen(
        [sys.executable, "-m", "tidings", "worker", "--id", "patient"],
        env=_env(url, 120),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = Output(worker)
    try:
        said = output.wait_for("cannot be reached")
        assert url.rsplit("@", 1)[1] in said
        assert "trying again every" in said
        assert worker.poll() is None  # still waiting, not gone
        proxy.heal()
        output.wait_for("dispatcher patient started on")
        worker.terminate()
        assert worker.wait(30) == 0
    finally:
        worker.kill()
        worker.wait()
        output.close()
    assert "Traceback" not in "".join(output.seen)


def test_without_a_wait_an_unreachable_database_ends_the_worker_at_once(
    refusing: tuple[Proxy, str],
) -> None:
    _proxy, url = refusing
    done = tidings_cli("worker", env=_env(url, 0))
    assert one_line_error(done).startswith(f"tidings: database {url}: ")


def test_a_database_that_refuses_the_worker_ends_it_at_once_despite_the_wait(
    database: tuple[Server, str],
) -> None:
    server, _name = database
    url = f"postgresql://nobody_waits@{server.host}:{server.port}/postgres"
    done = tidings_cli("worker", env=_env(url, 120), timeout=30)
    assert one_line_error(done) == f'tidings: database {url}: role "nobody_waits" does not exist'
