"""CPU time a run costs: a server process's own and that of the PostgreSQL backends serving
its database, read from /proc (Linux), as milliseconds per event. On a shared machine this
holds steadier than a rate: another process's load slows a run but does not bill it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.database import Postgres

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def cpu_s(pids: list[int]) -> float:
    """User and system CPU seconds of these processes so far (those gone count 0)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS_PER_S


def backends(pg: Postgres, database: str) -> list[int]:
    """The PostgreSQL server processes of the connections to `database` (on this host)."""
    with pg.connect(database) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        ).fetchall()
    return [int(row[0]) for row in rows]


@dataclass
class Meter:
    """CPU seconds of a server and of its database's backends over a block."""

    server: float = 0.0
    database: float = 0.0
    backends: int = 0

    def per_event_ms(self, events: float) -> dict[str, float]:
        if events <= 0:
            return {}
        return {
            "server_cpu_ms_per_event": round(1000 * self.server / events, 3),
            "db_cpu_ms_per_event": round(1000 * self.database / events, 3),
            "db_backends": self.backends,
        }


@contextlib.contextmanager
def metered(pg: Postgres, database: str, server_pid: int) -> Iterator[Meter]:
    """Backends are listed at the start: run after a warm-up, so the pool is open."""
    pids = backends(pg, database)
    meter = Meter(backends=len(pids))
    server, db = cpu_s([server_pid]), cpu_s(pids)
    yield meter
    meter.server = cpu_s([server_pid]) - server
    meter.database = cpu_s(pids) - db
