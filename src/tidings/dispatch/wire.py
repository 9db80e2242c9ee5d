"""Outcomes and messages as JSON, for remote workers that lease over HTTP (W4)."""

from __future__ import annotations

import base64
from dataclasses import asdict
from datetime import datetime
from typing import Any

from tidings.channels.base import Message, Target
from tidings.core.errors import ValidationError
from tidings.core.model import Channel, rfc3339
from tidings.core.outcome import (
    Delivered,
    Outcome,
    Partial,
    RateLimited,
    Reason,
    Reject,
    Retry,
    attempt_status,
)
from tidings.core.states import Mode

STATUSES = ("delivered", "retryable", "permanent", "rate_limited", "partial")


def message_to_json(message: Message) -> dict[str, Any]:
    return {
        "message_id": message.target.message_id,
        "delivery_ids": list(message.target.delivery_ids),
        "batch_id": message.target.batch_id,
        "payload_b64": base64.b64encode(message.payload).decode(),
        "size": message.size,
        "content_type": message.content_type,
        "title": message.title,
        "text": message.text,
    }


def message_from_json(doc: dict[str, Any]) -> Message:
    return Message(
        target=Target(
            tuple(int(i) for i in doc["delivery_ids"]),
            doc.get("batch_id"),
            message_id=str(doc["message_id"]),
        ),
        payload=base64.b64decode(doc["payload_b64"]),
        size=int(doc["size"]),
        content_type=str(doc["content_type"]),
        title=str(doc.get("title", "")),
        text=str(doc.get("text", "")),
    )


def outcome_to_json(outcome: Outcome) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "status": attempt_status(outcome).value,
        "provider_response": outcome.provider_response,
    }
    if not isinstance(outcome, Delivered):
        doc["error"] = outcome.error
    if isinstance(outcome, Retry | Reject):
        doc["reason"] = outcome.reason.value
    if isinstance(outcome, Retry | RateLimited):
        doc["retry_after_s"] = outcome.retry_after_s
    if isinstance(outcome, Reject):
        doc["disable_channel"] = outcome.disable_channel
    return doc


def outcome_from_json(doc: dict[str, Any], where: str) -> Outcome:
    status = doc.get("status")
    error = str(doc.get("error") or "")
    response = doc.get("provider_response")
    response = None if response is None else str(response)
    reason = _reason(doc.get("reason"), where)
    hint = doc.get("retry_after_s")
    hint = None if hint is None else float(hint)
    match status:
        case "delivered":
            return Delivered(provider_response=response)
        case "retryable":
            return Retry(reason or Reason.UNEXPECTED, error, hint, response)
        case "permanent":
            disable = bool(doc.get("disable_channel", False))
            return Reject(reason or Reason.CLIENT_ERROR, error, response, disable)
        case "rate_limited":
            return RateLimited(error, hint, response)
        case "partial":
            return Partial(error, response)
    raise ValidationError(f"{where}.status", f"must be one of {', '.join(STATUSES)}")


def _reason(value: object, where: str) -> Reason | None:
    if value is None:
        return None
    try:
        return Reason(str(value))
    except ValueError:
        raise ValidationError(f"{where}.reason", "unknown reason") from None


def channel_to_json(channel: Channel) -> dict[str, Any]:
    """The whole channel, secrets included: only for a worker holding an admin token."""
    doc = asdict(channel)
    doc["mode"] = channel.mode.value
    doc["created_at"] = rfc3339(channel.created_at)
    doc["updated_at"] = rfc3339(channel.updated_at)
    return doc


def channel_from_json(doc: dict[str, Any]) -> Channel:
    values = dict(doc)
    values["mode"] = Mode(values["mode"])
    values["created_at"] = datetime.fromisoformat(values["created_at"])
    values["updated_at"] = datetime.fromisoformat(values["updated_at"])
    return Channel(**values)
