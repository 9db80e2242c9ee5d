"""What templates see: plain-dict views of an event and a channel, and the sample used to try a
channel's templates when they are saved. Imports only the standard library and tidings.core.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tidings.core.model import Channel, Event, Severity
from tidings.render.flavours import safe_url


def rfc3339(moment: datetime) -> str:
    """`moment` in UTC as RFC 3339 with a `Z` (a naive datetime is read as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def event_context(event: Event) -> dict[str, Any]:
    """The `event` templates see. `url` is None unless its scheme is http, https or mailto."""
    return {
        "id": event.id,
        "kind": event.kind,
        "subject": event.subject,
        "severity": str(event.severity),
        "title": event.title,
        "body": event.body,
        "url": safe_url(event.url),
        "labels": dict(event.labels),
        "data": dict(event.data),
        "tenant": event.tenant,
        "created_at": rfc3339(event.created_at),
    }


def channel_context(channel: Channel) -> dict[str, Any]:
    return {"id": channel.id, "name": channel.name, "kind": channel.kind}


SAMPLE_EVENT = Event(
    id=1,
    kind="sample.event",
    subject="sample-subject",
    severity=Severity.HIGH,
    title="Sample title",
    body="Sample body",
    url="https://example.com/sample",
    labels={"env": "sample"},
    data={"key": "value"},
    tenant=None,
    idempotency_key=None,
    created_at=datetime(2000, 1, 1, tzinfo=UTC),
)
SAMPLE_CHANNEL: dict[str, Any] = {"id": 0, "name": "sample", "kind": "inbox"}


def sample_variables(template_name: str) -> dict[str, Any]:
    """The variables `template_name` is rendered with, for a trial render of an override."""
    digest = {"count": 3, "part": 1, "parts": 2, "total": 5}
    variables: dict[str, dict[str, Any]] = {
        "event": {"event": event_context(SAMPLE_EVENT)},
        "digest_header": digest,
        "digest_entry": {"event": event_context(SAMPLE_EVENT), "index": 1},
        "digest_footer": digest,
    }
    return {"channel": SAMPLE_CHANNEL, **variables[template_name]}
