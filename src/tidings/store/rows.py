"""Database rows → core dataclasses, so nothing outside the store sees SQLAlchemy."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidings.core.model import Attempt, Channel, Delivery, DeliveryView, Event, Severity
from tidings.core.states import AttemptStatus, Failure, Mode, SkipReason, State
from tidings.store.schema import channels, deliveries, events

#: Stored values to their members, looked up without the enum's own call (two Python frames
#: each): a claimed row is turned into a delivery and its event on every send's path.
SEVERITIES: dict[str, Severity] = {member.value: member for member in Severity}
_STATES: dict[str, State] = {member.value: member for member in State}
_FAILURES: dict[str, Failure] = {member.value: member for member in Failure}
_SKIP_REASONS: dict[str, SkipReason] = {member.value: member for member in SkipReason}

# The columns a history row adds to a delivery (M2): one query for a whole list.
VIEW_COLUMNS = [
    *deliveries.c,
    channels.c.name.label("channel_name"),
    channels.c.kind.label("channel_kind"),
    events.c.kind.label("event_kind"),
    events.c.subject.label("event_subject"),
    events.c.title.label("event_title"),
    events.c.tenant.label("event_tenant"),
]


def event(row: Mapping[Any, Any]) -> Event:
    return Event(
        id=row["id"],
        kind=row["kind"],
        subject=row["subject"],
        severity=SEVERITIES[row["severity"]],
        title=row["title"],
        body=row["body"],
        url=row["url"],
        labels=dict(row["labels"]),
        data=dict(row["data"]),
        tenant=row["tenant"],
        idempotency_key=row["idempotency_key"],
        created_at=row["created_at"],
        traceparent=row["traceparent"],
    )


def channel(row: Mapping[Any, Any], secrets: Mapping[str, Any] | None = None) -> Channel:
    """A channel row; its config is the plain values joined with `secrets`, the opened
    `secrets` column (`tidings.store.sealing.channel` opens it)."""
    config = dict(row["config"])
    if secrets:
        config.update(secrets)
    return Channel(
        id=row["id"],
        name=row["name"],
        kind=row["kind"],
        config=config,
        enabled=bool(row["enabled"]),
        mode=Mode(row["mode"]),
        digest_period_s=row["digest_period_s"],
        filter=dict(row["filter"]),
        rate_per_min=row["rate_per_min"],
        rate_burst=row["rate_burst"],
        max_attempts=row["max_attempts"],
        retry_backoff_s=row["retry_backoff_s"],
        timeout_s=row["timeout_s"],
        max_age_s=row["max_age_s"],
        tenant=row["tenant"],
        templates=dict(row["templates"]),
        disabled_reason=row["disabled_reason"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        fallback_channel_id=row["fallback_channel_id"],
        retention_days=row["retention_days"],
    )


def delivery(row: Mapping[Any, Any]) -> Delivery:
    return Delivery(
        id=row["id"],
        event_id=row["event_id"],
        channel_id=row["channel_id"],
        state=_STATES[row["state"]],
        attempts=row["attempts"],
        next_attempt_at=row["next_attempt_at"],
        last_error=row["last_error"],
        failure=None if (failure := row["failure"]) is None else _FAILURES[failure],
        skip_reason=None if (skip := row["skip_reason"]) is None else _SKIP_REASONS[skip],
        batch_id=row["batch_id"],
        lease_owner=row["lease_owner"],
        lease_token=row["lease_token"],
        created_at=row["created_at"],
        sent_at=row["sent_at"],
        message_id=row["message_id"],
        lost_leases=row["lost_leases"],
        fallback_of=row["fallback_of"],
    )


def delivery_view(row: Mapping[Any, Any]) -> DeliveryView:
    return DeliveryView(
        delivery=delivery(row),
        channel_name=row["channel_name"],
        channel_kind=row["channel_kind"],
        event_kind=row["event_kind"],
        subject=row["event_subject"],
        title=row["event_title"],
        tenant=row["event_tenant"],
    )


def attempt(row: Mapping[Any, Any]) -> Attempt:
    return Attempt(
        id=row["id"],
        delivery_id=row["delivery_id"],
        batch_id=row["batch_id"],
        worker_id=row["worker_id"],
        status=AttemptStatus(row["status"]),
        error=row["error"],
        duration_ms=row["duration_ms"],
        provider_response=row["provider_response"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
    )
