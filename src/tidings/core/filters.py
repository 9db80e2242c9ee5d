"""Which channels an event goes to: a channel's filter (kinds, min_severity, labels) and its
tenant (DESIGN §1 "Filter" and "Tenancy").

Pure: imports only the standard library and tidings.core.
"""

from __future__ import annotations

from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any, Protocol

from tidings.core.errors import ValidationError
from tidings.core.model import Severity
from tidings.core.text import has_unstorable

FILTER_KEYS = ("kinds", "min_severity", "labels")
_SEVERITY_VALUES = frozenset(s.value for s in Severity)
_SEVERITIES = ", ".join(s.value for s in Severity)


def validate_filter(raw: object) -> dict[str, Any]:
    """A normalised copy of a channel filter; ValidationError naming the bad key otherwise."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ValidationError("filter", "must be an object")
    result: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "kinds":
            result["kinds"] = _kinds(value)
        elif key == "min_severity":
            result["min_severity"] = _min_severity(value)
        elif key == "labels":
            result["labels"] = _labels(value)
        else:
            raise ValidationError(f"filter.{key}", f"unknown key (known: {', '.join(FILTER_KEYS)})")
    return result


def _checked_str(field: str, value: object) -> str:
    if not isinstance(value, str):
        raise ValidationError(field, "must be a string")
    if has_unstorable(value):
        raise ValidationError(field, "must not contain NUL or unpaired surrogates")
    return str(value)


def _kinds(value: object) -> list[str]:
    if not isinstance(value, list | tuple):
        raise ValidationError("filter.kinds", "must be a list of glob patterns")
    # An empty list would silently match nothing; leaving the key out matches every kind.
    if not value:
        raise ValidationError("filter.kinds", "must not be empty (omit it to match every kind)")
    patterns = []
    for index, pattern in enumerate(value):
        field = f"filter.kinds[{index}]"
        text = _checked_str(field, pattern)
        if not text:
            raise ValidationError(field, "must not be empty")
        patterns.append(text)
    return patterns


def _min_severity(value: object) -> str:
    if not isinstance(value, str) or value not in _SEVERITY_VALUES:
        raise ValidationError("filter.min_severity", f"must be one of {_SEVERITIES}")
    return Severity(value).value


def _labels(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise ValidationError("filter.labels", "must be an object of string values")
    labels: dict[str, str] = {}
    for key, label_value in value.items():
        name = _checked_str("filter.labels", key)
        labels[name] = _checked_str(f"filter.labels.{name}", label_value)
    return labels


def takes_every_event(filter: Mapping[str, Any], channel_tenant: str | None) -> bool:
    """True when a channel with this filter and tenant matches every event, so a large
    publish need not ask `matches` for each of its events."""
    return (
        channel_tenant is None
        and filter.get("kinds") is None  # an empty list of kinds matches none
        and filter.get("min_severity") is None
        and not filter.get("labels")
    )


def matches(
    filter: Mapping[str, Any],
    channel_tenant: str | None,
    *,
    kind: str,
    severity: Severity,
    labels: Mapping[str, str],
    tenant: str | None,
) -> bool:
    """True when an event with these fields goes to a channel with this filter and tenant."""
    # A tenant channel takes only that tenant's events; a channel without one takes all.
    if channel_tenant is not None and tenant != channel_tenant:
        return False
    patterns = filter.get("kinds")
    if patterns is not None and not any(fnmatchcase(kind, p) for p in patterns):
        return False
    floor = filter.get("min_severity")
    if floor is not None and Severity(severity).rank < Severity(floor).rank:
        return False
    wanted: Mapping[str, str] = filter.get("labels") or {}
    return all(labels.get(key) == value for key, value in wanted.items())


class Routable(Protocol):
    """The fields of an event that decide where it goes (a new input or a stored event)."""

    @property
    def kind(self) -> str: ...
    @property
    def severity(self) -> Severity: ...
    @property
    def labels(self) -> dict[str, str]: ...
    @property
    def tenant(self) -> str | None: ...


class Routed(Protocol):
    """The fields of a channel that decide which events it takes (a `Channel`, or the
    routing part of one that a publisher keeps: `tidings.core.fanout.Route`)."""

    @property
    def id(self) -> int: ...
    @property
    def enabled(self) -> bool: ...
    @property
    def tenant(self) -> str | None: ...
    @property
    def filter(self) -> dict[str, Any]: ...


def channel_takes(channel: Routed, event: Routable) -> bool:
    """`matches` for this channel's filter and tenant and this event's fields."""
    return matches(
        channel.filter,
        channel.tenant,
        kind=event.kind,
        severity=event.severity,
        labels=event.labels,
        tenant=event.tenant,
    )
