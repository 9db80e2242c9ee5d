"""Validated inputs built from loose user input: events (publish) and channel specs.

Pure: imports only the standard library and tidings.core. API, CLI and library calls all
come through here, so bad input fails alike everywhere: a ValidationError naming the field.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import MISSING, fields
from enum import StrEnum
from typing import Any, TypeVar, cast

from tidings.core.errors import ValidationError
from tidings.core.filters import validate_filter
from tidings.core.model import JSON, ChannelSpec, EventInput, Severity
from tidings.core.states import Mode
from tidings.core.text import has_unstorable

MAX_LABELS = 64
MAX_JSON_DEPTH = 64
# Upper bounds keep every duration a valid timedelta and every rate a sane claim size,
# so absurd input is a 422 rather than an overflow deep in the store.
MAX_DURATION_S = 10 * 366 * 86400.0
MAX_TIMEOUT_S = 600.0
MAX_RATE_PER_MIN = 1_000_000.0
MAX_RATE_BURST = 10_000
MAX_ATTEMPTS = 100
#: Retention beyond this is "forever" in all but name.
MAX_DAYS = 100 * 366.0
#: The largest id a 64-bit column holds.
MAX_ID = 2**63 - 1

#: What `event_input` and `channel_spec` accept, field by field, in JSON Schema's words: the
#: API documents these (a client generated from it refuses what tidings would), and
#: tests/api/test_documented_bounds.py holds each to what the checks below enforce.
EVENT_BOUNDS: dict[str, dict[str, float]] = {
    "kind": {"minLength": 1, "maxLength": 200},
    "subject": {"minLength": 1, "maxLength": 500},
    "title": {"maxLength": 1000},
    "body": {"maxLength": 65536},
    "url": {"maxLength": 2048},
    "labels": {"maxProperties": MAX_LABELS},
    "tenant": {"minLength": 1, "maxLength": 200},
    "idempotency_key": {"minLength": 1, "maxLength": 255},
}
CHANNEL_BOUNDS: dict[str, dict[str, float]] = {
    "name": {"minLength": 1, "maxLength": 100},
    "digest_period_s": {"exclusiveMinimum": 0, "maximum": MAX_DURATION_S},
    "rate_per_min": {"minimum": 0, "maximum": MAX_RATE_PER_MIN},
    "rate_burst": {"minimum": 1, "maximum": MAX_RATE_BURST},
    "max_attempts": {"minimum": 1, "maximum": MAX_ATTEMPTS},
    "retry_backoff_s": {"minimum": 0, "maximum": MAX_DURATION_S},
    "timeout_s": {"exclusiveMinimum": 0, "maximum": MAX_TIMEOUT_S},
    "max_age_s": {"exclusiveMinimum": 0, "maximum": MAX_DURATION_S},
    "tenant": {"minLength": 1, "maxLength": 200},
    "fallback_channel_id": {"minimum": 1, "maximum": MAX_ID},
    "retention_days": {"exclusiveMinimum": 0, "maximum": MAX_DAYS},
}

_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
_CHANNEL_KIND = re.compile(r"[a-z][a-z0-9_]*")
# \s is str.isspace(); U+0000–U+001F and U+007F–U+009F are all of Unicode's category Cc.
_SPACE_OR_CONTROL = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")
_CHANNEL_FIELDS = frozenset(f.name for f in fields(ChannelSpec))
_CHANNEL_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in fields(ChannelSpec) if f.default is not MISSING
}
E = TypeVar("E", bound=StrEnum)


# --- strings -------------------------------------------------------------------------------


def _storable(field: str, text: str) -> None:
    if has_unstorable(text):
        raise ValidationError(field, "must not contain NUL or unpaired surrogates")


def filter_text(field: str, value: str | None) -> str | None:
    """A history filter's text (event kind, tenant): it must be storable to be compared."""
    if value is not None:
        _storable(field, value)
    return value


def _string(field: str, value: object, max_chars: int | None = None, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise ValidationError(field, "must be a string")
    _storable(field, value)
    if not empty and not value:
        raise ValidationError(field, "must not be empty")
    if max_chars is not None and len(value) > max_chars:
        raise ValidationError(field, f"must be at most {max_chars} characters")
    return str(value)


def _optional_string(field: str, value: object, max_chars: int) -> str | None:
    return None if value is None else _string(field, value, max_chars)


def _string_map(field: str, value: object, max_entries: int | None = None) -> dict[str, str]:
    """A str→str object (labels, templates); None reads as empty."""
    if value is None:
        return {}
    if type(value) is not dict and not isinstance(value, Mapping):
        raise ValidationError(field, "must be an object of string values")
    if max_entries is not None and len(value) > max_entries:
        raise ValidationError(field, f"must have at most {max_entries} entries")
    result: dict[str, str] = {}
    for key, item in value.items():
        name = _string(field, key)  # the key's own problems are reported on the map
        result[name] = _string(f"{field}.{name}", item, empty=True)
    return result


# --- JSON ----------------------------------------------------------------------------------


def _json_object(field: str, value: object) -> JSON:
    """A JSON object (data, config) as a detached, normalised copy; None reads as empty."""
    if value is None:
        return {}
    if type(value) is not dict and not isinstance(value, Mapping):
        raise ValidationError(field, "must be an object")
    copy: JSON = _json_copy(field, value, depth=1)
    return copy


def _json_copy(path: str, value: object, depth: int) -> Any:
    """`value` as plain JSON types (what a JSON round trip would give), checked on the way so
    an error names the exact place, e.g. `data.items[2].name`."""
    # The depth bound also stops a self-referencing structure.
    if depth > MAX_JSON_DEPTH:
        raise ValidationError(path, f"nests deeper than {MAX_JSON_DEPTH} levels")
    kind = type(value)
    if kind is int or kind is bool or value is None:  # exact types first: ABC checks are slow
        return value
    if isinstance(value, dict):  # a plain type: its check is fast, unlike the ABC below
        return _json_dict(path, value, depth)
    if isinstance(value, str):
        _storable(path, value)
        return str(value)
    if isinstance(value, int):  # an int subclass (IntEnum): its plain value
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationError(path, "must be a finite number")
        return float(value)
    if isinstance(value, Mapping):
        return _json_dict(path, value, depth)
    if isinstance(value, list | tuple):
        return [_json_copy(f"{path}[{i}]", item, depth + 1) for i, item in enumerate(value)]
    raise ValidationError(path, f"is not a JSON value ({type(value).__name__})")


def _json_dict(path: str, value: Mapping[Any, Any], depth: int) -> dict[str, Any]:
    copy: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise ValidationError(path, f"keys must be strings, not {type(key).__name__}")
        _storable(path, key)
        kind = type(item)
        if (kind is int or kind is bool or item is None) and depth < MAX_JSON_DEPTH:
            copy[str(key)] = item  # as _json_copy would, without building its path
        else:
            copy[str(key)] = _json_copy(f"{path}.{key}", item, depth + 1)
    return copy


# --- numbers and enums ---------------------------------------------------------------------


def _number(field: str, value: object, low: float, high: float, low_open: bool = False) -> float:
    """An int or float in [low, high] (or (low, high] with low_open); bool and NaN refused."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(field, "must be a number")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ValidationError(field, "must be a finite number")
    if number < low or (low_open and number == low):
        raise ValidationError(field, f"must be {'>' if low_open else '>='} {low:g}")
    if number > high:
        raise ValidationError(field, f"must be <= {high:g}")
    return number


def _optional_number(field: str, value: object, low: float, high: float) -> float | None:
    return None if value is None else _number(field, value, low, high, low_open=True)


def _integer(field: str, value: object, low: int, high: int) -> int:
    """An int in [low, high]; a float is accepted only when whole (JSON may send 3.0)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(field, "must be a whole number")
    if not low <= value <= high:
        raise ValidationError(field, f"must be between {low} and {high}")
    return value


def _enum(field: str, value: object, enum: type[E]) -> E:
    if isinstance(value, str):
        # The member map directly: calling the enum costs a microsecond per event.
        member = enum._value2member_map_.get(value)
        if member is not None:
            return cast(E, member)
    raise ValidationError(field, f"must be one of {', '.join(m.value for m in enum)}")


def _bool(field: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(field, "must be true or false")
    return value


# --- events --------------------------------------------------------------------------------


def _event_kind(value: object) -> str:
    kind = _string("kind", value, 200)
    if kind.isascii() and kind.isprintable() and " " not in kind:
        return kind  # the usual kind, checked without the regex
    if _SPACE_OR_CONTROL.search(kind):
        raise ValidationError("kind", "must not contain whitespace or control characters")
    return kind


def event_input(
    *,
    kind: object,
    subject: object,
    severity: object = Severity.INFO,
    title: object = "",
    body: object = "",
    url: object = None,
    labels: object = None,
    data: object = None,
    tenant: object = None,
    idempotency_key: object = None,
    traceparent: object = None,
) -> EventInput:
    """An EventInput from loose input (API body, CLI flags, library call)."""
    # Positional, in EventInput's field order (each checker names its field): a batch of a
    # thousand spends ~0.4 ms matching keywords otherwise (measured).
    return EventInput(
        _event_kind(kind),
        _string("subject", subject, 500),
        _enum("severity", severity, Severity),
        _string("title", title, 1000, empty=True),
        _string("body", body, 65536, empty=True),
        None if url is None else _string("url", url, 2048, empty=True),
        _string_map("labels", labels, MAX_LABELS),
        _json_object("data", data),
        _optional_string("tenant", tenant, 200),
        _optional_string("idempotency_key", idempotency_key, 255),
        _traceparent(traceparent),
    )


def valid_traceparent(value: object) -> str | None:
    """A W3C traceparent (`00-<32 hex>-<16 hex>-<2 hex>`), or None for anything else."""
    if isinstance(value, str) and _TRACEPARENT.fullmatch(value) and not value.startswith("ff"):
        return value
    return None


def _traceparent(value: object) -> str | None:
    if value is None:
        return None
    found = valid_traceparent(value)
    if found is None:
        raise ValidationError(
            "traceparent", "must be a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)"
        )
    return found


# --- channels ------------------------------------------------------------------------------


def _channel_name(value: object) -> str:
    name = _string("name", value, 100)
    if any(unicodedata.category(ch) == "Cc" for ch in name):
        raise ValidationError("name", "must not contain control characters")
    return name


def _channel_kind(value: object) -> str:
    kind = _string("kind", value, 100)
    if not _CHANNEL_KIND.fullmatch(kind):
        raise ValidationError("kind", "must be lower-case letters, digits and _ (e.g. wecom)")
    return kind


def _reject_unknown(names: Mapping[str, object]) -> None:
    for name in sorted(names):
        if name not in _CHANNEL_FIELDS:
            raise ValidationError(name, "unknown channel field")


def channel_spec(**raw: object) -> ChannelSpec:
    """A ChannelSpec from loose input; `name` and `kind` are required, the rest defaulted."""
    _reject_unknown(raw)
    for required in ("name", "kind"):
        if required not in raw:
            raise ValidationError(required, "is required")

    def get(name: str) -> object:
        return raw.get(name, _CHANNEL_DEFAULTS.get(name))

    return ChannelSpec(
        name=_channel_name(raw["name"]),
        kind=_channel_kind(raw["kind"]),
        config=_json_object("config", get("config")),
        enabled=_bool("enabled", get("enabled")),
        mode=_enum("mode", get("mode"), Mode),
        digest_period_s=_number("digest_period_s", get("digest_period_s"), 0, MAX_DURATION_S, True),
        filter=validate_filter(get("filter")),
        rate_per_min=_number("rate_per_min", get("rate_per_min"), 0, MAX_RATE_PER_MIN),
        rate_burst=_integer("rate_burst", get("rate_burst"), 1, MAX_RATE_BURST),
        max_attempts=_integer("max_attempts", get("max_attempts"), 1, MAX_ATTEMPTS),
        retry_backoff_s=_number("retry_backoff_s", get("retry_backoff_s"), 0, MAX_DURATION_S),
        timeout_s=_number("timeout_s", get("timeout_s"), 0, MAX_TIMEOUT_S, low_open=True),
        max_age_s=_optional_number("max_age_s", get("max_age_s"), 0, MAX_DURATION_S),
        tenant=_optional_string("tenant", get("tenant"), 200),
        templates=_string_map("templates", get("templates")),
        fallback_channel_id=_optional_id("fallback_channel_id", get("fallback_channel_id")),
        retention_days=_optional_number("retention_days", get("retention_days"), 0, MAX_DAYS),
    )


def _optional_id(field: str, value: object) -> int | None:
    return None if value is None else _integer(field, value, 1, MAX_ID)


def channel_update(current: ChannelSpec, **changes: object) -> ChannelSpec:
    """`current` with `changes` applied, validated exactly like a new channel."""
    _reject_unknown(changes)
    merged: dict[str, object] = {f.name: getattr(current, f.name) for f in fields(ChannelSpec)}
    merged.update(changes)
    return channel_spec(**merged)
