"""The `feishu` kind: a Feishu / Lark custom bot (v2 webhook), sent interactive cards whose
body is one markdown element (the flavour `feishu_markdown` is that element's dialect).

Owns the bot's limits (20,000 bytes of request body; 100 a minute and 5 a second per bot),
its optional signing (`timestamp` and `sign` in the JSON body, computed afresh for every
attempt) and its code table: business errors come as HTTP 200 with a non-zero `code`, and
some (9499) may come with a 4xx (channels.md §3). Imports tidings.channels (chat, http),
tidings.core and tidings.render.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar, Final
from urllib.parse import urlsplit

from tidings.channels.base import Message, Target
from tidings.channels.chat import ChatAdapter, fit_body, webhook_url_field
from tidings.channels.http import MAX_ERROR_CHARS, HttpResponse, classify
from tidings.channels.verdict import StatusRule, Verdict, outcome_for
from tidings.core.errors import ValidationError
from tidings.core.kinds import ConfigField, FieldType, KindSpec
from tidings.core.model import Channel, Event
from tidings.core.outcome import Delivered, Outcome, Reason, Retry
from tidings.core.text import truncate_chars
from tidings.render import Flavour

#: "Request body ≤ 20 KB": whether KB is 1000 or 1024 bytes is UNCONFIRMED, so the smaller.
#: Measured on the body as sent, signature fields included.
MAX_BODY_BYTES: Final = 20_000
#: 100 a minute and 5 a second per bot; 90 with a burst of 1 is one every 0.67 s.
DEFAULT_RATE_PER_MIN: Final = 90.0
#: The card header is a one-line title; a long event title is cut rather than eat the body.
MAX_TITLE_CHARS: Final = 128
#: The signature fields as measured before the real ones exist: a seconds timestamp has 10
#: digits (until 2286) and a base64 SHA-256 digest 44 characters.
_PLACEHOLDER_SIGNATURE: Final = {"timestamp": "0" * 10, "sign": "=" * 44}

_RETRY = Verdict.RETRY
_LIMITED = Verdict.RATE_LIMITED
_PERMANENT = Verdict.REJECT

#: code → classification (channels.md §3). 19021/19022/19024 are the bot's security checks
#: (signature or clock, IP whitelist, keywords): its settings must change, so permanent.
CODES: Final[Mapping[int, StatusRule]] = {
    11232: StatusRule(_LIMITED, Reason.RATE_LIMITED),  # frequency limited
    19021: StatusRule(_PERMANENT, Reason.AUTH),  # sign mismatch / timestamp off by > 1 h
    19022: StatusRule(_PERMANENT, Reason.AUTH),  # IP not allowed
    19024: StatusRule(_PERMANENT, Reason.AUTH),  # key words not found
    9499: StatusRule(_PERMANENT, Reason.CLIENT_ERROR),  # bad request (format, > 20 KB)
    19002: StatusRule(_PERMANENT, Reason.CLIENT_ERROR),  # bad format / no msg_type
    19036: StatusRule(_PERMANENT, Reason.TOO_LARGE),  # > 30 KB (server API; UNCONFIRMED here)
    # UNCONFIRMED: third-party code reads 19001 as an invalid or deleted token. Not treated
    # as "gone" (which would disable the channel) until a vendor source says so.
    19001: StatusRule(_PERMANENT, Reason.INVALID_TARGET),
}
#: A code not in the table (e.g. the UNCONFIRMED 2200 internal error): retried within
#: max_attempts rather than dropped at once.
UNKNOWN_CODE: Final = StatusRule(_RETRY, Reason.VENDOR_ERROR)
#: 11232 has no delay hint; ≥ 1 s, and ≥ 60 s when it repeats (channels.md). An adapter cannot
#: tell a repeat, and the channel's default rate already stays under the documented limits, so
#: an 11232 is system throttling (round hours): one conservative minute.
RETRY_AFTER_S: Final[Mapping[int, float]] = {11232: 60.0}
#: 9499 is documented as "Bad Request", but one integration reads it as a call-rate limit
#: (UNCONFIRMED): only when its msg says so is it treated as a rate limit.
RATE_WORDS: Final = re.compile(r"frequen|rate.?limit|exceeds the limit|too many", re.IGNORECASE)


def sign(secret: str, timestamp_s: int) -> str:
    """Base64 HMAC-SHA256 keyed with "timestamp\\nsecret" over an empty message."""
    key = f"{timestamp_s}\n{secret}".encode()
    return base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode("ascii")


class FeishuAdapter(ChatAdapter):
    spec: ClassVar[KindSpec] = KindSpec(
        kind="feishu",
        description="A Feishu / Lark custom bot (v2 webhook), sent markdown cards.",
        fields=(
            webhook_url_field(
                "The bot's full v2 webhook URL "
                "(https://open.feishu.cn/open-apis/bot/v2/hook/…, or open.larksuite.com)."
            ),
            ConfigField(
                "secret",
                FieldType.STRING,
                "The bot's signing secret, when its security setting is signature verification.",
                secret=True,
                label="Signing secret",
            ),
        ),
        flavour=Flavour.FEISHU_MARKDOWN.value,
        default_rate_per_min=DEFAULT_RATE_PER_MIN,
        max_body_bytes=MAX_BODY_BYTES,
        example={
            "webhook_url": "https://open.feishu.cn/open-apis/bot/v2/hook/YOUR-HOOK-ID",
            "secret": "your-signing-secret",
        },
    )

    def check_config(self, config: dict[str, Any]) -> dict[str, Any]:
        if "/bot/hook/" in urlsplit(config["webhook_url"]).path:
            raise ValidationError(
                "config.webhook_url",
                "is a legacy v1 bot address; use the v2 one (/open-apis/bot/v2/hook/…)",
            )
        return config

    # -- rendering: the whole body is measured ----------------------------------------------

    def payload(self, channel: Channel, title: str, text: str) -> dict[str, Any]:
        return {
            "msg_type": "interactive",
            "card": {
                "schema": "2.0",
                "header": {"title": {"tag": "plain_text", "content": title}},
                "body": {"elements": [{"tag": "markdown", "content": text}]},
            },
        }

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
        title = truncate_chars(title, MAX_TITLE_CHARS)
        signed = bool(channel.config.get("secret"))

        def encode(value: str) -> bytes:
            return _encode(self.payload(channel, title, value))

        def as_sent(value: str) -> bytes:
            body = encode(value)
            return _with_signature(body, _PLACEHOLDER_SIGNATURE) if signed else body

        text, measured = fit_body(as_sent, text, shorten_to)
        body = encode(text)
        return Message(target=target, payload=body, size=len(measured), title=title, text=text)

    # -- sending ------------------------------------------------------------------------------

    def body(self, channel: Channel, message: Message, now: datetime) -> bytes:
        secret = channel.config.get("secret")
        if not secret:
            return message.payload
        timestamp_s = int(now.timestamp())
        fields = {"timestamp": str(timestamp_s), "sign": sign(str(secret), timestamp_s)}
        return _with_signature(message.payload, fields)

    def classify_response(self, response: HttpResponse, now: datetime) -> Outcome:
        """2xx by its `code`; a 4xx carrying a known code (9499 may come with 400) by the code
        too; anything else by its HTTP status."""
        if 200 <= response.status < 300:
            return self.classify_ok(response, now)
        code = _code(response.text)
        if 400 <= response.status < 500 and code in CODES:
            return classify_code(response.text)
        return classify(response, now)

    def classify_ok(self, response: HttpResponse, now: datetime) -> Outcome:
        return classify_code(response.text)


def _encode(document: dict[str, Any]) -> bytes:
    return json.dumps(document, ensure_ascii=False).encode()


def _with_signature(payload: bytes, fields: Mapping[str, str]) -> bytes:
    """The body with `timestamp` and `sign` at its top level, next to `msg_type`."""
    return _encode({**json.loads(payload), **fields})


def _code(body: str) -> int | None:
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    if not isinstance(answer, dict):
        return None
    # `code` decides; the legacy `StatusCode` only when an old answer lacks `code`.
    code = answer.get("code", answer.get("StatusCode"))
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def classify_code(body: str) -> Outcome:
    """A Feishu answer body: delivered only on `code` 0."""
    code = _code(body)
    if code is None:
        words = " ".join(body.split())[:200]
        return Retry(Reason.UNEXPECTED, f"answer without a code: {words!r}", None, body)
    if code == 0:
        return Delivered(provider_response=body)
    answer = json.loads(body)
    msg = str(answer.get("msg", answer.get("StatusMessage", "")))
    error = truncate_chars(f"code {code}: {msg}", MAX_ERROR_CHARS)
    rule = CODES.get(code, UNKNOWN_CODE)
    if code == 9499 and RATE_WORDS.search(msg):
        rule = StatusRule(_LIMITED, Reason.RATE_LIMITED)
    return outcome_for(rule, error, provider_response=body, retry_after_s=RETRY_AFTER_S.get(code))


__all__ = ["CODES", "MAX_BODY_BYTES", "FeishuAdapter", "classify_code", "sign"]
