"""The benchmark's databases: a fresh PostgreSQL database per run (found or started as the
tests do, via tests/pg.py), SQLite files, and waiting for their deliveries to settle.
Imports bench.processes only for its polling."""

from __future__ import annotations

import contextlib
import sqlite3
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg

from bench.processes import ROOT, wait_until

#: Delivery states a row does not leave; a drain is over when every row is in one.
FINAL = ("sent", "failed", "skipped")

States = Callable[[], dict[str, int]]


class Postgres:
    """The server the tests would use, and the databases made on it (dropped on exit)."""

    def __init__(self) -> None:
        sys.path.insert(0, str(ROOT))
        from tests.pg import find_server

        server, where = find_server()
        if server is None:
            raise RuntimeError(where)
        self.server = server
        self.where = where
        self.created: list[str] = []
        with server.admin() as conn:
            row = conn.execute("SHOW server_version").fetchone()
            self.version = str(row[0]) if row else "?"

    @contextlib.contextmanager
    def database(self) -> Iterator[tuple[str, str]]:
        """A new empty database: its name and its URL."""
        name = self.server.create_database("tidings_bench")
        self.created.append(name)
        try:
            yield name, self.server.url(name)
        finally:
            self.server.drop_database(name)
            self.created.remove(name)

    def drop_all(self) -> None:
        for name in list(self.created):
            with contextlib.suppress(Exception):
                self.server.drop_database(name)

    def connect(self, name: str) -> psycopg.Connection[Any]:
        s = self.server
        return psycopg.connect(host=s.host, port=s.port, user=s.user, dbname=name, autocommit=True)


def states_pg(pg: Postgres, name: str) -> States:
    """Deliveries per state in database `name`, over one connection kept open."""
    conn = pg.connect(name)

    def states() -> dict[str, int]:
        rows = conn.execute("SELECT state, count(*) FROM deliveries GROUP BY state").fetchall()
        return {str(r[0]): int(r[1]) for r in rows}

    return states


def states_sqlite(path: Path) -> States:
    """Deliveries per state in the SQLite file `path`; a connection per look, so none is
    held open while the worker writes."""

    def states() -> dict[str, int]:
        conn = sqlite3.connect(path, timeout=30)
        try:
            rows = conn.execute("SELECT state, count(*) FROM deliveries GROUP BY state").fetchall()
        finally:
            conn.close()
        return {str(r[0]): int(r[1]) for r in rows}

    return states


def drain(
    states: States, total: int, timeout_s: float, interval_s: float = 0.25
) -> tuple[float, dict[str, int]]:
    """Poll until `total` deliveries are final: the time of the poll that saw it, and the
    states it saw."""
    seen: dict[str, int] = {}

    def done() -> bool:
        nonlocal seen
        seen = states()
        return sum(seen.get(s, 0) for s in FINAL) >= total

    at = wait_until(done, timeout_s, interval_s, f"{total} deliveries to settle")
    return at, seen
