"""The `webhook` kind: JSON POSTs signed per Standard Webhooks (DESIGN "Shapes").

One event: `{"type": "event", "channel", "delivery_id", "event": {...}}`; a digest:
`{"type": "digest", "channel", "batch_id", "events": [...]}`. The `webhook-id` header is the
message's stable id, so a receiver can drop the rare duplicate. Imports tidings.channels
(base, http, signing) and tidings.core.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar, Final
from urllib.parse import urlsplit

from tidings.channels import signing
from tidings.channels.base import Adapter, Message, SendContext, Target
from tidings.channels.http import classify
from tidings.core import jsontext
from tidings.core.errors import ValidationError
from tidings.core.kinds import ConfigField, FieldType, KindSpec
from tidings.core.model import Channel, Event, event_document, rfc3339
from tidings.core.outcome import Outcome
from tidings.core.text import MARKER, truncate_utf8

DEFAULT_MAX_BODY_BYTES: Final = 1_048_576
_MIN_BODY_BYTES: Final = 1024
_MAX_BODY_BYTES: Final = 16 * 1_048_576
#: Headers the adapter sets itself (the signature covers them), and framing or hop-by-hop
#: headers, which would let a config change how the request is delimited or routed.
RESERVED_HEADERS: Final = frozenset(
    {
        "content-type",
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
        "traceparent",
        "content-length",
        "transfer-encoding",
        "host",
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
        "expect",
    }
)
#: An RFC 9110 field name (a token): no spaces, colons, CR, LF or NUL.
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
#: A field value: visible characters, spaces and tabs; never CR, LF or NUL.
_HEADER_VALUE = re.compile(r"[^\r\n\x00]*")


def _encode(document: dict[str, Any]) -> bytes:
    return jsontext.dumps(document)


class WebhookAdapter(Adapter):
    spec: ClassVar[KindSpec] = KindSpec(
        kind="webhook",
        description="Any HTTPS endpoint, sent JSON signed per Standard Webhooks.",
        fields=(
            ConfigField(
                "url",
                FieldType.URL,
                "Where to POST the JSON (http:// or https://); its userinfo and query values "
                "are kept secret.",
                True,
                secret_parts=True,
                destination=True,
            ),
            ConfigField(
                "secret",
                FieldType.STRING,
                "Signing secret, whsec_ + base64 (Standard Webhooks); unsigned when absent.",
                secret=True,
                label="Signing secret",
            ),
            ConfigField(
                "previous_secret",
                FieldType.STRING,
                "The signing secret being rotated out: it signs too (a second signature) until "
                "previous_secret_until. Set by rotate-secret.",
                secret=True,
                label="Previous signing secret",
            ),
            ConfigField(
                "previous_secret_until",
                FieldType.STRING,
                "When the previous secret stops signing (RFC 3339). Set by rotate-secret.",
                label="Previous secret signs until",
            ),
            ConfigField(
                "headers",
                FieldType.STRING_MAP,
                "Extra request headers, name to value (e.g. Authorization); "
                "content-type, webhook-* and framing headers are set by tidings. "
                "Their values are kept secret.",
                secret_parts=True,
                label="Extra headers",
            ),
            ConfigField(
                "max_body_bytes",
                FieldType.INTEGER,
                "The largest body the receiver takes, in bytes; longer messages are shortened "
                "and digests split.",
                default=DEFAULT_MAX_BODY_BYTES,
                minimum=_MIN_BODY_BYTES,
                maximum=_MAX_BODY_BYTES,
                label="Max body bytes",
            ),
        ),
        flavour="json",
        max_body_bytes=DEFAULT_MAX_BODY_BYTES,
        example={
            "url": "https://hooks.example.com/tidings",
            "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        },
    )
    bounded_by_http_timeout: ClassVar[bool] = True

    def check_config(self, config: dict[str, Any]) -> dict[str, Any]:
        for name in ("secret", "previous_secret"):
            if config.get(name) is not None:
                signing.parse_secret(config[name], f"config.{name}")
        if ("previous_secret" in config) != ("previous_secret_until" in config):
            raise ValidationError(
                "config.previous_secret_until", "goes with previous_secret, and only with it"
            )
        if "previous_secret_until" in config:
            config["previous_secret_until"] = _until(config["previous_secret_until"])
        for name, value in config.get("headers", {}).items():
            where = f"config.headers.{name}"
            if not _HEADER_NAME.fullmatch(name):
                raise ValidationError("config.headers", f"{name!r} is not a valid header name")
            if name.lower() in RESERVED_HEADERS:
                raise ValidationError(where, "is set by tidings and cannot be configured")
            if not _HEADER_VALUE.fullmatch(value):
                raise ValidationError(where, "must not contain CR, LF or NUL")
            if name.lower() == "authorization" and "@" in urlsplit(config["url"]).netloc:
                raise ValidationError(where, "cannot go with credentials in the URL: use one")
        return config

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
        secrets = await self._signing_secrets(ctx, channel)
        if ctx.traceparent is not None:  # the receiver may join the producer's trace
            headers["traceparent"] = ctx.traceparent
        headers.update(
            signing.headers(secrets, message.target.message_id, timestamp, message.payload)
        )
        try:
            response = await ctx.http.post(
                str(channel.config["url"]),
                body=message.payload,
                headers=headers,
                timeout_s=channel.timeout_s,
            )
        except Exception as error:  # translated at the boundary into an outcome
            outcome = self.failure(error, channel)
        else:
            outcome = classify(response, ctx.attempt_at)
        return self.scrubbed(outcome, channel)

    async def _signing_secrets(self, ctx: SendContext, channel: Channel) -> list[str]:
        """The secret, and the previous one while its overlap lasts; once it is over, the
        previous secret is dropped from the stored config."""
        config = channel.config
        secrets = [config["secret"]] if config.get("secret") else []
        until = config.get("previous_secret_until")
        if config.get("previous_secret") and isinstance(until, str):
            if ctx.attempt_at < datetime.fromisoformat(until):
                secrets.append(config["previous_secret"])
            else:
                drop = {"previous_secret": None, "previous_secret_until": None}
                await ctx.store.update_channel_config(channel.id, drop)
        return secrets


def _until(value: str) -> str:
    """An RFC 3339 time, as UTC."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ValidationError("config.previous_secret_until", "is not an RFC 3339 time") from None
    if moment.tzinfo is None:
        raise ValidationError("config.previous_secret_until", "needs a UTC offset")
    return rfc3339(moment) or value


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
