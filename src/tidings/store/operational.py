"""Operational events (H2): tidings tells about its own channels and failed deliveries through
its own pipeline, so operators route them like any event.

Only channels that ask for them get them: a channel whose filter names a `tidings.` pattern
in `kinds` (e.g. `{"kinds": ["tidings.*"]}`); a channel without a filter gets what producers
publish, not tidings' own news. No loops: an event is never sent to the channel it is about,
a failed delivery of an operational event announces nothing, and nothing is stored when no
channel takes it.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.engine import Connection

from tidings.core import filters
from tidings.core.breaker import Health
from tidings.core.model import Channel, EventInput, Severity
from tidings.store import publishing, rows
from tidings.store.clock import TxClock
from tidings.store.schema import channels

PREFIX = "tidings."
BREAKER_OPENED = "tidings.channel.breaker_opened"
RECOVERED = "tidings.channel.recovered"
DISABLED = "tidings.channel.disabled"
DELIVERY_FAILED = "tidings.delivery.failed"
_SEVERITY = {
    BREAKER_OPENED: Severity.HIGH,
    RECOVERED: Severity.INFO,
    DISABLED: Severity.CRITICAL,
    DELIVERY_FAILED: Severity.HIGH,
}


def is_operational(kind: str) -> bool:
    return kind.startswith(PREFIX)


def channel_event(kind: str, title: str, channel: Channel, health: Health) -> EventInput:
    return EventInput(
        kind=kind,
        subject=f"channel:{channel.name}",
        severity=_SEVERITY[kind],
        title=title,
        body=health.last_error or "",
        labels={"channel": channel.name, "channel_kind": channel.kind},
        data={
            "channel_id": channel.id,
            "channel": channel.name,
            "breaker": health.state.value,
            "consecutive_failures": health.consecutive_failures,
            "failing_since": None
            if health.failing_since is None
            else health.failing_since.isoformat(),
            "probe_at": None if health.until is None else health.until.isoformat(),
            "last_error": health.last_error,
        },
        tenant=channel.tenant,
    )


def delivery_failed(
    delivery_id: int, event_kind: str, subject: str, channel: Channel, failure: str, error: str
) -> EventInput:
    return EventInput(
        kind=DELIVERY_FAILED,
        subject=f"delivery:{delivery_id}",
        severity=_SEVERITY[DELIVERY_FAILED],
        title=f"{channel.name}: {event_kind} ({subject}) failed, {failure}",
        body=error,
        labels={"channel": channel.name, "failure": failure, "event_kind": event_kind},
        data={
            "delivery_id": delivery_id,
            "channel_id": channel.id,
            "channel": channel.name,
            "event_kind": event_kind,
            "subject": subject,
            "failure": failure,
            "error": error,
        },
        tenant=channel.tenant,
    )


def publish(conn: Connection, clock: TxClock, item: EventInput, about_channel_id: int) -> None:
    """Publish `item` in the caller's transaction to every matching channel but the one it is
    about; store nothing when none matches."""
    among = [
        c.id
        for c in map(rows.channel, conn.execute(select(channels)).mappings())
        if c.id != about_channel_id and matches(c, item)
    ]
    if among:
        publishing.publish_events(conn, clock, [item], among=among)


def matches(channel: Channel, item: EventInput) -> bool:
    kinds = channel.filter.get("kinds") or []
    if not any(isinstance(k, str) and k.startswith(PREFIX) for k in kinds):
        return False
    return filters.channel_takes(channel, item)
