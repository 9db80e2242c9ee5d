"""The claim reads its partial index, in order, on both backends (C1).

The index covers the live states only; a query reaches it only when its own condition names
those states as literals. Bound as parameters, SQLite scanned every row of the channel and
sorted them on each claim, and a generic PostgreSQL plan scanned the table: a backlog made
every claim slower than the last.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import event

import tidings
from tests.store.helpers import channel, claim, driver_connection, publish, statements_sent
from tidings.core.model import DeliveryQuery
from tidings.core.states import State
from tidings.store import history


async def _lease_sql(hub: tidings.Hub) -> tuple[str, Any]:
    """The SQL and parameters of the claim's lease statement, as the store sent them."""
    seen: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, sql: str, params: Any, *_rest: Any) -> None:
        if "prior_state" in sql:
            seen.append((sql, params))

    engine = hub.store.sync_engine
    event.listen(engine, "before_cursor_execute", capture)
    try:
        ch = await channel(hub)
        await publish(hub, 30)
        await claim(hub, ch, limit=10)
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    assert len(seen) == 1
    return seen[0]


def _literal(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "ARRAY[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, datetime):
        return f"'{value.isoformat()}'::timestamptz"
    if isinstance(value, int | float):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


async def test_the_claim_uses_the_claim_index(hub: tidings.Hub) -> None:
    sql, params = await _lease_sql(hub)
    async with hub.store.engine.connect() as conn:
        if hub.store.backend == "sqlite":
            plan = "\n".join(
                str(row[-1])
                for row in await conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, params)
            )
            assert "TEMP B-TREE" not in plan, plan
        else:
            # The plan every execution gets once PostgreSQL settles on a generic one; a scan
            # is priced out so the small test table does not hide the difference.
            await conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_generic_plan")
            await conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
            await conn.exec_driver_sql("PREPARE lease_plan AS " + sql)
            values = ", ".join(_literal(p) for p in params)
            result = await conn.exec_driver_sql(f"EXPLAIN EXECUTE lease_plan({values})")
            plan = "\n".join(str(row[0]) for row in result)
            await conn.rollback()
            # The index gives the claim's order: no sort of every due row before the LIMIT.
            assert "Sort" not in plan, plan
        assert "ix_deliveries_claimable" in plan, plan


async def _statements(
    hub: tidings.Hub, wanted: Callable[[str], bool], action: Any
) -> list[tuple[str, Any]]:
    """The SQL and parameters of each statement `action` sent that `wanted` keeps."""
    with statements_sent(hub) as seen:
        await action()
    return [(sql, params) for sql, params in seen if wanted(sql)]


async def _captured(hub: tidings.Hub, marker: str, action: Any) -> tuple[str, Any]:
    """The SQL and parameters of the one statement containing `marker` that `action` sent."""
    seen = await _statements(hub, lambda sql: marker in sql, action)
    assert len(seen) == 1, seen
    return seen[0]


async def _plan(hub: tidings.Hub, sql: str, params: Any, *, seqscan: bool = False) -> str:
    """The plan the statement gets: SQLite's query plan, or PostgreSQL's generic plan (with
    table scans priced out unless `seqscan`, so a small test table does not hide an index)."""
    async with hub.store.engine.connect() as conn:
        if hub.store.backend == "sqlite":
            rows = await conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, params)
            return "\n".join(str(row[-1]) for row in rows)
        await conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_generic_plan")
        if not seqscan:
            await conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
        await conn.exec_driver_sql("PREPARE plan_of AS " + sql)
        values = ", ".join(_literal(p) for p in params or ())
        result = await conn.exec_driver_sql(
            f"EXPLAIN EXECUTE plan_of({values})" if values else "EXPLAIN EXECUTE plan_of"
        )
        plan = "\n".join(str(row[0]) for row in result)
        await conn.rollback()
        await conn.exec_driver_sql("DEALLOCATE plan_of")  # prepared for the session
        return plan


async def test_a_digest_claim_reads_live_rows_in_id_order(hub: tidings.Hub) -> None:
    ch = await channel(hub, mode="digest", digest_period_s=60)
    await publish(hub, 30)
    sql, params = await _captured(
        hub, "prior_state", lambda: hub.store.claim_digest(ch.id, 60, "w", limit=10)
    )
    plan = await _plan(hub, sql, params)
    # D2's order (oldest id first) from the index of live rows: neither a sort of every due
    # row nor a walk along the primary key past every row already sent.
    assert "ix_deliveries_live_by_id" in plan, plan
    if hub.store.backend == "sqlite":
        assert "TEMP B-TREE" not in plan, plan
    else:
        assert "Sort" not in plan, plan
        # The rows taken are updated through the primary key, not by joining a table scan.
        assert "Index Cond: (id = ANY" in plan, plan


async def test_an_express_claim_updates_its_rows_by_primary_key(pg_url: str) -> None:
    # One channel holds most of the table (a backlog) when the statistics are taken, so a
    # generic plan expects an express claim of any channel to take a tenth of it: joined
    # to a scan of every delivery, a quiet channel's claim of one row took ~30 ms.
    # Express claims are PostgreSQL's (SQLite has one writer and the full claim).
    async with tidings.Hub(pg_url) as hub:
        await _skewed_express_plan(hub)


async def _skewed_express_plan(hub: tidings.Hub) -> None:
    await channel(hub, "backlog", rate_per_min=0, tenant="busy")
    await publish(hub, 3000, tenant="busy")
    async with hub.store.engine.begin() as conn:
        await conn.exec_driver_sql("ANALYZE deliveries")
    quiet = await channel(hub, "quiet", rate_per_min=0, tenant="quiet")
    calm = await channel(hub, "calm", rate_per_min=0, tenant="quiet")
    await publish(hub, 4, tenant="quiet")
    # One ask's own statement (an idle dispatcher's), and the statement of many.
    alone = await _captured(hub, "lease_token", lambda: hub.store.claim_express(quiet, 1, 60, "w"))
    many = await _captured(
        hub,
        "lease_token",
        lambda: asyncio.gather(*(hub.store.claim_express(ch, 1, 60, "w") for ch in (quiet, calm))),
    )
    assert "asked" not in alone[0]
    assert "asked" in many[0]
    for sql, params in (alone, many):
        plan = await _plan(hub, sql, params)
        # One lookup per row taken: neither a walk of the whole primary key nor, for each
        # row, a probe of every id taken (`id = ANY(…)` beside the join made the claim
        # quadratic).
        lines = plan.splitlines()
        by_key = [n for n, line in enumerate(lines) if "using pk_deliveries on deliveries" in line]
        assert by_key, plan
        for n in by_key:
            condition = lines[n + 1]
            assert "Index Cond: (id = " in condition, plan
            assert "ANY" not in condition, plan


#: A backlog written in bulk: `rows` events, each with its due delivery to `channel`.
_BACKLOG = """
WITH new AS (
    INSERT INTO events (kind, subject, severity, title, body, labels, data, created_at)
    SELECT 'backlog', 's' || n, 'info', 't', '', '{{}}', '{{}}', now()
    FROM generate_series(1, {rows}) AS n RETURNING id
)
INSERT INTO deliveries (event_id, channel_id, state, attempts, next_attempt_at, created_at,
    message_id, lost_leases)
SELECT id, {channel}, 'pending', 0, now(), now(), md5(id::text), 0 FROM new"""


async def test_a_claim_keeps_one_plan(pg_url: str) -> None:
    # The server plans a prepared statement for each execution at first, then keeps one
    # plan unless that plan looks costlier than theirs. A claim's size given as a value let
    # each execution's plan see it where the kept plan could not: beside a backlog the kept
    # one looked costlier, and every claim was planned again (~0.4 ms of each).
    async with tidings.Hub(pg_url) as hub:
        backlog = await channel(hub, "backlog", rate_per_min=0)
        async with hub.store.engine.begin() as conn:
            await conn.exec_driver_sql(_BACKLOG.format(rows=50_000, channel=backlog.id))
            await conn.exec_driver_sql("ANALYZE deliveries")
        for _ in range(8):
            assert await hub.store.claim_express(backlog, 1, 60, "w") is not None
        claims = driver_connection(hub.store._direct_express_small)
        plans = await claims.fetch(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE 'WITH ch AS%'"
        )
        assert len(plans) == 1, plans
        assert plans[0]["generic_plans"] >= 3, plans  # the first five executions are planned


async def test_looking_for_due_channels_reads_the_claim_index(hub: tidings.Hub) -> None:
    # Statistics taken while every row was live, then most rows sent: asked as EXISTS,
    # PostgreSQL scanned the table from its start, past every row already sent.
    ch = await channel(hub)
    await publish(hub, 300)
    async with hub.store.engine.begin() as conn:
        if hub.store.backend == "postgresql":
            await conn.exec_driver_sql("ANALYZE deliveries")
        await conn.exec_driver_sql("UPDATE deliveries SET state = 'sent' WHERE id <= 295")
    for ask in (hub.store.due_channels, hub.store.next_due_at):
        sql, params = await _captured(hub, "FROM deliveries", ask)
        plan = await _plan(hub, sql, params, seqscan=True)
        assert "ix_deliveries_claimable" in plan, plan
        assert "Seq Scan on deliveries" not in plan, plan
    assert [c.id for c in await hub.store.due_channels()] == [ch.id]


async def _plans(hub: tidings.Hub, action: Any) -> list[tuple[str, str]]:
    """Each SELECT `action` sent (reads of deliveries, events or attempts), with its plan."""

    def wanted(sql: str) -> bool:
        reads = ("FROM deliveries", "FROM attempts")
        return sql.lstrip().upper().startswith("SELECT") and any(r in sql for r in reads)

    seen = await _statements(hub, wanted, action)
    assert seen
    return [(sql, await _plan(hub, sql, params)) for sql, params in seen]


def _no_table_scan(hub: tidings.Hub, sql: str, plan: str) -> None:
    """Neither a scan of every row nor a sort of every match: a keyset page must stop after
    the rows it returns, and a count after the rows it counts."""
    if hub.store.backend == "sqlite":
        # A bare `SCAN deliveries` is the walk along the primary key (rowid order), which a
        # page's LIMIT stops; the other tables are only ever searched, never scanned.
        assert "SCAN events" not in plan, (sql, plan)
        assert "SCAN attempts" not in plan, (sql, plan)
        assert "TEMP B-TREE FOR ORDER BY" not in plan or "LIMIT" not in sql, (sql, plan)
    else:
        assert "Seq Scan on deliveries" not in plan, (sql, plan)
        assert "Seq Scan on events" not in plan, (sql, plan)
        assert "Seq Scan on attempts" not in plan, (sql, plan)


async def _history_rows(hub: tidings.Hub) -> None:
    await channel(hub)
    await publish(hub, 40, tenant="acme")
    async with hub.store.engine.begin() as conn:
        await conn.exec_driver_sql("UPDATE deliveries SET state = 'sent' WHERE id % 2 = 0")
        await conn.exec_driver_sql("UPDATE deliveries SET state = 'failed' WHERE id % 7 = 0")
        if hub.store.backend == "postgresql":
            await conn.exec_driver_sql("ANALYZE deliveries")


# Each history filter with the index that gives its rows in id order (None: the primary key).
HISTORY_PATHS: list[tuple[str, dict[str, Any], list[str]]] = [
    ("none", {}, []),
    ("channel", {"channel_id": 1}, ["ix_deliveries_live_by_id", "ix_deliveries_ended_by_channel"]),
    ("failed", {"state": State.FAILED}, ["ix_deliveries_ended_by_state"]),
    ("skipped", {"state": State.SKIPPED}, ["ix_deliveries_ended_by_state"]),
    # Live rows of every channel: the index of live rows, sorted (they are the newest few).
    ("pending", {"state": State.PENDING}, ["ix_deliveries_live_by_id|ix_deliveries_claimable"]),
    ("sent", {"state": State.SENT}, []),
    ("kind", {"event_kind": "finding.created"}, []),
    ("tenant", {"tenant": "acme"}, []),
    ("since", {"since": datetime(2020, 1, 1, tzinfo=UTC)}, []),
    ("until", {"until": datetime(2999, 1, 1, tzinfo=UTC)}, []),
]


@pytest.mark.parametrize(
    ("name", "fields", "indexes"), HISTORY_PATHS, ids=[p[0] for p in HISTORY_PATHS]
)
async def test_m2_every_history_filter_reads_an_index(
    hub: tidings.Hub,
    name: str,
    fields: dict[str, Any],
    indexes: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # On SQLite a kind or tenant this common (40 events) is paged along the primary key.
    monkeypatch.setattr(history, "_SQLITE_COMMON_EVENTS", 10)
    await _history_rows(hub)
    hub.store.exact_total_up_to = 5  # the estimate's statement too
    query = DeliveryQuery(**fields)
    first = await hub.deliveries(query, page_size=3)
    plans = await _plans(hub, lambda: hub.deliveries(query, page_size=3, cursor=first.next_cursor))
    for sql, plan in plans:
        if name == "pending":
            plan = plan.replace("TEMP B-TREE FOR ORDER BY", "")
        _no_table_scan(hub, sql, plan)
    joined = "\n".join(plan for _, plan in plans)
    for index in indexes:
        assert any(one in joined for one in index.split("|")), (name, joined)


async def test_m2_a_rare_kind_on_sqlite_reads_its_events_by_index(hub: tidings.Hub) -> None:
    await _history_rows(hub)
    query = DeliveryQuery(event_kind="finding.created")  # 40 events: rare enough
    plans = await _plans(hub, lambda: hub.deliveries(query, page_size=3))
    joined = "\n".join(plan for _, plan in plans)
    if hub.store.backend == "sqlite":
        assert "ix_events_kind" in joined, joined
        assert "SCAN deliveries" not in joined, joined


async def test_the_dashboard_and_a_delivery_s_detail_read_indexes(hub: tidings.Hub) -> None:
    await _history_rows(hub)
    hub.store.exact_total_up_to = 5
    store = hub.store
    plans = [
        *await _plans(hub, store.state_counts),
        *await _plans(hub, lambda: store.hourly_attempts(24)),
        *await _plans(hub, store.oldest_pending),
        *await _plans(hub, lambda: store.get_delivery(3)),
    ]
    # What a bulk resend from the history would take (the UI's preview).
    preview = await _plans(hub, lambda: store.failed_ids(DeliveryQuery(), 100))
    for sql, plan in preview:
        _no_table_scan(hub, sql, plan)
        assert "ix_deliveries_ended_by_state" in plan, plan
    for sql, plan in plans:
        _no_table_scan(hub, sql, plan)
    joined = "\n".join(plan for _, plan in plans)
    for index in ("ix_attempts_finished_at", "ix_deliveries_fallback_of"):
        assert index in joined, joined


async def test_looking_for_due_channels_visits_only_channels_with_live_rows(
    hub: tidings.Hub,
) -> None:
    # Ten thousand idle channels must not make each look ten thousand probes: the look
    # skips through the claim index from one channel with live rows to the next, and reads
    # each such channel by its key, never a scan of (or a join against) every channel.
    for name in ("idle-1", "idle-2", "idle-3"):
        await channel(hub, name, tenant="other")
    busy = await channel(hub, "busy", tenant="t")
    await publish(hub, 5, tenant="t")
    for ask in (hub.store.due_channels, hub.store.next_due_at):
        sql, params = await _captured(hub, "FROM deliveries", ask)
        plan = await _plan(hub, sql, params)
        if hub.store.backend == "sqlite":
            assert "SCAN channels" not in plan, plan
        else:
            assert "Seq Scan on channels" not in plan, plan
            assert "Join" not in plan, plan
        assert "ix_deliveries_claimable" in plan, plan
    assert [c.id for c in await hub.store.due_channels()] == [busy.id]
