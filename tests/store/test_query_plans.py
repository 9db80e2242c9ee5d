"""The claim reads its partial index, in order, on both backends (C1).

The index covers the live states only; a query reaches it only when its own condition names
those states as literals. Bound as parameters, SQLite scanned every row of the channel and
sorted them on each claim, and a generic PostgreSQL plan scanned the table: a backlog made
every claim slower than the last.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import event

import tidings
from tests.store.helpers import channel, claim, publish


async def _lease_sql(hub: tidings.Hub) -> tuple[str, Any]:
    """The SQL and parameters of the claim's lease statement, as the store sent them."""
    seen: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, sql: str, params: Any, *_rest: Any) -> None:
        if "picked" in sql:
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
