"""The channel form: the config fields of each kind (DESIGN §4 "Shapes"), the policy fields
every channel has, and the translation between a channel and the form's text values.

Secrets are write-only: the form never carries them back out; an empty secret input on an
edit keeps the stored value (sent to the service as the redaction mask, which
`Service.update_channel` swaps back for the stored secret).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tidings.core.errors import ValidationError
from tidings.core.model import Channel, Severity
from tidings.core.redact import MASK, mask
from tidings.core.states import Mode


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    label: str
    #: text | url | number | select | lines (a list, one per line) | headers | json
    input: str = "text"
    required: bool = False
    options: tuple[str, ...] = ()
    help: str = ""


_URL = Field("webhook_url", "Webhook URL", "url", required=True)
_SIGNING = Field("secret", "Signing secret", help="Optional: the robot's 加签 secret")

KIND_FIELDS: dict[str, tuple[Field, ...]] = {
    "webhook": (
        Field("url", "URL", "url", required=True),
        Field("secret", "Signing secret", help="Optional, whsec_… (Standard Webhooks)"),
        Field("headers", "Extra headers", "headers", help="One `Name: value` per line"),
    ),
    "wecom": (_URL,),
    "slack": (_URL,),
    "teams": (_URL,),
    "discord": (_URL,),
    "dingtalk": (_URL, _SIGNING),
    "feishu": (_URL, _SIGNING),
    "telegram": (
        Field("bot_token", "Bot token", required=True),
        Field("chat_id", "Chat id", required=True),
        Field("api_base", "API base URL", "url", help="Optional; default the Bot API"),
    ),
    "email": (
        Field("host", "SMTP host", required=True),
        Field("port", "Port", "number", required=True),
        Field("security", "Security", "select", True, ("starttls", "tls", "none")),
        Field("username", "Username"),
        Field("password", "Password"),
        Field("sender", "Sender", required=True),
        Field("recipients", "Recipients", "lines", True, help="One address per line"),
    ),
    "apprise": (Field("urls", "Apprise URLs", "lines", True, help="One URL per line"),),
    "inbox": (),
}
#: A kind without a known shape (a plugin) edits its config as one JSON object.
JSON_CONFIG = (Field("config", "Config (JSON object)", "json"),)

MODES = tuple(m.value for m in Mode)
SEVERITIES = tuple(s.value for s in Severity)
FLOATS = ("digest_period_s", "rate_per_min", "retry_backoff_s", "timeout_s")
INTS = ("rate_burst", "max_attempts")
#: Policy fields whose empty input means "none" rather than "unchanged".
NULLABLE = ("max_age_s", "tenant")


def fields_for(kind: str) -> tuple[Field, ...]:
    return KIND_FIELDS.get(kind, JSON_CONFIG)


def values_of(channel: Channel, secrets: tuple[str, ...]) -> dict[str, str]:
    """A stored channel as the form's text values (secret inputs stay empty)."""
    values = {
        "name": channel.name,
        "mode": channel.mode.value,
        "digest_period_s": f"{channel.digest_period_s:g}",
        "rate_per_min": f"{channel.rate_per_min:g}",
        "rate_burst": str(channel.rate_burst),
        "max_attempts": str(channel.max_attempts),
        "retry_backoff_s": f"{channel.retry_backoff_s:g}",
        "timeout_s": f"{channel.timeout_s:g}",
        "max_age_s": "" if channel.max_age_s is None else f"{channel.max_age_s:g}",
        "tenant": channel.tenant or "",
        "filter_kinds": ", ".join(channel.filter.get("kinds", [])),
        "filter_min_severity": str(channel.filter.get("min_severity", "")),
        "filter_labels": "\n".join(f"{k}={v}" for k, v in channel.filter.get("labels", {}).items()),
    }
    for field in fields_for(channel.kind):
        if field.input == "json":
            values[field.name] = json.dumps(_redacted(channel.config, secrets), indent=2)
        elif field.name not in secrets:
            values[field.name] = _text(field, channel.config.get(field.name))
    return values


def placeholders(channel: Channel | None, secrets: tuple[str, ...]) -> dict[str, str]:
    """What an edit form shows in an empty secret input: the stored value, redacted."""
    if channel is None:
        return {}
    shown: dict[str, str] = {}
    for name in secrets:
        value = channel.config.get(name)
        if isinstance(value, str) and value:
            shown[name] = mask(value) + " (stored; leave empty to keep)"
        elif value:
            shown[name] = f"{MASK} (stored; leave empty to keep)"
    return shown


def spec_from_form(
    kind: str, form: dict[str, str], secrets: tuple[str, ...], stored: Channel | None
) -> dict[str, Any]:
    """The service's channel fields from a posted form; a bad value raises ValidationError."""
    fields: dict[str, Any] = {"name": form.get("name", ""), "mode": form.get("mode", "realtime")}
    for name in (*FLOATS, "max_age_s"):
        if form.get(name, ""):
            fields[name] = _number(name, form[name], float)
    for name in INTS:
        if form.get(name, ""):
            fields[name] = _number(name, form[name], int)
    fields["tenant"] = form.get("tenant") or None
    fields.setdefault("max_age_s", None)
    fields["filter"] = _filter(form)
    fields["config"] = _config(kind, form, secrets, stored)
    return fields


def _config(
    kind: str, form: dict[str, str], secrets: tuple[str, ...], stored: Channel | None
) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for field in fields_for(kind):
        raw = form.get(field.name, "")
        if field.input == "json":
            return _json_object(raw)
        if not raw:
            cleared = form.get(f"clear_{field.name}") == "1"
            if field.name in secrets and stored and field.name in stored.config and not cleared:
                config[field.name] = MASK  # keep the stored secret
            continue
        config[field.name] = _value(field, raw)
    return config


def _value(field: Field, raw: str) -> Any:
    if field.input == "number":
        return _number(f"config.{field.name}", raw, int)
    if field.input == "lines":
        return [line.strip() for line in raw.splitlines() if line.strip()]
    if field.input == "headers":
        headers: dict[str, str] = {}
        for line in raw.splitlines():
            if not line.strip():
                continue
            name, sep, value = line.partition(":")
            if not sep or not name.strip():
                raise ValidationError(f"config.{field.name}", f"not `Name: value`: {line!r}")
            headers[name.strip()] = value.strip()
        return headers
    return raw


def _text(field: Field, value: Any) -> str:
    if value is None:
        return ""
    if field.input == "lines" and isinstance(value, list):
        return "\n".join(str(v) for v in value)
    if field.input == "headers" and isinstance(value, dict):
        return "\n".join(f"{k}: {v}" for k, v in value.items())
    return str(value)


def _filter(form: dict[str, str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    kinds = [k.strip() for k in form.get("filter_kinds", "").split(",") if k.strip()]
    if kinds:
        found["kinds"] = kinds
    if form.get("filter_min_severity"):
        found["min_severity"] = form["filter_min_severity"]
    labels: dict[str, str] = {}
    for line in form.get("filter_labels", "").splitlines():
        if line.strip():
            key, sep, value = line.partition("=")
            if not sep or not key.strip():
                raise ValidationError("filter.labels", f"not `key=value`: {line!r}")
            labels[key.strip()] = value.strip()
    if labels:
        found["labels"] = labels
    return found


def _number(name: str, raw: str, kind: type[int] | type[float]) -> int | float:
    try:
        return kind(raw)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise ValidationError(name, f"must be {what}") from None


def _json_object(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except ValueError as error:
        raise ValidationError("config", f"not JSON: {error}") from None
    if not isinstance(value, dict):
        raise ValidationError("config", "must be a JSON object")
    return value


def _redacted(config: dict[str, Any], secrets: tuple[str, ...]) -> dict[str, Any]:
    return {
        k: (mask(v) if isinstance(v, str) else MASK) if k in secrets else v
        for k, v in config.items()
    }
