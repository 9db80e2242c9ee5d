"""Bulk-built history for the history scenario: deliveries, their events and attempts made by
set-returning SQL (generate_series on PostgreSQL, a recursive CTE on SQLite), with the
secondary indexes built once after the rows rather than updated row by row.

The shape: two deliveries per event over 90 days, ending when the data is built; channels 1
to 10 take a tenth of all rows each, 90 more share the rest; ten event kinds, one rare kind
(one event in 10,000) and ten tenants; 96% sent, 2% failed, 1% skipped, the newest 2,000
events still pending; a sent or failed delivery has two attempts (a retry, then its outcome).
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

SPAN_DAYS = 90
CHANNELS = 100
PENDING_EVENTS = 2000
RARE_EVERY = 10_000
TABLES = ("events", "deliveries", "attempts")

# One SQL text per table for both backends: `{series}` is the numbers 1..events, `{at}` an
# event's creation time from its number, `{plus(x, s)}` a time s seconds after x.
_STATE = (
    "CASE WHEN i > {events} - {pending} THEN 'pending' WHEN (i * 7 + j) % 100 < 2 THEN 'failed'"
    " WHEN (i * 7 + j) % 100 = 2 THEN 'skipped' ELSE 'sent' END"
)


def _pg_statements(events: int, start: datetime, step_s: float) -> list[str]:
    at = f"(TIMESTAMPTZ '{start.isoformat()}' + i * INTERVAL '{step_s} seconds')"
    state = _STATE.format(events=events, pending=PENDING_EVENTS)
    return [
        "INSERT INTO events (id, kind, subject, severity, title, body, labels, data, tenant,"
        " created_at) SELECT i, CASE WHEN i % " + str(RARE_EVERY) + " = 0 THEN 'rare.alert'"
        " ELSE 'kind.' || (i % 10) END, 'host-' || (i % 97), 'high', 'event ' || i,"
        " 'A benchmark event with a short body.', '{}', '{}', 'tenant-' || (i % 10), "
        + at
        + f" FROM generate_series(1, {events}) AS i",
        "INSERT INTO deliveries (id, event_id, channel_id, state, attempts, next_attempt_at,"
        " failure, skip_reason, created_at, sent_at, lost_leases, message_id)"
        " SELECT 2 * i - 1 + j, i, CASE WHEN j = 0 THEN 1 + i % 10 ELSE 11 + i % 90 END, s,"
        " CASE WHEN s IN ('sent', 'failed') THEN 2 ELSE 0 END, " + at + ","
        " CASE WHEN s = 'failed' THEN 'permanent' END,"
        " CASE WHEN s = 'skipped' THEN 'channel_disabled' END, " + at + ","
        " CASE WHEN s = 'sent' THEN " + at + " + INTERVAL '31 seconds' END, 0,"
        " 'msg_' || md5((2 * i - 1 + j)::text)"
        f" FROM generate_series(1, {events}) AS i, generate_series(0, 1) AS j,"
        f" LATERAL (SELECT {state} AS s) AS st",
        "INSERT INTO attempts (delivery_id, worker_id, status, error, duration_ms, started_at,"
        " finished_at) SELECT d.id, 'bench', CASE WHEN k = 0 THEN 'retryable'"
        " WHEN d.state = 'sent' THEN 'delivered' ELSE 'permanent' END,"
        " CASE WHEN k = 0 THEN 'HTTP 503' WHEN d.state = 'failed' THEN 'HTTP 410' END, 200,"
        " d.created_at + k * INTERVAL '30 seconds' + INTERVAL '1 second',"
        " d.created_at + k * INTERVAL '30 seconds' + INTERVAL '1.2 seconds'"
        # Written in delivery order, so finish times follow the table's physical order
        # (the attempt pair comes from d itself, so the planner cannot put it outside).
        " FROM deliveries AS d, LATERAL (SELECT n - 2 * d.id AS k"
        " FROM generate_series(2 * d.id, 2 * d.id + 1) AS n) AS pair"
        " WHERE d.state IN ('sent', 'failed')",
    ]


def build_pg(conn: psycopg.Connection[Any], deliveries: int) -> datetime:
    """Fill the migrated, empty database behind `conn` (autocommit) with about `deliveries`
    rows; the instant the data ends (its `now`)."""
    events = deliveries // 2
    end = datetime.now(UTC).replace(microsecond=0)
    step_s = SPAN_DAYS * 86400 / events
    start = end.timestamp() - SPAN_DAYS * 86400
    indexes = _pg_secondary_indexes(conn)
    for name, _ in indexes:
        conn.execute(f'DROP INDEX "{name}"')
    conn.execute("SET session_replication_role = replica")  # no FK trigger per row
    conn.execute("SET maintenance_work_mem = '512MB'")
    conn.execute("SET synchronous_commit = off")
    for statement in _pg_statements(events, datetime.fromtimestamp(start, UTC), step_s):
        conn.execute(statement)
    for table in TABLES:
        conn.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))"
        )
    for _, definition in indexes:
        conn.execute(definition)
    conn.execute("SET session_replication_role = origin")
    conn.execute("VACUUM ANALYZE events, deliveries, attempts")
    return end


def _pg_secondary_indexes(conn: psycopg.Connection[Any]) -> list[tuple[str, str]]:
    """Indexes that back no constraint, with their definitions, on the three big tables."""
    rows = conn.execute(
        "SELECT i.indexname, i.indexdef FROM pg_indexes i WHERE i.tablename = ANY(%s)"
        " AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)",
        (list(TABLES),),
    ).fetchall()
    return [(str(name), str(definition)) for name, definition in rows]


def _sqlite_time(expr: str) -> str:
    """SQLite text in UTCDateTime's format for `expr` seconds since the epoch."""
    return f"strftime('%Y-%m-%d %H:%M:%S', {expr}, 'unixepoch') || '.000000'"


def build_sqlite(path: Path, deliveries: int) -> datetime:
    """The same shape in the migrated, empty SQLite file at `path`; the instant it ends."""
    events = deliveries // 2
    end = datetime.now(UTC).replace(microsecond=0)
    step_s = SPAN_DAYS * 86400 / events
    start = int(end.timestamp()) - SPAN_DAYS * 86400
    at = _sqlite_time(f"{start} + CAST(i * {step_s} AS INTEGER)")
    state = _STATE.format(events=events, pending=PENDING_EVENTS)
    series = f"WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {events})"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=OFF")
        indexes = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
            f" AND tbl_name IN {TABLES}"
        ).fetchall()
        conn.execute("BEGIN")
        for name, _ in indexes:
            conn.execute(f'DROP INDEX "{name}"')
        conn.execute(
            f"{series} INSERT INTO events (id, kind, subject, severity, title, body, labels,"
            f" data, tenant, created_at) SELECT i, CASE WHEN i % {RARE_EVERY} = 0 THEN"
            " 'rare.alert' ELSE 'kind.' || (i % 10) END, 'host-' || (i % 97), 'high',"
            " 'event ' || i, 'A benchmark event with a short body.', '{}', '{}',"
            f" 'tenant-' || (i % 10), {at} FROM s"
        )
        conn.execute(
            f"{series}, j(j) AS (VALUES (0), (1)) INSERT INTO deliveries (id, event_id,"
            " channel_id, state, attempts, next_attempt_at, failure, skip_reason, created_at,"
            " sent_at, lost_leases, message_id) SELECT 2 * i - 1 + j, i, CASE WHEN j = 0 THEN"
            " 1 + i % 10 ELSE 11 + i % 90 END, st, CASE WHEN st IN ('sent', 'failed') THEN 2"
            f" ELSE 0 END, {at}, CASE WHEN st = 'failed' THEN 'permanent' END, CASE WHEN"
            f" st = 'skipped' THEN 'channel_disabled' END, {at}, CASE WHEN st = 'sent' THEN"
            f" {at} END, 0, 'msg_' || hex(randomblob(16))"
            f" FROM (SELECT i, j, {state} AS st FROM s, j)"
        )
        conn.execute(
            "INSERT INTO attempts (delivery_id, worker_id, status, error, duration_ms,"
            # A worker per attempt: the two share their start, and one worker starts one
            # send of a delivery at a time (`ix_attempts_once`).
            " started_at, finished_at) SELECT d.id, 'bench' || k, CASE WHEN k = 0 THEN 'retryable'"
            " WHEN d.state = 'sent' THEN 'delivered' ELSE 'permanent' END, CASE WHEN k = 0"
            " THEN 'HTTP 503' WHEN d.state = 'failed' THEN 'HTTP 410' END, 200, d.created_at,"
            " d.created_at FROM deliveries AS d, (SELECT 0 AS k UNION ALL SELECT 1)"
            " WHERE d.state IN ('sent', 'failed') ORDER BY d.id, k"
        )
        for _, definition in indexes:
            conn.execute(definition)
        conn.execute("COMMIT")
    finally:
        conn.close()
    return end
