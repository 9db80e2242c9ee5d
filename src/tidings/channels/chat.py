"""What every chat robot adapter shares: text rendered by `tidings.render` in the kind's
flavour, measured in the kind's unit, wrapped in the vendor's JSON, POSTed to a keyed URL,
and classified — HTTP status first, then the vendor's own code in a 200 answer.

A kind module adds only its deltas: `payload()` (the vendor JSON), `classify_ok()` (vendor
codes), and, where the vendor signs requests, `url()` or `headers()`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, ClassVar
from urllib.parse import urlsplit

from tidings.channels.base import Adapter, Message, SendContext, Target
from tidings.channels.http import HttpResponse, classify, outcome_for_exception
from tidings.core.errors import ValidationError
from tidings.core.kinds import ConfigField, FieldType
from tidings.core.model import Channel, Event
from tidings.core.outcome import Delivered, Outcome
from tidings.core.text import truncate_chars, truncate_utf8
from tidings.redact import mask
from tidings.render import Flavour, RenderError, default_renderer

#: The keyed webhook URL most robots are addressed by; it is their credential.
WEBHOOK_URL = ConfigField(
    "webhook_url",
    FieldType.URL,
    "The robot's full webhook URL, key included (copy it whole)",
    required=True,
    secret=True,
    label="Webhook URL",
)
#: A robot's optional signing secret (DingTalk 加签, Feishu 签名校验).
SIGNING_SECRET = ConfigField(
    "secret",
    FieldType.STRING,
    "The robot's signing secret, when signing is switched on",
    secret=True,
    label="Signing secret",
)


class ChatAdapter(Adapter):
    flavour: ClassVar[Flavour]
    #: The keyed webhook URL is the credential for most robots: never shown, never logged.
    secret_fields: ClassVar[tuple[str, ...]] = ("webhook_url",)
    url_field: ClassVar[str] = "webhook_url"
    bounded_by_http_timeout: ClassVar[bool] = True

    # -- configuration --------------------------------------------------------------------

    def validate_config(self, config: dict[str, Any]) -> dict[str, Any]:
        url = config.get(self.url_field)
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValidationError(
                f"config.{self.url_field}", "an http:// or https:// URL is required"
            )
        return dict(config)

    # -- rendering ------------------------------------------------------------------------

    def text(
        self, channel: Channel, target: Target, events: Sequence[Event], part: int, parts: int
    ) -> tuple[str, str]:
        """(title, body text) in this kind's flavour."""
        renderer = default_renderer()
        if target.batch_id is None:
            event = events[0]
            return event.title or event.kind, renderer.event(self.flavour, channel, event)
        title = f"{len(events)} events" + (f" ({part}/{parts})" if parts > 1 else "")
        return title, renderer.digest(self.flavour, channel, events, part=part, parts=parts)

    def measure(self, text: str) -> int:
        return len(text.encode()) if self.limits.size_unit == "bytes" else len(text)

    def shorten(self, text: str, limit: int) -> str:
        """Keep the start (the templates lead with the title) and mark the cut."""
        if self.limits.size_unit == "bytes":
            return truncate_utf8(text, limit)
        return truncate_chars(text, limit)

    def payload(self, channel: Channel, title: str, text: str) -> dict[str, Any]:
        """The vendor's JSON body around the rendered text."""
        raise NotImplementedError

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
        title, text = self.text(channel, target, events, part, parts)
        if shorten_to is not None and self.measure(text) > shorten_to:
            text = self.shorten(text, shorten_to)
        body = json.dumps(self.payload(channel, title, text), ensure_ascii=False).encode()
        return Message(target=target, payload=body, size=self.measure(text), title=title, text=text)

    # -- sending --------------------------------------------------------------------------

    def url(self, channel: Channel, now: datetime) -> str:
        return str(channel.config[self.url_field])

    def headers(self, channel: Channel, message: Message, now: datetime) -> dict[str, str]:
        return {"content-type": "application/json; charset=utf-8"}

    def body(self, channel: Channel, message: Message, now: datetime) -> bytes:
        """What is POSTed; kinds that sign inside the body (Feishu) override this."""
        return message.payload

    def classify_ok(self, response: HttpResponse, now: datetime) -> Outcome:
        """A 2xx answer; vendors that report errors inside a 200 override this."""
        return Delivered(provider_response=response.text)

    def classify_response(self, response: HttpResponse, now: datetime) -> Outcome:
        """Every answer: 2xx by `classify_ok`, the rest by the shared status rules. Vendors
        that put the decisive code in a non-2xx body (Slack, Discord) override this."""
        if 200 <= response.status < 300:
            return self.classify_ok(response, now)
        return classify(response, now)

    async def send(self, ctx: SendContext, channel: Channel, message: Message) -> Outcome:
        now = ctx.attempt_at
        try:
            response = await ctx.http.post(
                self.url(channel, now),
                body=self.body(channel, message, now),
                headers=self.headers(channel, message, now),
                timeout_s=channel.timeout_s,
            )
        except Exception as error:  # translated at the boundary into an outcome
            outcome = outcome_for_exception(error)
        else:
            outcome = self.classify_response(response, now)
        return scrub_secrets(outcome, self.secrets_of(channel))

    def secrets_of(self, channel: Channel) -> list[str]:
        """Every secret string, and the parts of keyed URLs that carry the key: the query,
        the path, and the path's last segment (Slack's and Discord's token) on its own."""
        found: set[str] = set()
        for name in self.secret_fields:
            value = channel.config.get(name)
            if not isinstance(value, str) or not value:
                continue
            found.add(value)
            if value.startswith(("http://", "https://")):
                parts = urlsplit(value)
                last = parts.path.rstrip("/").rpartition("/")[2]
                found.update(p for p in (parts.query, parts.path, last) if len(p) > 8)
        return sorted(found, key=len, reverse=True)


def fit_body(encode: Callable[[str], bytes], text: str, limit: int | None) -> tuple[str, bytes]:
    """The longest start of `text` (the cut marked) whose `encode` fits in `limit` bytes.

    JSON escaping makes the body grow unevenly with the text (quotes, backslashes and
    newlines double), so the cut is found by bisecting the text's byte budget.
    """
    body = encode(text)
    if limit is None or len(body) <= limit:
        return text, body
    low, high = 0, len(text.encode())
    while low < high:
        middle = (low + high + 1) // 2
        if len(encode(truncate_utf8(text, middle))) <= limit:
            low = middle
        else:
            high = middle - 1
    text = truncate_utf8(text, low)
    return text, encode(text)


def scrub_secrets(outcome: Outcome, secrets: Sequence[str]) -> Outcome:
    """No secret reaches an error, an attempt row or a log: replace each with its mask."""
    changes: dict[str, Any] = {}
    for field in ("error", "provider_response"):
        text = getattr(outcome, field, None)
        if isinstance(text, str):
            cleaned = text
            for secret in secrets:
                cleaned = cleaned.replace(secret, mask(secret))
            if cleaned != text:
                changes[field] = cleaned
    return dataclasses.replace(outcome, **changes) if changes else outcome


__all__ = ["ChatAdapter", "RenderError", "fit_body", "scrub_secrets"]
