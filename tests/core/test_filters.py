"""Which channels an event goes to: filter matching and tenancy."""

from __future__ import annotations

from typing import Any

import pytest

from tidings.core.errors import ValidationError
from tidings.core.filters import matches, takes_every_event, validate_filter
from tidings.core.model import Severity


def goes(
    filter: dict[str, Any],
    channel_tenant: str | None = None,
    *,
    kind: str = "finding.created",
    severity: Severity = Severity.HIGH,
    labels: dict[str, str] | None = None,
    tenant: str | None = None,
) -> bool:
    return matches(
        filter,
        channel_tenant,
        kind=kind,
        severity=severity,
        labels=labels if labels is not None else {"env": "prod", "team": "sec"},
        tenant=tenant,
    )


def test_empty_filter_matches_everything() -> None:
    assert goes({})
    assert goes({}, kind="x", severity=Severity.INFO, labels={})


@pytest.mark.parametrize(
    ("patterns", "kind", "expected"),
    [
        (["finding.*"], "finding.created", True),
        (["finding.*"], "monitor.down", False),
        (["monitor.down", "finding.*"], "monitor.down", True),
        (["finding.created"], "finding.created.extra", False),
        (["Finding.*"], "finding.created", False),  # case-sensitive everywhere
        (["*.down"], "monitor.down", True),
        (["monitor.?own"], "monitor.down", True),
    ],
)
def test_kinds_match_when_any_glob_matches(patterns: list[str], kind: str, expected: bool) -> None:
    assert goes({"kinds": patterns}, kind=kind) is expected


@pytest.mark.parametrize(
    ("severity", "expected"),
    [
        (Severity.INFO, False),
        (Severity.MEDIUM, False),
        (Severity.HIGH, True),
        (Severity.CRITICAL, True),
    ],
)
def test_min_severity_compares_rank(severity: Severity, expected: bool) -> None:
    assert goes({"min_severity": "high"}, severity=severity) is expected


def test_labels_must_all_be_equal() -> None:
    assert goes({"labels": {"env": "prod"}})
    assert goes({"labels": {"env": "prod", "team": "sec"}})
    assert not goes({"labels": {"env": "prod", "team": "ops"}})
    assert not goes({"labels": {"region": "eu"}})
    assert not goes({"labels": {"env": "prod"}}, labels={})


def test_every_given_key_must_match() -> None:
    rule = {"kinds": ["finding.*"], "min_severity": "high", "labels": {"env": "prod"}}
    assert goes(rule)
    assert not goes(rule, kind="monitor.down")
    assert not goes(rule, severity=Severity.LOW)
    assert not goes(rule, labels={"env": "dev"})


def test_a_channel_without_tenant_takes_every_tenant() -> None:
    assert goes({}, None, tenant=None)
    assert goes({}, None, tenant="acme")


def test_a_tenant_channel_takes_only_that_tenant_exactly() -> None:
    assert goes({}, "acme", tenant="acme")
    assert not goes({}, "acme", tenant="globex")
    assert not goes({}, "acme", tenant="ACME")
    assert not goes({}, "acme", tenant=None)


# --- validation ---------------------------------------------------------------------------


def test_none_and_empty_are_the_empty_filter() -> None:
    assert validate_filter(None) == {}
    assert validate_filter({}) == {}


def test_valid_filter_is_copied_and_normalised() -> None:
    raw: dict[str, Any] = {
        "kinds": ("finding.*",),
        "min_severity": Severity.HIGH,
        "labels": {"env": "prod"},
    }
    result = validate_filter(raw)
    assert result == {"kinds": ["finding.*"], "min_severity": "high", "labels": {"env": "prod"}}
    assert type(result["min_severity"]) is str
    raw["labels"]["env"] = "dev"
    assert result["labels"] == {"env": "prod"}


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ("kinds", "filter"),
        (["finding.*"], "filter"),
        ({"kind": ["x"]}, "filter.kind"),
        ({"kinds": "finding.*"}, "filter.kinds"),
        ({"kinds": []}, "filter.kinds"),
        ({"kinds": ["ok", ""]}, "filter.kinds[1]"),
        ({"kinds": ["ok", 3]}, "filter.kinds[1]"),
        ({"kinds": ["a\x00"]}, "filter.kinds[0]"),
        ({"min_severity": "severe"}, "filter.min_severity"),
        ({"min_severity": 3}, "filter.min_severity"),
        ({"min_severity": None}, "filter.min_severity"),
        ({"labels": ["env"]}, "filter.labels"),
        ({"labels": {"env": 1}}, "filter.labels.env"),
        ({"labels": {1: "prod"}}, "filter.labels"),
        ({"labels": {"env": "\ud800"}}, "filter.labels.env"),
    ],
)
def test_invalid_filters_name_the_field(raw: object, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        validate_filter(raw)
    assert caught.value.field == field
    assert str(caught.value).startswith(field + ":")


def test_validated_filter_matches_like_the_raw_one() -> None:
    rule = validate_filter({"kinds": ["monitor.*"], "min_severity": "critical"})
    assert goes(rule, kind="monitor.down", severity=Severity.CRITICAL)
    assert not goes(rule, kind="monitor.down", severity=Severity.HIGH)


@pytest.mark.parametrize(
    ("filter", "channel_tenant", "expected"),
    [
        ({}, None, True),
        ({"labels": {}}, None, True),
        ({}, "acme", False),
        ({"kinds": ["*"]}, None, False),  # matches every kind, but is asked
        ({"kinds": []}, None, False),  # matches none: never "every event"
        ({"min_severity": "info"}, None, False),
        ({"labels": {"env": "prod"}}, None, False),
    ],
)
def test_takes_every_event_only_where_matches_could_not_refuse(
    filter: dict[str, Any], channel_tenant: str | None, expected: bool
) -> None:
    assert takes_every_event(filter, channel_tenant) is expected
    if expected:  # the shortcut agrees with matching, for events of every shape
        for kind, severity, labels, tenant in [
            ("a", Severity.INFO, {}, None),
            ("b.c", Severity.CRITICAL, {"env": "dev"}, "acme"),
        ]:
            assert matches(
                filter, channel_tenant, kind=kind, severity=severity, labels=labels, tenant=tenant
            )
