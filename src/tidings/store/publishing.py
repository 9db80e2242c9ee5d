"""Publishing (E1–E3): store the event and fan it out to matching channels in one transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from sqlalchemy import RowMapping, insert, select
from sqlalchemy.engine import Connection

from tidings.core import filters
from tidings.core.model import Channel, Delivery, Event, EventInput, PublishResult
from tidings.core.states import SkipReason, State
from tidings.store import rows
from tidings.store.clock import TxClock
from tidings.store.dialect import insert_ignoring_conflict
from tidings.store.schema import channels, deliveries, events


def publish_events(conn: Connection, clock: TxClock, inputs: Sequence[EventInput]) -> list[PublishResult]:
    all_channels = [rows.channel(r) for r in conn.execute(select(channels)).mappings()]
    return [_publish_one(conn, clock, item, all_channels) for item in inputs]


def _publish_one(
    conn: Connection, clock: TxClock, item: EventInput, all_channels: list[Channel]
) -> PublishResult:
    values = asdict(item) | {"severity": item.severity.value, "created_at": clock.at()}
    if item.idempotency_key is None:
        row = conn.execute(insert(events).values(values).returning(*events.c)).mappings().one()
    else:
        stmt = insert_ignoring_conflict(conn, events, "idempotency_key")
        inserted = conn.execute(stmt.values(values).returning(*events.c)).mappings().first()
        if inserted is None:  # E2: the key names one logical event; answer with the first
            return _existing(conn, item.idempotency_key)
        row = inserted
    event = rows.event(row)
    return PublishResult(event=event, deliveries=_fan_out(conn, event, all_channels), created=True)


def _fan_out(conn: Connection, event: Event, all_channels: list[Channel]) -> list[Delivery]:
    targets = [c for c in all_channels if _matches(c, event)]
    if not targets:
        return []
    values = [_new_delivery(event, c) for c in targets]
    stmt = insert(deliveries).returning(*deliveries.c, sort_by_parameter_order=True)
    return [rows.delivery(r) for r in conn.execute(stmt, values).mappings()]


def _matches(channel: Channel, event: Event) -> bool:
    return filters.matches(
        channel.filter,
        channel.tenant,
        kind=event.kind,
        severity=event.severity,
        labels=event.labels,
        tenant=event.tenant,
    )


def _new_delivery(event: Event, channel: Channel) -> dict[str, object]:
    state = State.PENDING if channel.enabled else State.SKIPPED
    return {
        "event_id": event.id,
        "channel_id": channel.id,
        "state": state.value,
        "attempts": 0,
        "next_attempt_at": event.created_at,
        "skip_reason": None if channel.enabled else SkipReason.CHANNEL_DISABLED.value,
        "created_at": event.created_at,
    }


def _existing(conn: Connection, key: str) -> PublishResult:
    row: RowMapping = (
        conn.execute(select(events).where(events.c.idempotency_key == key)).mappings().one()
    )
    found = conn.execute(
        select(deliveries).where(deliveries.c.event_id == row["id"]).order_by(deliveries.c.id)
    ).mappings()
    return PublishResult(
        event=rows.event(row), deliveries=[rows.delivery(r) for r in found], created=False
    )
