"""The `discord` kind: a Discord webhook, executed with `?wait=true` and plain `content`.

Owns the webhook's limits (2000 characters of content, a per-channel rate) and its answer
table: with `wait=true` success is 200 and the created message (so an unsaved message is
never taken for sent); errors carry a JSON `code` (10015 unknown webhook, 50035 invalid form
body, …) and 429 carries `retry_after` in seconds (channels.md §6). Mentions are never
parsed, so event text cannot ping @everyone or anyone else. Imports tidings.channels (chat,
http), tidings.core and tidings.render.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar, Final
from urllib.parse import urlsplit, urlunsplit

from tidings.channels.chat import ChatAdapter, webhook_url_field
from tidings.channels.http import MAX_ERROR_CHARS, HttpResponse, classify_by, header, rule_for
from tidings.channels.verdict import StatusRule, Verdict, outcome_for
from tidings.core.errors import ValidationError
from tidings.core.kinds import KindSpec
from tidings.core.model import Channel
from tidings.core.outcome import Delivered, Outcome, Reason
from tidings.core.retry import parse_retry_after
from tidings.core.text import truncate_chars
from tidings.render import Flavour

#: `content` holds at most 2000 characters [DC-1] (counted in code points here; whether
#: Discord counts UTF-16 code units is UNCONFIRMED).
MAX_CONTENT_CHARS: Final = 2000
#: Observed: 5 requests per 2 s per webhook and 30 per minute per channel [DC-6] (current
#: values UNCONFIRMED; Discord says to read the headers). 25 a minute stays under both.
DEFAULT_RATE_PER_MIN: Final = 25.0
#: …/webhooks/{webhook.id}/{webhook.token}, optionally after /api or /api/v{n}.
WEBHOOK_PATH: Final = re.compile(r"/webhooks/\d+/[^/]+/?")
#: Empty `parse`: no @everyone/@here, role or user mention in the text ever pings.
NO_MENTIONS: Final[Mapping[str, list[str]]] = {"parse": []}

_PERMANENT = Verdict.REJECT

#: JSON `code` → classification, whatever the HTTP status with it (channels.md §6, [DC-4]).
#: 10015: the webhook was deleted; Discord asks callers never to use it again after a 404,
#: so the channel is disabled. 50027 (invalid token; its status UNCONFIRMED) cannot recover
#: either, and repeated 401s count toward Discord's invalid-request ban.
CODES: Final[Mapping[int, StatusRule]] = {
    10015: StatusRule(_PERMANENT, Reason.GONE, disable_channel=True),
    50027: StatusRule(_PERMANENT, Reason.AUTH, disable_channel=True),
    50001: StatusRule(_PERMANENT, Reason.AUTH),  # missing access
    50006: StatusRule(_PERMANENT, Reason.CLIENT_ERROR),  # cannot send an empty message
    50035: StatusRule(_PERMANENT, Reason.CLIENT_ERROR),  # invalid form body
    40005: StatusRule(_PERMANENT, Reason.TOO_LARGE),  # request entity too large
}

#: A 2xx whose body is an error object with an unknown code: retried, never taken as sent.
ERROR_IN_2XX: Final = StatusRule(Verdict.RETRY, Reason.VENDOR_ERROR)
#: A 2xx other than 204 without the created message (`wait=true` promises it): retried.
NO_MESSAGE: Final = StatusRule(Verdict.RETRY, Reason.UNEXPECTED)
#: 429: Discord's throttle, whatever else the answer says.
THROTTLED: Final = StatusRule(Verdict.RATE_LIMITED, Reason.RATE_LIMITED)


class DiscordAdapter(ChatAdapter):
    spec: ClassVar[KindSpec] = KindSpec(
        kind="discord",
        description="A Discord webhook, sent plain content that never pings anyone.",
        fields=(
            webhook_url_field(
                "The webhook's full URL (https://discord.com/api/webhooks/{id}/{token}); "
                "a thread_id in its query is kept."
            ),
        ),
        flavour=Flavour.DISCORD_MARKDOWN.value,
        default_rate_per_min=DEFAULT_RATE_PER_MIN,
        max_text_chars=MAX_CONTENT_CHARS,
        example={"webhook_url": "https://discord.com/api/webhooks/123456789012345678/YOUR-TOKEN"},
    )

    def check_config(self, config: dict[str, Any]) -> dict[str, Any]:
        parts = urlsplit(config["webhook_url"])
        if not parts.netloc or not WEBHOOK_PATH.search(parts.path):
            raise ValidationError(
                "config.webhook_url", "must be the full URL …/api/webhooks/{id}/{token}"
            )
        return config

    def payload(self, channel: Channel, title: str, text: str) -> dict[str, Any]:
        return {"content": text, "allowed_mentions": dict(NO_MENTIONS)}

    def url(self, channel: Channel, now: datetime) -> str:
        """The configured URL with `wait=true`: without it Discord answers 204 even for a
        message it did not save [DC-1]. Other query parameters (`thread_id`) are kept."""
        return with_wait(str(channel.config[self.url_field]))

    def classify_response(self, response: HttpResponse, now: datetime) -> Outcome:
        return classify_answer(response, now)


def with_wait(url: str) -> str:
    """`url` with its query's `wait` set to true (the rest kept as written, fragment dropped)."""
    parts = urlsplit(url)
    kept = [p for p in parts.query.split("&") if p and p.partition("=")[0] != "wait"]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "&".join([*kept, "wait=true"]), ""))


def classify_answer(response: HttpResponse, now: datetime) -> Outcome:
    """Delivered on 200 with the created message (or 204); 429 is a rate limit with Discord's
    hint; otherwise the JSON `code` decides, then the HTTP status (shared rules)."""
    status, body = response.status, response.text
    document = _json(body)
    code = document.get("code")
    code = code if isinstance(code, int) and not isinstance(code, bool) else None
    if 200 <= status <= 299 and (status == 204 or "id" in document):
        return Delivered(provider_response=body or None)
    if status == 429:
        return outcome_for(
            THROTTLED,
            _rate_limit_error(response, document),
            retry_after_s=_retry_after(response, document, now),
            provider_response=body or None,
        )
    rule = CODES.get(code) if code is not None else None
    if rule is None and status <= 299:
        rule = ERROR_IN_2XX if code is not None else NO_MESSAGE
    if rule is None:
        rule = rule_for(status)
    return classify_by(rule, response, now, _error(status, document, body))


def _json(body: str) -> dict[str, Any]:
    try:
        document = json.loads(body)
    except ValueError:
        return {}
    return document if isinstance(document, dict) else {}


def _error(status: int, document: Mapping[str, Any], body: str) -> str:
    """`HTTP 404: Unknown Webhook (code 10015)`, plus the field errors of a 50035."""
    if "message" in document or "code" in document:
        words = str(document.get("message", ""))
        if "code" in document:
            words += f" (code {document['code']})"
        words = words.strip()
        if document.get("errors"):
            words += " " + json.dumps(document["errors"], separators=(",", ":"))
    else:
        words = " ".join(body.split())
    text = f"HTTP {status}: {words}" if words else f"HTTP {status}"
    return truncate_chars(text, MAX_ERROR_CHARS)


def _rate_limit_error(response: HttpResponse, document: Mapping[str, Any]) -> str:
    """The message, and the scope when Discord names it: a `global` limit holds every
    request from this host, not just this webhook."""
    words = str(document.get("message") or " ".join(response.text.split()) or "rate limited")
    scope = header(response.headers, "X-RateLimit-Scope")
    if document.get("global") is True or header(response.headers, "X-RateLimit-Global"):
        scope = "global"
    text = f"HTTP 429: {words}" + (f" (scope: {scope})" if scope else "")
    return truncate_chars(text, MAX_ERROR_CHARS)


def _retry_after(
    response: HttpResponse, document: Mapping[str, Any], now: datetime
) -> float | None:
    """Seconds to wait: the body's `retry_after` (a float), else the `Retry-After` header,
    else `X-RateLimit-Reset-After` [DC-3]."""
    value = document.get("retry_after")
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    for name in ("Retry-After", "X-RateLimit-Reset-After"):
        hint = parse_retry_after(header(response.headers, name), now)
        if hint is not None:
            return hint
    return None


__all__ = ["CODES", "MAX_CONTENT_CHARS", "DiscordAdapter", "classify_answer", "with_wait"]
