"""The JSON views of the service's values (DESIGN §4 "Shapes"; timestamps RFC 3339 UTC):
events, deliveries, attempts, history pages, channels (secrets redacted) and channel kinds.
The API answers with them and the CLI prints them.

Service level: imports the channel registry's declarations, tidings.core (redaction included).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tidings.channel_rules import declared
from tidings.channels.registry import Registry
from tidings.core.kinds import KindSpec
from tidings.core.model import (
    Attempt,
    Channel,
    Delivery,
    DeliveryDetail,
    DeliveryView,
    Event,
    Page,
    PublishResult,
    event_document,
    rfc3339,
)
from tidings.core.redact import redact_config

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
        "message_id": d.message_id,
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


def delivery_page(page: Page[DeliveryView]) -> dict[str, Any]:
    return {
        "items": [delivery_view(v) for v in page.items],
        "total": page.total,
        "page": page.page,
        "page_size": page.page_size,
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


def channel(c: Channel, secret_fields: Sequence[str]) -> dict[str, Any]:
    """A channel with the values of its secret fields masked (`••••` + the last 4)."""
    return {
        "id": c.id,
        "name": c.name,
        "kind": c.kind,
        "config": redact_config(c.config, secret_fields),
        "enabled": c.enabled,
        "disabled_reason": c.disabled_reason,
        "mode": c.mode.value,
        "digest_period_s": c.digest_period_s,
        "filter": c.filter,
        "rate_per_min": c.rate_per_min,
        "rate_burst": c.rate_burst,
        "max_attempts": c.max_attempts,
        "retry_backoff_s": c.retry_backoff_s,
        "timeout_s": c.timeout_s,
        "max_age_s": c.max_age_s,
        "tenant": c.tenant,
        "templates": c.templates,
        "created_at": ts(c.created_at),
        "updated_at": ts(c.updated_at),
    }


def kind_specs(registry: Registry) -> list[KindSpec]:
    """The declarations of the registered kinds, by kind name (kinds declaring none left out)."""
    found = (declared(registry.get(kind)) for kind in registry.kinds())
    return [spec for spec in found if spec is not None]


def kinds(specs: Sequence[KindSpec]) -> list[dict[str, Any]]:
    return [spec.as_json() for spec in specs]
