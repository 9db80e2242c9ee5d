"""The `wecom` kind: a WeCom (企业微信) group robot, sent markdown (v1) messages.

Owns the robot's limits (4096 UTF-8 bytes of `markdown.content`, 20 messages a minute per key)
and its errcode table: WeCom answers business errors with HTTP 200, so a send is delivered
only when `errcode == 0` (channels.md §1). Imports tidings.channels (chat, http), tidings.core
and tidings.render.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar, Final
from urllib.parse import parse_qs, urlsplit

from tidings.channels.chat import ChatAdapter, webhook_url_field
from tidings.channels.http import MAX_ERROR_CHARS, HttpResponse
from tidings.channels.verdict import StatusRule, Verdict, outcome_for
from tidings.core.errors import ValidationError
from tidings.core.kinds import KindSpec
from tidings.core.model import Channel
from tidings.core.outcome import Delivered, Outcome, Reason, Retry
from tidings.core.text import truncate_chars
from tidings.render import Flavour

#: Documented: `markdown.content` ≤ 4096 bytes of UTF-8; longer is rejected (40058), not cut.
MAX_CONTENT_BYTES: Final = 4096
#: The robot takes 20 messages a minute per key; 18 with a burst of 1 spreads sends evenly
#: (one every 3.3 s), so no 60 s window ever holds more than 19 of ours.
DEFAULT_RATE_PER_MIN: Final = 18.0

_RETRY = Verdict.RETRY
_LIMITED = Verdict.RATE_LIMITED
_PERMANENT = Verdict.REJECT

#: errcode → how the answer is classified (channels.md §1, WeCom's global error page).
#: 93000 (webhook invalid / robot removed from the group) and 93008 (robot not in the group)
#: mean the webhook is gone: no message can ever reach it, so the channel is disabled like an
#: HTTP 410. 93004 (robot disabled) is a switch a group admin can flip back: each message
#: fails visibly and can be resent, and the channel keeps working once the robot is back.
CODES: Final[Mapping[int, StatusRule]] = {
    45009: StatusRule(_LIMITED, Reason.RATE_LIMITED),
    -1: StatusRule(_RETRY, Reason.SERVER_ERROR),  # system busy
    45033: StatusRule(_RETRY, Reason.RATE_LIMITED),  # concurrent-call limit: back off
    93000: StatusRule(_PERMANENT, Reason.GONE, disable_channel=True),
    93008: StatusRule(_PERMANENT, Reason.GONE, disable_channel=True),
    93004: StatusRule(_PERMANENT, Reason.INVALID_TARGET),
    93017: StatusRule(_PERMANENT, Reason.CLIENT_ERROR),  # request content empty
    40008: StatusRule(_PERMANENT, Reason.CLIENT_ERROR),  # invalid msgtype
    40058: StatusRule(_PERMANENT, Reason.CLIENT_ERROR),  # invalid parameter / over length
    44004: StatusRule(_PERMANENT, Reason.CLIENT_ERROR),  # empty text content
    45002: StatusRule(_PERMANENT, Reason.TOO_LARGE),  # content size over limit
}
#: An errcode not in the table: retried (within max_attempts) rather than dropped at once.
UNKNOWN_CODE: Final = StatusRule(_RETRY, Reason.VENDOR_ERROR)
#: 45009 carries no delay; the block lasts one window of the per-minute limit.
RETRY_AFTER_S: Final[Mapping[int, float]] = {45009: 60.0}


class WecomAdapter(ChatAdapter):
    spec: ClassVar[KindSpec] = KindSpec(
        kind="wecom",
        description="A WeCom (企业微信) group robot, sent markdown messages.",
        fields=(
            webhook_url_field(
                "The robot's full webhook URL with its key "
                "(https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=…)."
            ),
        ),
        flavour=Flavour.WECOM_MARKDOWN.value,
        default_rate_per_min=DEFAULT_RATE_PER_MIN,
        max_text_bytes=MAX_CONTENT_BYTES,
        example={
            "webhook_url": "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=YOUR-ROBOT-KEY"
        },
    )

    def check_config(self, config: dict[str, Any]) -> dict[str, Any]:
        query = parse_qs(urlsplit(config["webhook_url"]).query)
        if not any(query.get("key", [])):
            # The message never repeats the URL: its key is the robot's only credential.
            raise ValidationError(
                "config.webhook_url", "must carry the robot's key as ?key=… (copy the full URL)"
            )
        return config

    def payload(self, channel: Channel, title: str, text: str) -> dict[str, Any]:
        return {"msgtype": "markdown", "markdown": {"content": text}}

    def classify_ok(self, response: HttpResponse, now: datetime) -> Outcome:
        return classify_errcode(response.text)


def classify_errcode(body: str) -> Outcome:
    """A WeCom answer body: delivered only on `errcode` 0 (never decided on `errmsg`)."""
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
    error = truncate_chars(f"errcode {code}: {answer.get('errmsg', '')}", MAX_ERROR_CHARS)
    rule = CODES.get(code, UNKNOWN_CODE)
    return outcome_for(rule, error, provider_response=body, retry_after_s=RETRY_AFTER_S.get(code))


__all__ = ["CODES", "MAX_CONTENT_BYTES", "WecomAdapter", "classify_errcode"]
