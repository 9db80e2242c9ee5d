"""The `dingtalk` kind: a DingTalk (钉钉) custom robot, sent markdown messages (title + text).

Owns the robot's limits (20,000 bytes of request body, 20 messages a minute then a 10-minute
block), its optional signing (加签: `timestamp` and `sign` in the URL, computed afresh for
every attempt) and its errcode table: business errors come as HTTP 200 with a non-zero
`errcode` (channels.md §2). Imports tidings.channels (chat, http), tidings.core, tidings.render.
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
from urllib.parse import parse_qs, quote, urlsplit

from tidings.channels.base import Message, SendContext, Target
from tidings.channels.chat import ChatAdapter, fit_body, webhook_url_field
from tidings.channels.http import MAX_ERROR_CHARS, HttpResponse
from tidings.channels.verdict import StatusRule, Verdict, outcome_for
from tidings.core.errors import ValidationError
from tidings.core.kinds import ConfigField, FieldType, KindSpec
from tidings.core.model import Channel, Event
from tidings.core.outcome import Delivered, Outcome, Reason, Reject, Retry
from tidings.core.text import truncate_chars
from tidings.render import Flavour

#: Observed server limit on the request body as sent (errcode 460101 beyond it); no per-field
#: limit is documented, so the whole JSON body is what is measured.
MAX_BODY_BYTES: Final = 20_000
#: 20 messages a minute per robot, and one more gets the robot blocked for 10 minutes: a wider
#: margin than for WeCom. 15 with a burst of 1 is one message every 4 s.
DEFAULT_RATE_PER_MIN: Final = 15.0
#: `markdown.title` is only the notification preview; no limit is documented, so a long event
#: title is cut here rather than eating the body's budget.
MAX_TITLE_CHARS: Final = 128

_RETRY = Verdict.RETRY
_LIMITED = Verdict.RATE_LIMITED
_PERMANENT = Verdict.REJECT

#: errcode → classification (channels.md §2). A token that does not exist (300001, and 300005
#: for an external group) means the robot is gone: the channel is disabled like on HTTP 410.
#: 310000 is a failed security check (keyword, signature, IP whitelist): the robot's settings
#: must change, so it is permanent — except its expired-timestamp variant, below.
CODES: Final[Mapping[int, StatusRule]] = {
    130101: StatusRule(_LIMITED, Reason.RATE_LIMITED),  # send too fast: 10-minute block
    -1: StatusRule(_RETRY, Reason.SERVER_ERROR),  # system busy
    310000: StatusRule(_PERMANENT, Reason.AUTH),
    300001: StatusRule(_PERMANENT, Reason.GONE, disable_channel=True),
    300005: StatusRule(_PERMANENT, Reason.GONE, disable_channel=True),
    460101: StatusRule(_PERMANENT, Reason.TOO_LARGE),
    101002: StatusRule(_PERMANENT, Reason.TOO_LARGE),  # older wording of 460101
    400402: StatusRule(_PERMANENT, Reason.CLIENT_ERROR),  # missing parameter
}
#: An errcode not in the table (e.g. the UNCONFIRMED 400013/410100/430101…): retried within
#: max_attempts rather than dropped at once.
UNKNOWN_CODE: Final = StatusRule(_RETRY, Reason.VENDOR_ERROR)
#: 130101 holds the robot for 10 minutes; the body's `wait` field is not understood, so unused.
RETRY_AFTER_S: Final[Mapping[int, float]] = {130101: 600.0}
#: 310000 "invalid timestamp" / 机器人发送签名过期: the signed time was over an hour off. Every
#: attempt signs afresh, so this is retried (a clock may get corrected) and fails after
#: max_attempts if it persists — channels.md lists it under "retry later".
EXPIRED_SIGNATURE: Final = re.compile(r"invalid timestamp|签名过期", re.IGNORECASE)
EXPIRED_RULE: Final = StatusRule(_RETRY, Reason.AUTH)
CLOCK_HINT: Final = " (signed afresh on retry; is this host's clock right?)"
UNSIGNED_HINT: Final = " (the robot requires signing: set config.secret)"


def sign(secret: str, timestamp_ms: int) -> str:
    """Base64 HMAC-SHA256 keyed with the secret over "timestamp\\nsecret" (not URL-encoded)."""
    message = f"{timestamp_ms}\n{secret}".encode()
    digest = hmac.new(secret.encode(), message, hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


class DingtalkAdapter(ChatAdapter):
    spec: ClassVar[KindSpec] = KindSpec(
        kind="dingtalk",
        description="A DingTalk (钉钉) custom robot, sent markdown messages.",
        fields=(
            webhook_url_field(
                "The robot's full webhook URL with its token "
                "(https://oapi.dingtalk.com/robot/send?access_token=…)."
            ),
            ConfigField(
                "secret",
                FieldType.STRING,
                "The robot's signing secret (SEC…), when its security setting is 加签 (signing).",
                secret=True,
                label="Signing secret",
            ),
        ),
        flavour=Flavour.DINGTALK_MARKDOWN.value,
        default_rate_per_min=DEFAULT_RATE_PER_MIN,
        max_body_bytes=MAX_BODY_BYTES,
        example={
            "webhook_url": "https://oapi.dingtalk.com/robot/send?access_token=YOUR-TOKEN",
            "secret": "SECyour-signing-secret",
        },
    )

    def check_config(self, config: dict[str, Any]) -> dict[str, Any]:
        query = parse_qs(urlsplit(config["webhook_url"]).query)
        if not any(query.get("access_token", [])):
            raise ValidationError(
                "config.webhook_url",
                "must carry the robot's access_token as ?access_token=… (copy the full URL)",
            )
        return config

    # -- rendering: the whole body is measured ----------------------------------------------

    def payload(self, channel: Channel, title: str, text: str) -> dict[str, Any]:
        return {"msgtype": "markdown", "markdown": {"title": title, "text": text}}

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

        def encode(value: str) -> bytes:
            return _encode(self.payload(channel, title, value))

        text, body = fit_body(encode, text, shorten_to)
        return Message(target=target, payload=body, size=len(body), title=title, text=text)

    # -- sending ------------------------------------------------------------------------------

    def url(self, channel: Channel, now: datetime) -> str:
        url = str(channel.config[self.url_field])
        secret = channel.config.get("secret")
        if not secret:
            return url
        timestamp_ms = int(now.timestamp() * 1000)
        signature = quote(sign(str(secret), timestamp_ms), safe="")
        joiner = "&" if urlsplit(url).query else "?"
        return f"{url}{joiner}timestamp={timestamp_ms}&sign={signature}"

    def classify_ok(self, response: HttpResponse, now: datetime) -> Outcome:
        return classify_errcode(response.text)

    async def send(self, ctx: SendContext, channel: Channel, message: Message) -> Outcome:
        outcome = await super().send(ctx, channel, message)
        if (
            isinstance(outcome, Retry)
            and outcome.reason is Reason.AUTH
            and not channel.config.get("secret")
        ):
            # Nothing was signed, so no clock is at fault: the robot requires signing.
            error = outcome.error.removesuffix(CLOCK_HINT) + UNSIGNED_HINT
            return Reject(Reason.AUTH, error, outcome.provider_response)
        return outcome


def _encode(document: dict[str, Any]) -> bytes:
    return json.dumps(document, ensure_ascii=False).encode()


def classify_errcode(body: str) -> Outcome:
    """A DingTalk answer body: delivered only on `errcode` 0."""
    try:
        answer = json.loads(body)
    except ValueError:
        answer = None
    code = answer.get("errcode") if isinstance(answer, dict) else None
    if isinstance(code, bool) or not isinstance(code, int):
        words = " ".join(body.split())[:200]
        return Retry(Reason.UNEXPECTED, f"HTTP 200 without an errcode: {words!r}", None, body)
    if code == 0:
        return Delivered(provider_response=body)
    assert isinstance(answer, dict)
    errmsg = str(answer.get("errmsg", ""))
    error = truncate_chars(f"errcode {code}: {errmsg}", MAX_ERROR_CHARS)
    if code == 310000 and EXPIRED_SIGNATURE.search(errmsg):
        return outcome_for(EXPIRED_RULE, error + CLOCK_HINT, provider_response=body)
    rule = CODES.get(code, UNKNOWN_CODE)
    return outcome_for(rule, error, provider_response=body, retry_after_s=RETRY_AFTER_S.get(code))


__all__ = ["CODES", "MAX_BODY_BYTES", "DingtalkAdapter", "classify_errcode", "sign"]
