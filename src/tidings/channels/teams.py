"""The `teams` kind: Microsoft Teams through a Power Automate "Workflows" webhook, sent an
Adaptive Card with one markdown TextBlock (the retired O365 connector answers are understood).

Owns the size rule (about 28 KB per message, measured here as the UTF-8 bytes of the whole
POST body), the default rate, and the answer table: Workflows answers 202 with an empty body
(the flow run was queued, which is all the caller learns); the legacy connector answers 200
with a message count (`1`) on success and 200 with error text otherwise (channels.md §5).
Imports tidings.channels (chat, http), tidings.core and tidings.render.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar, Final
from urllib.parse import urlsplit

from tidings.channels.base import Message, Target
from tidings.channels.chat import ChatAdapter, webhook_url_field
from tidings.channels.http import MAX_ERROR_CHARS, HttpResponse, classify_by, rule_for
from tidings.channels.verdict import StatusRule, Verdict, outcome_for
from tidings.core.errors import ValidationError
from tidings.core.kinds import KindSpec
from tidings.core.model import Channel, Event
from tidings.core.outcome import Delivered, Outcome, Reason
from tidings.core.text import truncate_chars
from tidings.render import Flavour

#: "About 28 KB" per message, counting every element [TM-1][TM-2]; the exact count is
#: UNCONFIRMED. The whole UTF-8 POST body (card, envelope, JSON escapes) is measured — more
#: than Teams can count — and 1,000 bytes are kept back for what the flow adds, as clients
#: that cut at 27 KB do [TM-8].
MAX_BODY_BYTES: Final = 27_000
#: Teams throttles incoming webhooks above 4 requests a second [TM-1]; Workflows' own limits
#: are UNCONFIRMED and the flow's bot posts into one channel, so the default stays far below:
#: one message every 2 s.
DEFAULT_RATE_PER_MIN: Final = 30.0
CARD_CONTENT_TYPE: Final = "application/vnd.microsoft.card.adaptive"
CARD_SCHEMA: Final = "http://adaptivecards.io/schemas/adaptive-card.json"
CARD_VERSION: Final = "1.4"
ACCEPTED: Final = "accepted (HTTP 202): the flow run was queued; Teams reports no later failure"
EMPTY_SUCCESS: Final = "accepted (HTTP {status}, empty body)"

_PERMANENT = Verdict.REJECT
_LIMITED = Verdict.RATE_LIMITED

#: HTTP status → classification (channels.md §5). Only 413 and 429 are documented; the
#: statuses for a malformed body (400), a bad `sig` (401/403) and a deleted flow (404) are
#: UNCONFIRMED, and classified by what they would mean. Other statuses follow the shared
#: rules (5xx retried, other 4xx permanent, 3xx never followed).
STATUSES: Final[Mapping[int, StatusRule]] = {
    400: StatusRule(_PERMANENT, Reason.CLIENT_ERROR),
    401: StatusRule(_PERMANENT, Reason.AUTH),
    403: StatusRule(_PERMANENT, Reason.AUTH),
    404: StatusRule(_PERMANENT, Reason.INVALID_TARGET),
    413: StatusRule(_PERMANENT, Reason.TOO_LARGE),
    429: StatusRule(_LIMITED, Reason.RATE_LIMITED),
}
#: The legacy connector wraps Teams' own status in a 200 body [TM-11]:
#: "Webhook message delivery failed with error: Microsoft Teams endpoint returned HTTP error
#: 429 with ContextId …".
CONNECTOR_ERROR: Final = re.compile(r"returned HTTP error (\d{3})")
#: A 200 from the connector is a success only when its body is a number (messages posted)
#: [TM-11] — or, as observed since 2023 (MicrosoftDocs/msteams-docs#7852, not in
#: channels.md), a JSON echo of an HTTP response with `"isSuccessStatusCode": true`.
CONNECTOR_SUCCESS: Final = re.compile(r"\d+")
#: A 200 that is neither: the connector's "retry-able" failures come this way [TM-11].
CONNECTOR_OTHER: Final = StatusRule(Verdict.RETRY, Reason.VENDOR_ERROR)


def _encode(document: dict[str, Any]) -> bytes:
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()


class TeamsAdapter(ChatAdapter):
    spec: ClassVar[KindSpec] = KindSpec(
        kind="teams",
        description=(
            "Microsoft Teams through a Power Automate Workflows webhook, sent an Adaptive Card."
        ),
        fields=(
            webhook_url_field(
                "The workflow's full HTTP POST URL, with its sig "
                "(…/workflows/…/triggers/manual/paths/invoke?…&sig=…)."
            ),
        ),
        flavour=Flavour.TEAMS_MARKDOWN.value,
        default_rate_per_min=DEFAULT_RATE_PER_MIN,
        max_body_bytes=MAX_BODY_BYTES,
        example={
            "webhook_url": "https://example.westeurope.logic.azure.com/workflows/ID/triggers/manual/paths/invoke?sig=YOUR-SIG"
        },
    )

    def check_config(self, config: dict[str, Any]) -> dict[str, Any]:
        parts = urlsplit(config["webhook_url"])
        if not parts.netloc or not parts.path.strip("/"):
            raise ValidationError(
                "config.webhook_url", "must be the workflow's full HTTP POST URL (with its sig)"
            )
        return config

    def payload(self, channel: Channel, title: str, text: str) -> dict[str, Any]:
        card = {
            "$schema": CARD_SCHEMA,
            "type": "AdaptiveCard",
            "version": CARD_VERSION,
            "body": [{"type": "TextBlock", "text": text, "wrap": True}],
        }
        attachment = {"contentType": CARD_CONTENT_TYPE, "contentUrl": None, "content": card}
        return {"type": "message", "attachments": [attachment]}

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
        """Sized as the bytes of the whole body: the limit is on the message, not its text."""
        title, text = self.text(channel, target, events, part, parts)
        body = _encode(self.payload(channel, title, text))
        if shorten_to is not None and len(body) > shorten_to:
            text = self._fit(channel, title, text, shorten_to)
            body = _encode(self.payload(channel, title, text))
        return Message(target=target, payload=body, size=len(body), title=title, text=text)

    def _fit(self, channel: Channel, title: str, text: str, limit: int) -> str:
        """The longest marked prefix of `text` whose body fits `limit`: JSON escapes make
        bytes per character vary, so the cut is searched (about 15 encodes)."""
        low, high = 0, len(text)
        while low < high:
            mid = (low + high + 1) // 2
            if len(_encode(self.payload(channel, title, truncate_chars(text, mid)))) <= limit:
                low = mid
            else:
                high = mid - 1
        return truncate_chars(text, low)

    def classify_response(self, response: HttpResponse, now: datetime) -> Outcome:
        return classify_answer(response, now)


def classify_answer(response: HttpResponse, now: datetime) -> Outcome:
    """Workflows: 202 is accepted. Connector: 200 is delivered only with a message count."""
    status, body = response.status, response.text
    if status == 202:
        return Delivered(provider_response=body or ACCEPTED)
    if 200 <= status <= 299:
        return _classify_200(response)
    rule = STATUSES.get(status) or rule_for(status)
    return classify_by(rule, response, now, _error(status, _words(body)))


def _classify_200(response: HttpResponse) -> Outcome:
    text = response.text.strip()
    if not text:
        return Delivered(provider_response=EMPTY_SUCCESS.format(status=response.status))
    if CONNECTOR_SUCCESS.fullmatch(text) or _says_success(text):
        return Delivered(provider_response=response.text)
    wrapped = CONNECTOR_ERROR.search(text)
    if wrapped is None:
        rule = CONNECTOR_OTHER
    else:
        inner = int(wrapped.group(1))
        rule = STATUSES.get(inner) or rule_for(inner)
    error = _error(response.status, _words(text))
    return outcome_for(rule, error, provider_response=response.text)


def _says_success(text: str) -> bool:
    try:
        document = json.loads(text)
    except ValueError:
        return False
    return isinstance(document, dict) and document.get("isSuccessStatusCode") is True


def _words(body: str) -> str:
    """The receiver's words: a Logic Apps JSON error as `code: message`, else the text."""
    try:
        document = json.loads(body)
    except ValueError:
        document = None
    error = document.get("error") if isinstance(document, dict) else None
    if isinstance(error, dict) and "code" in error:
        return f"{error['code']}: {error.get('message', '')}"
    return " ".join(body.split())


def _error(status: int, words: str) -> str:
    return truncate_chars(f"HTTP {status}: {words}" if words else f"HTTP {status}", MAX_ERROR_CHARS)


__all__ = ["MAX_BODY_BYTES", "STATUSES", "TeamsAdapter", "classify_answer"]
