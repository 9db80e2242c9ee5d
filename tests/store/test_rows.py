"""The claim's positional row converters read columns in table order, which must be the
dataclasses' field order: a column added or moved in one place only fails here."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime

from tidings.core.model import Delivery, Event, Severity
from tidings.core.states import Failure, SkipReason, State
from tidings.store import rows
from tidings.store.schema import deliveries, events

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_table_columns_are_in_field_order() -> None:
    assert [c.name for c in deliveries.c] == [f.name for f in fields(Delivery)]
    assert [c.name for c in events.c] == [f.name for f in fields(Event)]
    assert len(fields(Delivery)) == rows.DELIVERY_WIDTH


def test_positional_and_keyed_converters_agree() -> None:
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
    }
    row = [*(delivery[c.name] for c in deliveries.c), *(event[c.name] for c in events.c)]

    got = rows.delivery_at(row)
    assert got == rows.delivery(delivery)  # type: ignore[arg-type]
    assert (got.state, got.failure, got.skip_reason) == (
        State.FAILED,
        Failure.EXHAUSTED,
        SkipReason.CHANNEL_DISABLED,
    )
    got_event = rows.event_at(row, rows.DELIVERY_WIDTH)
    assert got_event == rows.event(event)
    assert got_event.severity is Severity.HIGH
    assert got_event.labels == {"team": "ops"}
    assert got_event.labels is not event["labels"]
