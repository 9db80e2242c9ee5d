"""Core dataclasses → the JSON shapes of DESIGN §4 "Shapes" (timestamps RFC 3339 UTC)."""

from __future__ import annotations

from typing import Any

from tidings.core.model import (
    Attempt,
    Delivery,
    DeliveryDetail,
    DeliveryView,
    Event,
    PublishResult,
    event_document,
    rfc3339,
)

ts = rfc3339


def event(e: Event) -> dict[str, Any]:
    return event_document(e) | {"idempotency_key": e.idempotency_key}


def delivery(d: Delivery) -> dict[str, Any]:
    return {
        "id": d.id,
        "event_id": d.event_id,
        "channel_id": d.channel_id,
        "state": d.state.value,
        "attempts": d.attempts,
        "next_attempt_at": ts(d.next_attempt_at),
        "last_error": d.last_error,
        "failure": d.failure.value if d.failure else None,
        "skip_reason": d.skip_reason.value if d.skip_reason else None,
        "batch_id": d.batch_id,
        "created_at": ts(d.created_at),
        "sent_at": ts(d.sent_at),
    }


def delivery_view(v: DeliveryView) -> dict[str, Any]:
    return delivery(v.delivery) | {
        "channel_name": v.channel_name,
        "channel_kind": v.channel_kind,
        "event_kind": v.event_kind,
        "subject": v.subject,
        "title": v.title,
    }


def attempt(a: Attempt) -> dict[str, Any]:
    return {
        "id": a.id,
        "delivery_id": a.delivery_id,
        "batch_id": a.batch_id,
        "worker_id": a.worker_id,
        "status": a.status.value,
        "error": a.error,
        "duration_ms": a.duration_ms,
        "provider_response": a.provider_response,
        "started_at": ts(a.started_at),
        "finished_at": ts(a.finished_at),
    }


def delivery_detail(detail: DeliveryDetail) -> dict[str, Any]:
    return delivery_view(detail.view) | {"attempts_log": [attempt(a) for a in detail.attempts_log]}


def publish_result(result: PublishResult) -> dict[str, Any]:
    return {
        "event": event(result.event),
        "deliveries": [delivery(d) for d in result.deliveries],
        "duplicate": not result.created,
    }
