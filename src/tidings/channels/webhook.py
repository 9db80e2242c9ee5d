"""The `webhook` kind: JSON POSTs signed per Standard Webhooks (DESIGN "Shapes").

One event: `{"type": "event", "channel", "delivery_id", "event": {...}}`; a digest:
`{"type": "digest", "channel", "batch_id", "events": [...]}`. The `webhook-id` header is the
message's stable id, so a receiver can drop the rare duplicate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from tidings.channels import signing
from tidings.channels.base import Adapter, Limits, Message, SendContext, Target
from tidings.channels.http import classify, outcome_for_exception
from tidings.core import jsontext
from tidings.core.errors import ValidationError
from tidings.core.kinds import ConfigField, FieldType, KindSpec
from tidings.core.model import Channel, Event, event_document
from tidings.core.outcome import Outcome
from tidings.core.text import MARKER, truncate_utf8

DEFAULT_MAX_BODY_BYTES = 1_048_576
_MIN_BODY_BYTES = 1024
_MAX_BODY_BYTES = 16 * 1_048_576
_RESERVED_HEADERS = {"content-type", "webhook-id", "webhook-timestamp", "webhook-signature"}


def _encode(document: dict[str, Any]) -> bytes:
    return jsontext.dumps(document)


class WebhookAdapter(Adapter):
    kind: ClassVar[str] = "webhook"
    limits: ClassVar[Limits] = Limits(
        max_message_size=DEFAULT_MAX_BODY_BYTES, size_unit="bytes", flavour="json"
    )
    spec: ClassVar[KindSpec] = KindSpec(
        kind="webhook",
        description="Any HTTPS endpoint: the event as JSON, signed per Standard Webhooks",
        fields=(
            ConfigField(
                "url", FieldType.URL, "Where the JSON is POSTed", required=True, label="URL"
            ),
            ConfigField(
                "secret",
                FieldType.STRING,
                "Signing secret, whsec_ + base64 (Standard Webhooks); unsigned when absent",
                secret=True,
                label="Signing secret",
            ),
            ConfigField(
                "headers",
                FieldType.STRING_MAP,
                "Extra request headers (not Content-Type or webhook-*)",
                label="Extra headers",
            ),
            ConfigField(
                "max_body_bytes",
                FieldType.INTEGER,
                "The largest body the receiver takes",
                default=DEFAULT_MAX_BODY_BYTES,
                minimum=_MIN_BODY_BYTES,
                maximum=_MAX_BODY_BYTES,
            ),
        ),
        flavour="json",
        max_body_bytes=DEFAULT_MAX_BODY_BYTES,
    )
    secret_fields: ClassVar[tuple[str, ...]] = ("secret",)
    bounded_by_http_timeout: ClassVar[bool] = True

    def validate_config(self, config: dict[str, Any]) -> dict[str, Any]:
        url = config.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValidationError("config.url", "an http:// or https:// URL is required")
        secret = config.get("secret")
        if secret is not None:
            if not isinstance(secret, str):
                raise ValidationError("config.secret", "must be a whsec_… string")
            signing.parse_secret(secret)
        headers = config.get("headers", {})
        if not isinstance(headers, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
        ):
            raise ValidationError("config.headers", "must map header names to strings")
        if _RESERVED_HEADERS & {k.lower() for k in headers}:
            raise ValidationError("config.headers", "may not set content-type or webhook-*")
        limit = config.get("max_body_bytes", DEFAULT_MAX_BODY_BYTES)
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise ValidationError("config.max_body_bytes", "must be a whole number of bytes")
        if not _MIN_BODY_BYTES <= limit <= _MAX_BODY_BYTES:
            raise ValidationError(
                "config.max_body_bytes", f"must be {_MIN_BODY_BYTES}..{_MAX_BODY_BYTES}"
            )
        return dict(config)

    def size_limit(self, channel: Channel) -> int | None:
        return int(channel.config.get("max_body_bytes", DEFAULT_MAX_BODY_BYTES))

    def render(
        self,
        channel: Channel,
        target: Target,
        events: Sequence[Event],
        *,
        shorten_to: int | None = None,
        part: int = 1,
        parts: int = 1,
    ) -> Message:
        entries = [event_document(e) for e in events]
        if target.batch_id is None:
            document: dict[str, Any] = {
                "type": "event",
                "channel": channel.name,
                "delivery_id": target.delivery_ids[0],
                "event": entries[0],
            }
        else:
            document = {
                "type": "digest",
                "channel": channel.name,
                "batch_id": target.batch_id,
                "part": part,
                "parts": parts,
                "events": entries,
            }
        payload = _encode(document)
        if shorten_to is not None and len(payload) > shorten_to:
            payload = _shorten(document, entries[0], shorten_to)
        title = events[0].title if len(events) == 1 else f"{len(events)} events"
        return Message(target=target, payload=payload, size=len(payload), title=title)

    async def send(self, ctx: SendContext, channel: Channel, message: Message) -> Outcome:
        timestamp = int(ctx.attempt_at.timestamp())
        headers = dict(channel.config.get("headers", {}))
        headers["content-type"] = message.content_type
        headers.update(
            signing.headers(
                channel.config.get("secret"), message.target.message_id, timestamp, message.payload
            )
        )
        try:
            response = await ctx.http.post(
                str(channel.config["url"]),
                body=message.payload,
                headers=headers,
                timeout_s=channel.timeout_s,
            )
        except Exception as error:  # translated at the boundary into an outcome
            return outcome_for_exception(error)
        return classify(response, ctx.attempt_at)


def _shorten(document: dict[str, Any], entry: dict[str, Any], limit: int) -> bytes:
    """Fit one over-long event: cut its body, then drop its data, then cut its title."""
    entry["body"] = truncate_utf8(entry["body"], max(0, limit // 2))
    if len(_encode(document)) > limit:
        entry["data"] = {"truncated": f"data omitted: the message exceeded {limit} bytes"}
    for field in ("body", "title", "subject"):
        overflow = len(_encode(document)) - limit
        if overflow <= 0:
            break
        text = str(entry[field])
        keep = max(0, len(text.encode()) - overflow - len(MARKER.encode()))
        entry[field] = truncate_utf8(text, keep) if keep else MARKER
    return _encode(document)
