"""The channel form: config inputs generated from the kind's declaration (`KindSpec.fields`),
the policy fields every channel has, and the translation between a channel and the form's
text values. A kind that declares nothing edits its config as one JSON object.

Secrets are write-only: the form never carries them back out; an empty secret input on an
edit keeps the stored value (sent to the service as the redaction mask, which the Hub's
channel rules swap back for the stored secret). A value with secret parts (a webhook URL's
query token, header values) is shown masked, as reads show it; sent back unchanged, its
masks stand for the stored parts (S2, S3).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tidings.core.errors import ValidationError
from tidings.core.kinds import ConfigField, FieldType, KindSpec
from tidings.core.model import Channel, Severity
from tidings.core.redact import MASK, mask, masked_config
from tidings.core.states import Mode


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    label: str
    #: text | url | number | select | lines (a list, one per line) | headers | json
    input: str = "text"
    required: bool = False
    #: A select's (value, text) pairs.
    options: tuple[tuple[str, str], ...] = ()
    help: str = ""
    #: The declared type (None for the JSON fallback): how the text becomes a value.
    type: FieldType | None = None


INPUTS = {
    FieldType.STRING: "text",
    FieldType.URL: "url",
    FieldType.INTEGER: "number",
    FieldType.BOOLEAN: "select",
    FieldType.CHOICE: "select",
    FieldType.STRING_LIST: "lines",
    FieldType.STRING_MAP: "headers",
}
HELP = {
    FieldType.STRING_LIST: "One per line.",
    FieldType.STRING_MAP: "One `Name: value` per line.",
}
#: A kind without a declaration (a plugin) edits its config as one JSON object.
JSON_CONFIG = (Field("config", "Config (JSON object)", "json"),)

MODES = tuple(m.value for m in Mode)
SEVERITIES = tuple(s.value for s in Severity)
FLOATS = ("digest_period_s", "rate_per_min", "retry_backoff_s", "timeout_s")
INTS = ("rate_burst", "max_attempts")
#: Policy fields whose empty input means "none" rather than "unchanged".
NULLABLE = ("max_age_s", "tenant")


@dataclass(frozen=True, slots=True)
class KindForm:
    """The config inputs of one kind, and which of them are secret."""

    fields: tuple[Field, ...]
    secrets: tuple[str, ...]
    spec: KindSpec | None = None

    @classmethod
    def of(cls, spec: KindSpec | None) -> KindForm:
        if spec is None:
            return cls(JSON_CONFIG, ())
        return cls(tuple(_input(f) for f in spec.fields), spec.secret_fields, spec)


def _input(field: ConfigField) -> Field:
    help = " ".join(filter(None, [field.description, HELP.get(field.type, "")]))
    return Field(
        name=field.name,
        label=field.title,
        input=INPUTS.get(field.type, "text"),  # a type without an input of its own: text
        required=field.required,
        options=_options(field),
        help=help,
        type=field.type,
    )


def _options(field: ConfigField) -> tuple[tuple[str, str], ...]:
    if field.type is FieldType.BOOLEAN:
        values: tuple[str, ...] = ("true", "false")
    elif field.type is FieldType.CHOICE:
        values = field.choices
    else:
        return ()
    choices = tuple((v, v) for v in values)
    if field.required:
        return choices
    return (("", _default_text(field.default)), *choices)


def _default_text(default: str | int | bool | None) -> str:
    if default is None:
        return "default"
    shown = ("true" if default else "false") if isinstance(default, bool) else str(default)
    return f"default ({shown})"


def values_of(channel: Channel, kind: KindForm) -> dict[str, str]:
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
        "fallback_channel_id": str(channel.fallback_channel_id or ""),
        "filter_kinds": ", ".join(channel.filter.get("kinds", [])),
        "filter_min_severity": str(channel.filter.get("min_severity", "")),
        "filter_labels": "\n".join(f"{k}={v}" for k, v in channel.filter.get("labels", {}).items()),
    }
    shown = masked_config(kind.spec, channel.config)
    for field in kind.fields:
        if field.input == "json":
            values[field.name] = json.dumps(_redacted(channel.config, kind.secrets), indent=2)
        elif field.name not in kind.secrets:
            values[field.name] = _text(field, shown.get(field.name))
    return values


def placeholders(channel: Channel | None, kind: KindForm) -> dict[str, str]:
    """What an edit form shows in an empty secret input: the stored value, redacted."""
    if channel is None:
        return {}
    shown: dict[str, str] = {}
    for name in kind.secrets:
        value = channel.config.get(name)
        if isinstance(value, str) and value:
            shown[name] = mask(value) + " (stored; leave empty to keep)"
        elif value:
            shown[name] = f"{MASK} (stored; leave empty to keep)"
    return shown


def spec_from_form(kind: KindForm, form: dict[str, str], stored: Channel | None) -> dict[str, Any]:
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
    fallback = form.get("fallback_channel_id", "")
    fields["fallback_channel_id"] = (
        _number("fallback_channel_id", fallback, int) if fallback else None
    )
    fields["filter"] = _filter(form)
    fields["config"] = _config(kind, form, stored)
    return fields


def _config(kind: KindForm, form: dict[str, str], stored: Channel | None) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for field in kind.fields:
        raw = form.get(field.name, "")
        if field.input == "json":
            return _json_object(raw)
        if not raw:
            kept = stored is not None and field.name in stored.config
            cleared = form.get(f"clear_{field.name}") == "1"
            if field.name in kind.secrets and kept and not cleared:
                config[field.name] = MASK  # keep the stored secret
            continue
        config[field.name] = _value(field, raw)
    return config


def _value(field: Field, raw: str) -> Any:
    if field.type is FieldType.INTEGER:
        return _number(f"config.{field.name}", raw, int)
    if field.type is FieldType.BOOLEAN:
        if raw not in ("true", "false"):
            raise ValidationError(f"config.{field.name}", "must be true or false")
        return raw == "true"
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
    if isinstance(value, bool):
        return "true" if value else "false"
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
