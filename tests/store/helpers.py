"""Small builders for store tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import event

import tidings
from tidings.core.model import AttemptRecord, Channel, Claim
from tidings.core.states import AttemptStatus
from tidings.store import direct

WORKER = "test-worker"
LEASE_S = 120.0


def at(seconds: float) -> datetime:
    """A moment `seconds` from now, for the store's explicit-now override."""
    return datetime.now(UTC) + timedelta(seconds=seconds)


async def channel(hub: tidings.Hub, name: str = "ops", **fields: Any) -> Channel:
    fields.setdefault("kind", "inbox")
    return await hub.channels.create(name=name, **fields)


async def publish(hub: tidings.Hub, n: int = 1, **fields: Any) -> list[tidings.PublishResult]:
    fields.setdefault("kind", "finding.created")
    base_subject = fields.pop("subject", "finding")
    return await hub.publish_many([dict(fields, subject=f"{base_subject}:{i}") for i in range(n)])


async def claim(hub: tidings.Hub, ch: Channel, limit: int = 100, **kw: Any) -> Claim:
    kw.setdefault("owner", WORKER)
    kw.setdefault("lease_s", LEASE_S)
    got = await hub.store.claim_realtime(ch.id, limit, **kw)
    assert got is not None, "expected the claim to lease rows"
    return got


def attempt(delivery_id: int, status: AttemptStatus, **kw: Any) -> AttemptRecord:
    start = datetime.now(UTC)
    kw.setdefault("worker_id", WORKER)
    return AttemptRecord(
        delivery_id=delivery_id,
        status=status,
        started_at=start,
        finished_at=start + timedelta(milliseconds=kw.pop("ms", 12)),
        **kw,
    )


async def states(hub: tidings.Hub) -> dict[int, tidings.Delivery]:
    page = await hub.deliveries(page_size=200)
    return {v.delivery.id: v.delivery for v in page.items}


@contextmanager
def statements_sent(hub: tidings.Hub) -> Iterator[list[tuple[str, Any]]]:
    """Every statement the store sends meanwhile, with its parameters: through its engine,
    and on its own driver connections (`tidings.store.direct`), as the driver gets them."""
    seen: list[tuple[str, Any]] = []

    def watch(_conn: Any, _cursor: Any, sql: str, params: Any, *_rest: Any) -> None:
        seen.append((sql, params))

    original = direct.Direct.fetch

    async def fetch(self: direct.Direct, statement: Any, params: Any) -> Any:
        if self.serves():
            prepared = direct.compiled(statement, hub.store.engine.dialect)
            seen.append((prepared.sql, tuple(prepared.arguments(params))))
        return await original(self, statement, params)

    event.listen(hub.store.sync_engine, "before_cursor_execute", watch)
    direct.Direct.fetch = fetch  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        direct.Direct.fetch = original  # type: ignore[method-assign]
        event.remove(hub.store.sync_engine, "before_cursor_execute", watch)


def driver_connection(found: direct.Direct | None) -> Any:
    """The driver connection a store's own `Direct` has open (asyncpg's)."""
    assert found is not None
    assert found._conn is not None
    return found._conn
