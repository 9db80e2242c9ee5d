"""Database rows → core dataclasses, so nothing outside the store sees SQLAlchemy."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import RowMapping

from tidings.core.model import Attempt, Channel, Delivery, DeliveryView, Event, Severity
from tidings.core.states import AttemptStatus, Failure, Mode, SkipReason, State
from tidings.store.schema import channels, deliveries, events

DELIVERY_COLUMNS = list(deliveries.c)
EVENT_COLUMNS = list(events.c)
# The columns a history row adds to a delivery (M2): one query for a whole list.
VIEW_COLUMNS = [
    *DELIVERY_COLUMNS,
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
        severity=Severity(row["severity"]),
        title=row["title"],
        body=row["body"],
        url=row["url"],
        labels=dict(row["labels"]),
        data=dict(row["data"]),
        tenant=row["tenant"],
        idempotency_key=row["idempotency_key"],
        created_at=row["created_at"],
    )


def channel(row: RowMapping) -> Channel:
    return Channel(
        id=row["id"],
        name=row["name"],
        kind=row["kind"],
        config=dict(row["config"]),
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
    )


def delivery(row: RowMapping) -> Delivery:
    return Delivery(
        id=row["id"],
        event_id=row["event_id"],
        channel_id=row["channel_id"],
        state=State(row["state"]),
        attempts=row["attempts"],
        next_attempt_at=row["next_attempt_at"],
        last_error=row["last_error"],
        failure=_opt(Failure, row["failure"]),
        skip_reason=_opt(SkipReason, row["skip_reason"]),
        batch_id=row["batch_id"],
        lease_owner=row["lease_owner"],
        lease_token=row["lease_token"],
        created_at=row["created_at"],
        sent_at=row["sent_at"],
    )


def delivery_view(row: RowMapping) -> DeliveryView:
    return DeliveryView(
        delivery=delivery(row),
        channel_name=row["channel_name"],
        channel_kind=row["channel_kind"],
        event_kind=row["event_kind"],
        subject=row["event_subject"],
        title=row["event_title"],
        tenant=row["event_tenant"],
    )


def attempt(row: RowMapping) -> Attempt:
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


def _opt(kind: Any, value: str | None) -> Any:
    return None if value is None else kind(value)


# Positional converters for the claim, which turns hundreds of rows a second into dataclasses:
# a tuple index and a dict lookup instead of a keyed row lookup and an enum call per field.
# The columns come in table order, which is the dataclasses' field order (a test holds both).
_STATE = {s.value: s for s in State}
_FAILURE = {f.value: f for f in Failure}
_SKIP = {s.value: s for s in SkipReason}
_SEVERITY = {s.value: s for s in Severity}
DELIVERY_WIDTH = len(deliveries.c)


def delivery_at(row: Sequence[Any], at: int = 0) -> Delivery:
    """A delivery from `row[at:at + DELIVERY_WIDTH]`, its columns in table order."""
    failure = row[at + 7]
    skip = row[at + 8]
    return Delivery(
        row[at],
        row[at + 1],
        row[at + 2],
        _STATE[row[at + 3]],
        row[at + 4],
        row[at + 5],
        row[at + 6],
        None if failure is None else _FAILURE[failure],
        None if skip is None else _SKIP[skip],
        row[at + 9],
        row[at + 10],
        row[at + 11],
        row[at + 12],
        row[at + 13],
    )


def event_at(row: Sequence[Any], at: int = 0) -> Event:
    """An event from `row[at:]`, its columns in table order."""
    return Event(
        row[at],
        row[at + 1],
        row[at + 2],
        _SEVERITY[row[at + 3]],
        row[at + 4],
        row[at + 5],
        row[at + 6],
        dict(row[at + 7]),
        dict(row[at + 8]),
        row[at + 9],
        row[at + 10],
        row[at + 11],
    )
