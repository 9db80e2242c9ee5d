"""Publishing (E1–E3): store the event and fan it out to matching channels in one transaction."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict

from sqlalchemy import RowMapping, insert, select
from sqlalchemy.engine import Connection

from tidings.core import filters
from tidings.core.model import Channel, Delivery, Event, EventInput, PublishResult
from tidings.core.states import SkipReason, State
from tidings.store import rows
from tidings.store.clock import TxClock
from tidings.store.dialect import insert_ignoring_conflict
from tidings.store.notify import announce
from tidings.store.schema import channels, deliveries, events


def publish_events(
    conn: Connection, clock: TxClock, inputs: Sequence[EventInput]
) -> list[PublishResult]:
    """Store the events and their deliveries; a key already stored answers with its event.

    Events go in as one multi-row insert per kind (with and without a key), so a batch of a
    thousand costs a handful of statements rather than two thousand.
    """
    all_channels = [rows.channel(r) for r in conn.execute(select(channels)).mappings()]
    stamp = {"created_at": clock.at()}
    unkeyed = [i for i, item in enumerate(inputs) if item.idempotency_key is None]
    found: dict[int, Event] = {}
    if unkeyed:
        stmt = insert(events).values(stamp).returning(*events.c, sort_by_parameter_order=True)
        created = conn.execute(stmt, [_values(inputs[i]) for i in unkeyed]).mappings()
        found.update(zip(unkeyed, map(rows.event, created), strict=True))
    keyed = _insert_keyed(conn, inputs, stamp)
    new_events = list(found.values()) + [event for event, _ in keyed.values() if event]
    fanned = _fan_out(conn, new_events, all_channels)
    if fanned:
        announce(conn)
    results: list[PublishResult] = []
    for i, item in enumerate(inputs):
        if i in found:
            results.append(PublishResult(found[i], fanned.get(found[i].id, []), created=True))
            continue
        key = item.idempotency_key or ""
        event, first_index = keyed[key]
        if event is not None and first_index == i:
            results.append(PublishResult(event, fanned.get(event.id, []), created=True))
        else:  # E2: the key names one logical event; answer with the first
            results.append(_existing(conn, key))
    return results


def _insert_keyed(
    conn: Connection, inputs: Sequence[EventInput], stamp: Mapping[str, object]
) -> dict[str, tuple[Event | None, int]]:
    """Insert keyed events, ignoring keys already stored; key -> (new event or None, index)."""
    first: dict[str, int] = {}
    for i, item in enumerate(inputs):
        if item.idempotency_key is not None:
            first.setdefault(item.idempotency_key, i)
    if not first:
        return {}
    stmt = insert_ignoring_conflict(conn, events, "idempotency_key").values(stamp)
    inserted = conn.execute(
        stmt.returning(*events.c), [_values(inputs[i]) for i in first.values()]
    ).mappings()
    new = {row["idempotency_key"]: rows.event(row) for row in inserted}
    return {key: (new.get(key), index) for key, index in first.items()}


def _values(item: EventInput) -> dict[str, object]:
    return asdict(item) | {"severity": item.severity.value}


def _fan_out(
    conn: Connection, new_events: list[Event], all_channels: list[Channel]
) -> dict[int, list[Delivery]]:
    values = [_new_delivery(e, c) for e in new_events for c in all_channels if _matches(c, e)]
    by_event: dict[int, list[Delivery]] = {}
    if not values:
        return by_event
    stmt = insert(deliveries).returning(*deliveries.c, sort_by_parameter_order=True)
    for row in conn.execute(stmt, values).mappings():
        delivery = rows.delivery(row)
        by_event.setdefault(delivery.event_id, []).append(delivery)
    return by_event


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
