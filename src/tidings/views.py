"""The JSON views of the service's values (DESIGN §4 "Shapes"; timestamps RFC 3339 UTC):
events, deliveries, attempts, history pages, channels (secrets redacted), channel kinds and
API tokens (never their value). The API answers with them and the CLI prints them.

Service level: imports the channel registry's declarations, tidings.core (redaction included).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from tidings.channel_rules import declared
from tidings.channels.registry import Registry
from tidings.core.breaker import Health
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
from tidings.core.redact import masked_config
from tidings.store.tokens import TokenInfo

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
        "lost_leases": d.lost_leases,
        "fallback_of": d.fallback_of,
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
        "total_is_estimate": page.total_is_estimate,
        "next_cursor": page.next_cursor,
        "prev_cursor": page.prev_cursor,
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
    return delivery_view(detail.view) | {
        "attempts_log": [attempt(a) for a in detail.attempts_log],
        "escalated_to": detail.escalated_to,
    }


def publish_result(result: PublishResult) -> dict[str, Any]:
    return {
        "event": event(result.event),
        "deliveries": [delivery(d) for d in result.deliveries],
        "duplicate": not result.created,
    }


def channel(c: Channel, spec: KindSpec | None) -> dict[str, Any]:
    """A channel as every read shows it: its secrets masked (`••••` + the last 4) as the kind
    declares them (`tidings.core.redact.masked_config`), S2."""
    return {
        "id": c.id,
        "name": c.name,
        "kind": c.kind,
        "config": masked_config(spec, c.config),
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
        "fallback_channel_id": c.fallback_channel_id,
        "retention_days": c.retention_days,
        "created_at": ts(c.created_at),
        "updated_at": ts(c.updated_at),
    }


def breaker(channel_id: int, name: str, health: Health) -> dict[str, Any]:
    """A channel's circuit breaker (H1); a channel without a row is healthy."""
    return {
        "channel_id": channel_id,
        "channel_name": name,
        "breaker": health.state.value,
        "consecutive_failures": health.consecutive_failures,
        "failing_since": ts(health.failing_since),
        "probe_at": ts(health.until),
        "last_error": health.last_error,
    }


def kind_specs(registry: Registry) -> list[KindSpec]:
    """The declarations of the registered kinds, by kind name (kinds declaring none left out)."""
    found = (declared(registry.get(kind)) for kind in registry.kinds())
    return [spec for spec in found if spec is not None]


def kinds(specs: Sequence[KindSpec]) -> list[dict[str, Any]]:
    return [spec.as_json() for spec in specs]


def token_state(t: TokenInfo, now: datetime | None = None) -> str:
    """`active`, `expired` or `revoked`."""
    if t.revoked_at is not None:
        return "revoked"
    if t.expires_at is not None and t.expires_at <= (now or datetime.now(UTC)):
        return "expired"
    return "active"


def token(t: TokenInfo, now: datetime | None = None) -> dict[str, Any]:
    """A token's description; its value exists only in the answer that created it."""
    return {
        "id": t.id,
        "name": t.name,
        "scopes": list(t.scopes),
        "state": token_state(t, now),
        "created_at": ts(t.created_at),
        "last_used_at": ts(t.last_used_at),
        "expires_at": ts(t.expires_at),
        "revoked_at": ts(t.revoked_at),
        "kinds": list(t.kinds) if t.kinds is not None else None,
        "tenants": list(t.tenants) if t.tenants is not None else None,
    }
