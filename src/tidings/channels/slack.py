"""The `slack` kind: a Slack incoming webhook, sent one Block Kit section of mrkdwn text.

Owns the webhook's limits (3000 characters of section text, about one message a second) and
its answer table: success is HTTP 200 with the plain body `ok`; errors are short plain-text
codes (`no_service`, `invalid_payload`, …) whose meaning wins over the HTTP status
(channels.md §4). Imports tidings.channels (chat, http), tidings.core and tidings.render.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar, Final
from urllib.parse import urlsplit

from tidings.channels.chat import ChatAdapter, webhook_url_field
from tidings.channels.http import MAX_ERROR_CHARS, HttpResponse, classify, classify_by
from tidings.channels.verdict import StatusRule, Verdict
from tidings.core.errors import ValidationError
from tidings.core.kinds import KindSpec
from tidings.core.model import Channel
from tidings.core.outcome import Delivered, Outcome, Reason, Retry
from tidings.core.text import truncate_chars
from tidings.render import Flavour, default_renderer

#: A section block's `text` holds at most 3000 characters [SL-5]. Each message is ONE section
#: block, so this is the limit of the whole rendered text; a digest that needs more is cut
#: into numbered messages (never into several blocks: `text` and combined blocks have their
#: own, less certain limits).
MAX_SECTION_CHARS: Final = 3000
#: The notification fallback (`text`) is the title alone, kept well under the 40,000
#: characters Slack allows for `text` even after mrkdwn escaping grows it.
MAX_FALLBACK_CHARS: Final = 1000
#: About one message a second per webhook, short bursts allowed [SL-3]; 50 a minute with a
#: burst of 1 spaces sends 1.2 s apart.
DEFAULT_RATE_PER_MIN: Final = 50.0
SUCCESS_BODY: Final = "ok"

_RETRY = Verdict.RETRY
_PERMANENT = Verdict.REJECT

#: Error body → classification, whatever the HTTP status that came with it (channels.md §4).
#: `no_service` (webhook revoked or removed) and `channel_is_archived` (410) mean no message
#: can reach this webhook again: the channel is disabled. `channel_not_found` fails each
#: message but keeps the channel, as a channel can be restored and each failure is visible.
CODES: Final[Mapping[str, StatusRule]] = {
    "invalid_payload": StatusRule(_PERMANENT, Reason.CLIENT_ERROR),
    "invalid_blocks": StatusRule(_PERMANENT, Reason.CLIENT_ERROR),
    "missing_text_or_fallback_or_attachments": StatusRule(_PERMANENT, Reason.CLIENT_ERROR),
    "user_not_found": StatusRule(_PERMANENT, Reason.INVALID_TARGET),
    "action_prohibited": StatusRule(_PERMANENT, Reason.AUTH),
    "channel_not_found": StatusRule(_PERMANENT, Reason.INVALID_TARGET),
    "no_service": StatusRule(_PERMANENT, Reason.GONE, disable_channel=True),
    "channel_is_archived": StatusRule(_PERMANENT, Reason.GONE, disable_channel=True),
    "rollup_error": StatusRule(_RETRY, Reason.SERVER_ERROR),
    # Named by Slack, HTTP status UNCONFIRMED: classified by what the code says.
    "invalid_token": StatusRule(_PERMANENT, Reason.AUTH),
    "no_team": StatusRule(_PERMANENT, Reason.INVALID_TARGET),
    "team_disabled": StatusRule(_PERMANENT, Reason.AUTH),
    "posting_to_general_channel_denied": StatusRule(_PERMANENT, Reason.AUTH),
    "too_many_attachments": StatusRule(_PERMANENT, Reason.CLIENT_ERROR),
}


class SlackAdapter(ChatAdapter):
    spec: ClassVar[KindSpec] = KindSpec(
        kind="slack",
        description="A Slack incoming webhook, sent one Block Kit section of mrkdwn.",
        fields=(
            webhook_url_field(
                "The incoming webhook's full URL (https://hooks.slack.com/services/T…/B…/…)."
            ),
        ),
        flavour=Flavour.SLACK_MRKDWN.value,
        default_rate_per_min=DEFAULT_RATE_PER_MIN,
        max_text_chars=MAX_SECTION_CHARS,
        example={"webhook_url": "https://hooks.slack.com/services/T00000000/B00000000/YOUR-TOKEN"},
    )

    def check_config(self, config: dict[str, Any]) -> dict[str, Any]:
        parts = urlsplit(config["webhook_url"])
        if not parts.netloc or not parts.path.strip("/"):
            # The path is the webhook's key; the message never repeats the URL.
            raise ValidationError(
                "config.webhook_url", "must be the full webhook URL (…/services/T…/B…/…)"
            )
        return config

    def payload(self, channel: Channel, title: str, text: str) -> dict[str, Any]:
        fallback = default_renderer().escape(
            self.flavour, truncate_chars(title, MAX_FALLBACK_CHARS)
        )
        return {
            "text": fallback,
            "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}],
        }

    def classify_response(self, response: HttpResponse, now: datetime) -> Outcome:
        return classify_answer(response, now)


def error_code(body: str) -> str:
    """The error code of an answer: the plain body, or `error` of a JSON body."""
    text = body.strip()
    if text.startswith("{"):
        try:
            document = json.loads(text)
        except ValueError:
            return text
        if isinstance(document, dict) and isinstance(document.get("error"), str):
            return str(document["error"])
    return text


def classify_answer(response: HttpResponse, now: datetime) -> Outcome:
    """Delivered only on 200 `ok`; a known error code decides over the status (a 200
    carrying `no_service` is a failure); anything else falls back to the shared rules."""
    body = response.text
    code = error_code(body)
    ok = 200 <= response.status <= 299
    if ok and code == SUCCESS_BODY:
        return Delivered(provider_response=body)
    rule = CODES.get(code)
    if rule is None:
        if ok:
            words = " ".join(body.split())[:200]
            error = f"HTTP {response.status} without {SUCCESS_BODY!r}: {words!r}"
            return Retry(Reason.UNEXPECTED, error, provider_response=body or None)
        return classify(response, now)  # 429 + Retry-After, 5xx, other 4xx
    error = truncate_chars(f"HTTP {response.status}: {code}", MAX_ERROR_CHARS)
    return classify_by(rule, response, now, error)


__all__ = ["CODES", "MAX_SECTION_CHARS", "SlackAdapter", "classify_answer"]
