"""Realistic rows for the UI tests, made through the store's own transitions (no faked rows)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import tidings
from tidings.core.model import AttemptRecord, Channel
from tidings.core.states import AttemptStatus, Failure
from tidings.store import Store


async def webhook(hub: tidings.Hub, name: str, url: str = "http://127.0.0.1:9/hook") -> Channel:
    return await hub.channels.create(name=name, kind="webhook", config={"url": url}, max_attempts=1)


async def publish(hub: tidings.Hub, title: str, kind: str = "monitor.down", n: int = 1) -> None:
    for i in range(n):
        await hub.publish(kind=kind, subject=f"monitor:{i}", severity="high", title=title)


async def settle(hub: tidings.Hub, channel: Channel, *, fail: bool, error: str = "HTTP 500") -> int:
    """Claim the channel's due rows and end them sent or failed, with an attempt row each."""
    claim = await hub.store.claim_realtime(channel.id, 1000, 60.0, "test-worker")
    if claim is None:
        return 0
    start = datetime.now(UTC)
    status = AttemptStatus.PERMANENT if fail else AttemptStatus.DELIVERED
    records = [
        AttemptRecord(
            delivery_id=i,
            worker_id="test-worker",
            status=status,
            started_at=start,
            finished_at=start + timedelta(milliseconds=37),
            error=error if fail else None,
            provider_response="upstream exploded" if fail else "ok",
        )
        for i in claim.ids
    ]
    if fail:
        return await fail_permanently(hub.store, claim.token, claim.ids, error, records)
    return await hub.store.mark_sent(claim.token, claim.ids, records)


async def fail_permanently(
    store: Store, token: str, ids: Sequence[int], error: str, records: Sequence[AttemptRecord] = ()
) -> int:
    """`Store.fail` with failure=permanent. A store whose `fail` takes no failure kind (the
    permanent one; `exhaust` is its own transition) is called without it."""
    if "failure" in inspect.signature(store.fail).parameters:
        return await store.fail(token, ids, Failure.PERMANENT, error, records)
    return await store.fail(token, ids, error, records)
