"""Rows become core dataclasses with their enums and detached JSON before they leave the store."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime

from tidings.core.model import Delivery, Event, Severity
from tidings.core.states import Failure, SkipReason, State
from tidings.store import rows
from tidings.store.schema import deliveries, events

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_rows_become_dataclasses_with_enums_and_detached_json() -> None:
    delivery = {
        "id": 7,
        "event_id": 3,
        "channel_id": 2,
        "state": "failed",
        "attempts": 4,
        "next_attempt_at": NOW,
        "last_error": "boom",
        "failure": "exhausted",
        "skip_reason": "channel_disabled",
        "batch_id": 5,
        "lease_owner": "w1",
        "lease_token": "t" * 32,
        "created_at": NOW,
        "sent_at": None,
        "lost_leases": 2,
        "fallback_of": None,
        "message_id": "msg_" + "0" * 32,
    }
    event = {
        "id": 3,
        "kind": "disk.full",
        "subject": "db-1",
        "severity": "high",
        "title": "Disk full",
        "body": "at 99 %",
        "url": "https://example.org/x",
        "labels": {"team": "ops"},
        "data": {"used": 99},
        "tenant": "acme",
        "idempotency_key": "k-1",
        "created_at": NOW,
        "traceparent": None,
    }
    assert set(delivery) == {c.name for c in deliveries.c} == {f.name for f in fields(Delivery)}
    assert set(event) == {c.name for c in events.c} == {f.name for f in fields(Event)}

    got = rows.delivery(delivery)
    assert (got.state, got.failure, got.skip_reason) == (
        State.FAILED,
        Failure.EXHAUSTED,
        SkipReason.CHANNEL_DISABLED,
    )
    got_event = rows.event(event)
    assert got_event.severity is Severity.HIGH
    assert got_event.labels == {"team": "ops"}
    assert got_event.labels is not event["labels"]
