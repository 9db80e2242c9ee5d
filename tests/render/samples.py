"""Events and channels for the render tests, built with the dataclass constructors."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tidings.core.model import Channel, Event, Mode, Severity

CREATED = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


def make_event(**changes: Any) -> Event:
    fields: dict[str, Any] = {
        "id": 42,
        "kind": "db.disk_full",
        "subject": "db1",
        "severity": Severity.HIGH,
        "title": "Disk almost full",
        "body": "95% used on /var",
        "url": "https://status.example.com/incidents/42?tab=log&x=(1)",
        "labels": {"env": "prod", "team": "dba"},
        "data": {"host": "db1", "used": 95, "nested": {"a": [1, 2]}},
        "tenant": None,
        "idempotency_key": None,
        "created_at": CREATED,
    }
    fields.update(changes)
    return Event(**fields)


def make_channel(templates: dict[str, Any] | None = None, **changes: Any) -> Channel:
    fields: dict[str, Any] = {
        "id": 7,
        "name": "ops",
        "kind": "inbox",
        "config": {},
        "enabled": True,
        "mode": Mode.REALTIME,
        "digest_period_s": 3600.0,
        "filter": {},
        "rate_per_min": 0.0,
        "rate_burst": 1,
        "max_attempts": 3,
        "retry_backoff_s": 30.0,
        "timeout_s": 15.0,
        "max_age_s": None,
        "tenant": None,
        "templates": templates or {},
        "disabled_reason": None,
        "created_at": CREATED,
        "updated_at": CREATED,
    }
    fields.update(changes)
    return Channel(**fields)
