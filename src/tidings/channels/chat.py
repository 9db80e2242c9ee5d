"""What every chat robot adapter shares: text rendered by `tidings.render` in the kind's
flavour, measured in the kind's unit, wrapped in the vendor's JSON, POSTed to a keyed URL,
and classified — HTTP status first, then the vendor's own code in a 200 answer.

A kind module adds only its deltas: its `spec` (config fields, limit, flavour, rate), its own
config rules (`check_config()`), `payload()` (the vendor JSON), `classify_ok()` (vendor
codes), and, where the vendor signs requests, `url()` or `headers()`. Imports
tidings.channels (base, http), tidings.core and tidings.render.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, ClassVar

from tidings.channels.base import Adapter, Message, SendContext, Target
from tidings.channels.http import HttpResponse, classify
from tidings.core.kinds import ConfigField, FieldType, SizeUnit
from tidings.core.model import Channel, Event
from tidings.core.outcome import Delivered, Outcome
from tidings.core.text import truncate_chars, truncate_utf8
from tidings.render import Flavour, RenderError, default_renderer


def webhook_url_field(description: str) -> ConfigField:
    """The keyed webhook URL most robots are addressed by: required, and a secret (whoever
    has it can post to the group), and where the kind's other secrets go."""
    return ConfigField(
        "webhook_url",
        FieldType.URL,
        description,
        required=True,
        secret=True,
        destination=True,
        label="Webhook URL",
    )


class ChatAdapter(Adapter):
    url_field: ClassVar[str] = "webhook_url"
    bounded_by_http_timeout: ClassVar[bool] = True

    @functools.cached_property
    def flavour(self) -> Flavour:
        return Flavour(self.spec.flavour)

    @functools.cached_property
    def unit(self) -> SizeUnit:
        """What this kind's limit counts (a chat kind always declares one)."""
        limit = self.spec.limit
        assert limit is not None, f"kind {self.spec.kind!r} declares no size limit"
        return limit.unit

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
        """The rendered text in the declared unit (kinds measured on the body override
        `render` instead)."""
        if self.unit is SizeUnit.TEXT_BYTES:
            return len(text.encode())
        if self.unit is SizeUnit.UTF16_UNITS:
            return len(text.encode("utf-16-le")) // 2
        return len(text)

    def shorten(self, text: str, limit: int) -> str:
        """Keep the start (the templates lead with the title) and mark the cut."""
        if self.unit is SizeUnit.TEXT_BYTES:
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
            outcome = self.failure(error, channel)
        else:
            outcome = self.classify_response(response, now)
        return self.scrubbed(outcome, channel)


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


__all__ = ["ChatAdapter", "RenderError", "fit_body", "webhook_url_field"]
