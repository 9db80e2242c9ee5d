"""`python -m tidings.demo`: a short tour through the library on ./tidings.db.

Migrates the database, adds an `inbox` channel, publishes an event, claims its delivery as a
dispatcher would, records the outcome and prints the delivery with its attempts.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from datetime import UTC, datetime

from tidings.core.errors import NotFound, TidingsError
from tidings.core.model import AttemptRecord
from tidings.core.states import AttemptStatus
from tidings.hub import Hub

DEFAULT_DB = "sqlite:///./tidings.db"


async def tour(url: str) -> None:
    async with Hub(url) as hub:
        await hub.migrate()
        print(f"database   {url} (migrated)")
        try:
            inbox = await hub.channels.get_by_name("demo-inbox")
        except NotFound:
            inbox = await hub.channels.create(name="demo-inbox", kind="inbox")
        print(f"channel    #{inbox.id} {inbox.name} ({inbox.kind}, {inbox.mode.value})")

        published = await hub.publish(
            kind="monitor.down",
            subject="monitor:web-1",
            severity="high",
            title="web-1 is not answering",
            body="3 checks in a row timed out",
            labels={"env": "prod"},
            idempotency_key=f"demo-{uuid.uuid4().hex}",
        )
        print(f"published  event #{published.event.id}: {len(published.deliveries)} delivery(ies)")

        claim = await hub.store.claim_realtime(inbox.id, 10, lease_s=120, owner="demo")
        if claim is None:
            print("nothing to claim")
            return
        print(f"claimed    {len(claim)} row(s), lease token {claim.token[:8]}…")
        now = datetime.now(UTC)
        records = [
            AttemptRecord(
                delivery_id=i,
                worker_id="demo",
                status=AttemptStatus.DELIVERED,
                started_at=now,
                finished_at=datetime.now(UTC),
            )
            for i in claim.ids
        ]
        await hub.store.mark_sent(claim.token, claim.ids, records)

        for delivery_id in claim.ids:
            detail = await hub.delivery(delivery_id)
            row = detail.view.delivery
            print(
                f"delivery   #{row.id} {detail.view.event_kind} {detail.view.subject!r} → "
                f"{detail.view.channel_name}: {row.state.value} after {row.attempts} attempt(s)"
            )
            for attempt in detail.attempts_log:
                print(f"  attempt  {attempt.status.value} by {attempt.worker_id}")
        total = (await hub.deliveries()).total
        print(f"history    {total} delivery(ies) stored in all")


def main() -> int:
    url = os.environ.get("TIDINGS_DB", DEFAULT_DB)
    try:
        asyncio.run(tour(url))
    except TidingsError as error:
        print(f"tidings: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
