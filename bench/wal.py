"""WAL bytes per delivered message on PostgreSQL: a private cluster (so no other database's
writes are counted), N webhook events published and drained by one worker, the WAL position
read before publishing, after it, and after the drain; once with the indexes migration 0009
left and once with migration 0014's, in alternating rounds. The drain rate of each is kept
too: fewer index writes must not slow the send path."""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from typing import Any

import psycopg

from bench import workload
from bench.database import FINAL
from bench.processes import ROOT, workers
from bench.result import Result
from bench.rig import Rig

TIMEOUT_S = 600
#: Back to the indexes before migration 0014 (what it undoes on its way down).
BEFORE_0014 = (
    "DROP INDEX ix_deliveries_ended_by_channel",
    "DROP INDEX ix_deliveries_ended_by_state",
    "DROP INDEX ix_deliveries_created_at",
    "DROP INDEX ix_events_kind",
    "DROP INDEX ix_events_tenant",
    "DROP INDEX ix_attempts_finished_at",
    "CREATE INDEX ix_deliveries_created_at ON deliveries (created_at)",
    "CREATE INDEX ix_deliveries_state ON deliveries (state)",
    "CREATE INDEX ix_deliveries_channel_id_state ON deliveries (channel_id, state)",
)


def _lsn(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    return str(row[0])


def _bytes(conn: psycopg.Connection[Any], later: str, earlier: str) -> int:
    row = conn.execute("SELECT pg_wal_lsn_diff(%s, %s)", (later, earlier)).fetchone()
    assert row is not None
    return int(row[0])


def _once(rig: Rig, server: Any, variant: str, n: int) -> dict[str, float]:
    name = server.create_database("tidings_wal")
    url = server.url(name)
    try:
        asyncio.run(workload.setup(url, [workload.webhook("hook", rig.sink.url("/hook"))]))
        with psycopg.connect(
            host=server.host, port=server.port, user=server.user, dbname=name, autocommit=True
        ) as conn:
            if variant == "before":
                for statement in BEFORE_0014:
                    conn.execute(statement)
            conn.execute("CHECKPOINT")
            start = _lsn(conn)
            asyncio.run(workload.publish_all(url, [workload.event(i) for i in range(n)]))
            published = _lsn(conn)
            sink_before = rig.sink.stats()["count"]
            with workers(rig.tmp, url, 1, poll_interval_s=1, lease_s=120) as started:
                t0 = started[0].wait_started()
                rig.sink.wait_for(sink_before + n, TIMEOUT_S)
                while True:
                    row = conn.execute(
                        "SELECT count(*) FROM deliveries WHERE state = ANY(%s)", (list(FINAL),)
                    ).fetchone()
                    if row is not None and int(row[0]) >= n:
                        break
                    time.sleep(0.01)
                elapsed = time.monotonic() - t0
                drained = _lsn(conn)  # before the worker stops: its shutdown is not a message's
            return {
                "publish_bytes": _bytes(conn, published, start) / n,
                "deliver_bytes": _bytes(conn, drained, published) / n,
                "rate": n / elapsed,
            }
    finally:
        server.drop_database(name)


def run(rig: Rig) -> list[Result]:
    sys.path.insert(0, str(ROOT))
    from tests.pg import _throwaway_cluster

    server = _throwaway_cluster()
    name = "history/wal-bytes-per-message"
    if server is None:
        return [Result(name, None, "", "postgresql", error="no private PostgreSQL cluster")]
    n = rig.counts.history_wal
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    for _ in range(rig.rounds):
        for variant in runs:
            runs[variant].append(_once(rig, server, variant, n))
    med = {v: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for v, rs in runs.items()}
    total = {v: m["publish_bytes"] + m["deliver_bytes"] for v, m in med.items()}
    notes = {
        "messages": n,
        "rounds": rig.rounds,
        "before_0014": {k: round(x, 1) for k, x in med["before"].items()},
        "after_0014": {k: round(x, 1) for k, x in med["after"].items()},
        "ratio_after_to_before": round(total["after"] / total["before"], 3),
        "drain_rate_ratio": round(med["after"]["rate"] / med["before"]["rate"], 3),
        "how": "private cluster; pg_current_wal_lsn() around publish and drain, medians",
    }
    return [
        Result(name + " (before 0014)", total["before"], "bytes", "postgresql", notes=notes),
        Result(name, total["after"], "bytes", "postgresql", notes=notes),
    ]
