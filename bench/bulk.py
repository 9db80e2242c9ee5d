"""Filling a tidings database on PostgreSQL fast, in bulk SQL: copies of one channel made
through the library, and pending deliveries of copies of one published event. Ten thousand
channels created one by one, or a hundred thousand events published through the fan-out,
would take longer than the drains they set up. Imports tidings only, on first use."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg

from bench import workload


def _columns(conn: psycopg.Connection[Any], table: str, leave_out: set[str]) -> str:
    found = conn.execute(
        "SELECT column_name FROM information_schema.columns"
        " WHERE table_name = %s AND table_schema = current_schema() ORDER BY ordinal_position",
        (table,),
    ).fetchall()
    return ", ".join(str(r[0]) for r in found if r[0] not in leave_out)


def copy_channel(conn: psycopg.Connection[Any], name: str, copies: int, prefix: str) -> list[int]:
    """`copies` channels like channel `name`, named `prefix`0, `prefix`1, …; their ids."""
    cols = _columns(conn, "channels", {"id", "name"})
    conn.execute(
        f"INSERT INTO channels (name, {cols}) SELECT %s || g, {cols}"
        " FROM channels, generate_series(0, %s - 1) g WHERE channels.name = %s ORDER BY g",
        (prefix, copies, name),
    )
    rows = conn.execute(
        "SELECT id FROM channels WHERE name LIKE %s ORDER BY id", (prefix + "%",)
    ).fetchall()
    return [int(r[0]) for r in rows]


def pending_rows(conn: psycopg.Connection[Any], channel_ids: list[int], per_channel: int) -> None:
    """`per_channel` pending deliveries on each channel, each of its own copy of the last
    stored event (so a claim reads and renders every event, as with distinct events), rows
    interleaved across channels as events published one after another would be."""
    event_cols = _columns(conn, "events", {"id", "idempotency_key"})
    total = len(channel_ids) * per_channel
    found = conn.execute("SELECT max(id), coalesce(max(id), 0) + 1 FROM events").fetchone()
    if found is None or found[0] is None:
        raise RuntimeError("publish one event first: it is the template of the copies")
    template, first = found
    conn.execute(
        f"INSERT INTO events ({event_cols}) SELECT {event_cols}"
        " FROM events, generate_series(1, %s) g WHERE events.id = %s ORDER BY g",
        (total, template),
    )
    conn.execute(
        "INSERT INTO deliveries (event_id, channel_id, state, attempts, next_attempt_at,"
        " created_at, message_id)"
        " SELECT e.id, (%s::bigint[])[1 + (e.id - %s) %% %s], 'pending', 0, now(), now(),"
        " 'msg_' || md5(random()::text || e.id)"
        " FROM events e WHERE e.id >= %s ORDER BY e.id",
        (channel_ids, first, len(channel_ids), first),
    )
    conn.execute("ANALYZE channels")
    conn.execute("ANALYZE events")
    conn.execute("ANALYZE deliveries")


def setup(url: str, specs: list[dict[str, Any]]) -> None:
    """Migrate, publish one event while there is no channel (the template `pending_rows`
    copies), then create `specs`."""
    asyncio.run(workload.setup(url, []))
    asyncio.run(workload.publish_all(url, [workload.event(0)]))
    asyncio.run(workload.setup(url, specs))
