"""What follows a delivery ending `failed`, in the same transaction: its escalation to the
channel's fallback (F1) and the `tidings.delivery.failed` operational event (H2)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from tidings.core.model import Channel, EventInput
from tidings.core.states import TRANSITIONS, SkipReason
from tidings.store import operational, publishing, rows
from tidings.store.clock import TxClock
from tidings.store.dialects import dialect_for
from tidings.store.publishing import new_message_ids
from tidings.store.schema import channels, deliveries, events


@dataclass(frozen=True, slots=True)
class Failed:
    delivery_id: int
    event_id: int
    channel_id: int
    failure: str
    error: str


def after_failed(conn: Connection, clock: TxClock, failed: Sequence[Failed]) -> None:
    if not failed:
        return
    by_id = {c.id: c for c in map(rows.channel, conn.execute(select(channels)).mappings())}
    _escalate(conn, clock, failed, by_id)
    _announce(conn, clock, failed, by_id)


def _escalate(
    conn: Connection, clock: TxClock, failed: Sequence[Failed], by_id: dict[int, Channel]
) -> None:
    """One delivery of the same event to the failing channel's fallback (once: a delivery
    per event and channel is unique); the chain of channels is checked when saved."""
    values: list[dict[str, Any]] = []
    pending: set[int] = set()
    for row in failed:
        channel = by_id.get(row.channel_id)
        target = by_id.get(channel.fallback_channel_id or 0) if channel else None
        if target is None:
            continue
        state, skip = (
            (TRANSITIONS["publish"].target, None)
            if target.enabled
            else (TRANSITIONS["publish_skipped"].target, SkipReason.CHANNEL_DISABLED.value)
        )
        if target.enabled:
            pending.add(target.id)
        values.append(
            {
                "event_id": row.event_id,
                "channel_id": target.id,
                "state": state.value,
                "attempts": 0,
                "next_attempt_at": clock.now(),
                "skip_reason": skip,
                "created_at": clock.now(),
                "fallback_of": row.delivery_id,
            }
        )
    if not values:
        return
    for value, message_id in zip(values, new_message_ids(len(values)), strict=True):
        value["message_id"] = message_id  # N1: every delivery row gets its own
    dialect = dialect_for(conn)
    insert = dialect.insert_ignoring_conflict(deliveries, "event_id", "channel_id")
    conn.execute(insert, values)
    if pending:
        dialect.announce(conn, pending)


def _announce(
    conn: Connection, clock: TxClock, failed: Sequence[Failed], by_id: dict[int, Channel]
) -> None:
    """`tidings.delivery.failed` for each, except failures of operational events (no loops),
    to every matching channel but the failing one."""
    found = conn.execute(
        select(events.c.id, events.c.kind, events.c.subject).where(
            events.c.id.in_({row.event_id for row in failed})
        )
    ).all()
    about = {event_id: (kind, subject) for event_id, kind, subject in found}
    by_channel: dict[int, list[EventInput]] = defaultdict(list)
    for row in failed:
        kind, subject = about.get(row.event_id, ("", ""))
        channel = by_id.get(row.channel_id)
        if channel is None or not kind or operational.is_operational(kind):
            continue
        by_channel[channel.id].append(
            operational.delivery_failed(
                row.delivery_id, kind, subject, channel, row.failure, row.error
            )
        )
    for channel_id, items in by_channel.items():
        among = [
            c.id
            for c in by_id.values()
            if c.id != channel_id and any(operational.matches(c, item) for item in items)
        ]
        if among:
            publishing.publish_events(conn, clock, items, among=among)
