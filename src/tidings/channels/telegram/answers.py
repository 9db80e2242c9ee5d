"""What the Bot API's answers mean (channels.md §7): its error table, the description words that
refine a reason, and a group's move to a supergroup (`Migrated`, a new address rather than a
failure). Imports tidings.channels (http, verdict) and tidings.core.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from tidings.channels.http import MAX_ERROR_CHARS, HttpResponse, classify, header, rule_for
from tidings.channels.verdict import StatusRule, Verdict, outcome_for
from tidings.core.outcome import Delivered, Outcome, Reason
from tidings.core.retry import parse_retry_after
from tidings.core.text import truncate_chars

#: HTTP status (equal to `error_code` in observed answers) → what it means for the message.
ERROR_CODES: Final[Mapping[int, StatusRule]] = {
    400: StatusRule(Verdict.REJECT, Reason.CLIENT_ERROR),
    401: StatusRule(Verdict.REJECT, Reason.AUTH),
    403: StatusRule(Verdict.REJECT, Reason.AUTH),
    404: StatusRule(Verdict.REJECT, Reason.INVALID_TARGET),
    429: StatusRule(Verdict.RATE_LIMITED, Reason.RATE_LIMITED),
}
#: Telegram warns that `error_code` may change; the description refines the reason.
DESCRIPTION_REASONS: Final[tuple[tuple[str, Reason], ...]] = (
    ("chat not found", Reason.INVALID_TARGET),
    ("bot was blocked by the user", Reason.INVALID_TARGET),
    ("bot was kicked", Reason.INVALID_TARGET),
    ("bot can't initiate conversation", Reason.INVALID_TARGET),
    ("user is deactivated", Reason.INVALID_TARGET),
    ("message is too long", Reason.TOO_LARGE),
    ("text is too long", Reason.TOO_LARGE),
    ("can't parse entities", Reason.CLIENT_ERROR),
)


@dataclass(frozen=True, slots=True)
class Migrated:
    """400 with `parameters.migrate_to_chat_id`: not a failure, a new address."""

    chat_id: int | str


@dataclass(frozen=True, slots=True)
class Answer:
    """The parts of a Bot API answer that classification reads."""

    ok: bool | None
    code: int | None
    description: str
    parameters: Mapping[str, Any] = field(default_factory=dict)


def read_answer(text: str) -> Answer:
    try:
        document = json.loads(text)
    except ValueError:
        return Answer(None, None, " ".join(text.split()))
    if not isinstance(document, dict):
        return Answer(None, None, " ".join(text.split()))
    code = document.get("error_code")
    parameters = document.get("parameters")
    return Answer(
        ok=document.get("ok") if isinstance(document.get("ok"), bool) else None,
        code=code if isinstance(code, int) and not isinstance(code, bool) else None,
        description=str(document.get("description") or ""),
        parameters=parameters if isinstance(parameters, dict) else {},
    )


def classify_answer(response: HttpResponse, now: datetime) -> Outcome | Migrated:
    """HTTP status first, then the body: a 200 is delivered only when it says `ok: true`."""
    answer = read_answer(response.text)
    body = response.text or None
    ok_status = 200 <= response.status <= 299
    if ok_status and answer.ok is True:
        return Delivered(provider_response=body)
    code = response.status if not ok_status else answer.code
    error = _error(code if code is not None else response.status, answer)
    new_chat = answer.parameters.get("migrate_to_chat_id")
    if isinstance(new_chat, int | str) and not isinstance(new_chat, bool) and str(new_chat):
        return Migrated(new_chat)
    hint = _retry_after(answer, response, now)
    rule = ERROR_CODES.get(code) if code is not None else None
    if rule is not None:
        rule = rule._replace(reason=_refine(rule.reason, answer.description))
    elif ok_status:
        # A 200 that does not say ok: never recorded as delivered.
        reason = Reason.VENDOR_ERROR if answer.ok is False else Reason.UNEXPECTED
        what = "ok: false" if answer.ok is False else "no ok: true"
        rule, error = (
            StatusRule(Verdict.RETRY, reason),
            f"HTTP {response.status} with {what}: {error}",
        )
    else:
        rule = rule_for(response.status)
        if rule.reason is Reason.REDIRECT:
            return classify(response, now)
    return outcome_for(rule, error, provider_response=body, retry_after_s=hint)


def _refine(reason: Reason, description: str) -> Reason:
    lowered = description.lower()
    return next((r for text, r in DESCRIPTION_REASONS if text in lowered), reason)


def _retry_after(answer: Answer, response: HttpResponse, now: datetime) -> float | None:
    value = answer.parameters.get("retry_after")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return parse_retry_after(str(int(value)), now)
    return parse_retry_after(header(response.headers, "Retry-After"), now)


def _error(code: int, answer: Answer) -> str:
    text = f"Telegram {code}: {answer.description}" if answer.description else f"HTTP {code}"
    return truncate_chars(text, MAX_ERROR_CHARS)


__all__ = ["DESCRIPTION_REASONS", "ERROR_CODES", "Answer", "Migrated", "classify_answer"]
