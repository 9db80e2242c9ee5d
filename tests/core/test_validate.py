"""Validated inputs from loose user input (events and channels), and the errors they raise."""

from __future__ import annotations

import enum
import json
import math
from typing import Any

import pytest

from tidings.core.errors import (
    ConfigError,
    Conflict,
    NotFound,
    StoreError,
    TidingsError,
    ValidationError,
)
from tidings.core.model import ChannelSpec, EventInput, Severity
from tidings.core.states import Mode
from tidings.core.validate import MAX_JSON_DEPTH, channel_spec, channel_update, event_input


def invalid_field(build: Any, **kwargs: Any) -> str:
    with pytest.raises(ValidationError) as caught:
        build(**kwargs)
    assert str(caught.value).startswith(caught.value.field + ": ")
    return caught.value.field


# --- events -------------------------------------------------------------------------------


def test_minimal_event_gets_defaults() -> None:
    event = event_input(kind="finding.created", subject="finding:8812")
    assert event == EventInput(kind="finding.created", subject="finding:8812")
    assert event.severity is Severity.INFO
    assert (event.labels, event.data) == ({}, {})


def test_full_event() -> None:
    data = {"cve": "CVE-2024-1", "items": [{"name": "a", "score": 9.8}], "n": None}
    event = event_input(
        kind="finding.created",
        subject="finding:8812",
        severity="high",
        title="SQL injection",
        body="错误 🚀",
        url="https://scanner.example/f/8812",
        labels={"env": "prod"},
        data=data,
        tenant="acme",
        idempotency_key="scan-41:finding-8812",
    )
    assert event.severity is Severity.HIGH
    assert event.data == data
    assert event.labels == {"env": "prod"}
    assert (event.tenant, event.idempotency_key) == ("acme", "scan-41:finding-8812")


def test_event_data_is_a_detached_json_copy() -> None:
    data: dict[str, Any] = {"tags": ("a", "b"), "nested": {"x": 1}}
    event = event_input(kind="k", subject="s", data=data)
    data["nested"]["x"] = 2
    assert event.data == {"tags": ["a", "b"], "nested": {"x": 1}}


def test_event_data_holds_plain_json_types_only() -> None:
    class Colour(enum.StrEnum):
        RED = "red"

    class Level(enum.IntEnum):
        HIGH = 3

    event = event_input(kind="k", subject="s", data={"c": Colour.RED, "l": Level.HIGH, "f": 1.5})
    assert event.data == {"c": "red", "l": 3, "f": 1.5}
    assert type(event.data["c"]) is str
    assert type(event.data["l"]) is int
    assert json.loads(json.dumps(event.data)) == event.data


def test_severity_accepts_the_enum() -> None:
    assert event_input(kind="k", subject="s", severity=Severity.CRITICAL).severity is (
        Severity.CRITICAL
    )


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"kind": ""}, "kind"),
        ({"kind": "a b"}, "kind"),
        ({"kind": "a\tb"}, "kind"),
        ({"kind": "x" * 201}, "kind"),
        ({"kind": 3}, "kind"),
        ({"subject": ""}, "subject"),
        ({"subject": "s" * 501}, "subject"),
        ({"subject": None}, "subject"),
        ({"severity": "severe"}, "severity"),
        ({"severity": 2}, "severity"),
        ({"title": "t" * 1001}, "title"),
        ({"title": None}, "title"),
        ({"body": "b" * 65537}, "body"),
        ({"url": "u" * 2049}, "url"),
        ({"url": 5}, "url"),
        ({"labels": ["env"]}, "labels"),
        ({"labels": {"env": 1}}, "labels.env"),
        ({"labels": {1: "x"}}, "labels"),
        ({"labels": {"": "x"}}, "labels"),
        ({"labels": {f"k{i}": "v" for i in range(65)}}, "labels"),
        ({"data": [1, 2]}, "data"),
        ({"data": {"x": math.nan}}, "data.x"),
        ({"data": {"x": math.inf}}, "data.x"),
        ({"data": {"x": {1, 2}}}, "data.x"),
        ({"data": {"x": object()}}, "data.x"),
        ({"data": {"x": {3: "int key"}}}, "data.x"),
        ({"tenant": ""}, "tenant"),
        ({"tenant": "t" * 201}, "tenant"),
        ({"idempotency_key": ""}, "idempotency_key"),
        ({"idempotency_key": "k" * 256}, "idempotency_key"),
        ({"idempotency_key": 12}, "idempotency_key"),
    ],
)
def test_bad_event_input_names_the_field(changes: dict[str, Any], field: str) -> None:
    raw: dict[str, Any] = {"kind": "finding.created", "subject": "finding:1", **changes}
    assert invalid_field(event_input, **raw) == field


def test_limits_are_inclusive() -> None:
    event = event_input(
        kind="k" * 200,
        subject="s" * 500,
        title="t" * 1000,
        body="b" * 65536,
        url="u" * 2048,
        labels={f"k{i}": "v" for i in range(64)},
        tenant="t" * 200,
        idempotency_key="i" * 255,
    )
    assert len(event.body) == 65536


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"kind": "a\x00"}, "kind"),
        ({"subject": "\ud800"}, "subject"),
        ({"title": "x\x00"}, "title"),
        ({"body": "\udfff"}, "body"),
        ({"url": "http://x/\x00"}, "url"),
        ({"tenant": "a\x00"}, "tenant"),
        ({"idempotency_key": "k\x00"}, "idempotency_key"),
        ({"labels": {"env": "p\x00"}}, "labels.env"),
        ({"labels": {"e\x00": "prod"}}, "labels"),
        ({"data": {"items": [{"name": "ok"}, {}, {"name": "bad\x00"}]}}, "data.items[2].name"),
        ({"data": {"a": {"b\ud800": 1}}}, "data.a"),
        ({"data": {"deep": [["\x00"]]}}, "data.deep[0][0]"),
    ],
)
def test_nul_and_lone_surrogates_are_refused_anywhere(changes: dict[str, Any], field: str) -> None:
    raw: dict[str, Any] = {"kind": "k", "subject": "s", **changes}
    assert invalid_field(event_input, **raw) == field


def test_self_referencing_data_is_refused_not_a_crash() -> None:
    data: dict[str, Any] = {}
    data["me"] = data
    assert invalid_field(event_input, kind="k", subject="s", data=data).startswith("data.me")


@pytest.mark.parametrize("leaf", [1, True, None, "text", 1.5])
def test_data_may_nest_to_the_depth_bound_and_no_further(leaf: object) -> None:
    def nested(levels: int) -> dict[str, Any]:
        data: dict[str, Any] = {"leaf": leaf}
        for _ in range(levels - 1):
            data = {"in": data}
        return data

    # The outer object is level 1 and its leaf one deeper, whatever the leaf's type.
    assert event_input(kind="k", subject="s", data=nested(MAX_JSON_DEPTH - 1)).data
    assert invalid_field(event_input, kind="k", subject="s", data=nested(MAX_JSON_DEPTH))


# --- channels -----------------------------------------------------------------------------


def test_minimal_channel_gets_the_spec_defaults() -> None:
    expected = ChannelSpec(name="sec-wecom", kind="wecom")
    assert channel_spec(name="sec-wecom", kind="wecom") == expected


def test_full_channel_is_normalised() -> None:
    spec = channel_spec(
        name="sec digest",
        kind="webhook",
        config={"url": "http://127.0.0.1:9000/hook", "headers": {"X-A": "1"}},
        enabled=False,
        mode="digest",
        digest_period_s=0.5,
        filter={"kinds": ["finding.*"], "min_severity": Severity.HIGH},
        rate_per_min=20,
        rate_burst=3.0,
        max_attempts=5,
        retry_backoff_s=0,
        timeout_s=600,
        max_age_s=86400,
        tenant="acme",
        templates={"event": "{{ event.title }}"},
    )
    assert spec.mode is Mode.DIGEST
    assert spec.filter == {"kinds": ["finding.*"], "min_severity": "high"}
    assert (spec.rate_per_min, spec.rate_burst, spec.retry_backoff_s) == (20.0, 3, 0.0)
    assert type(spec.rate_per_min) is float
    assert type(spec.rate_burst) is int
    assert (spec.timeout_s, spec.max_age_s) == (600.0, 86400.0)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"name": ""}, "name"),
        ({"name": "n" * 101}, "name"),
        ({"name": "a\nb"}, "name"),
        ({"name": "a\x00b"}, "name"),
        ({"kind": "WeCom"}, "kind"),
        ({"kind": "1x"}, "kind"),
        ({"kind": "we-com"}, "kind"),
        ({"config": "url"}, "config"),
        ({"config": {"secret": "a\x00"}}, "config.secret"),
        ({"enabled": "yes"}, "enabled"),
        ({"enabled": 1}, "enabled"),
        ({"mode": "batch"}, "mode"),
        ({"digest_period_s": 0}, "digest_period_s"),
        ({"digest_period_s": -1}, "digest_period_s"),
        ({"digest_period_s": "60"}, "digest_period_s"),
        ({"digest_period_s": 1e300}, "digest_period_s"),
        ({"filter": {"kinds": "x"}}, "filter.kinds"),
        ({"rate_per_min": -0.1}, "rate_per_min"),
        ({"rate_per_min": math.nan}, "rate_per_min"),
        ({"rate_per_min": math.inf}, "rate_per_min"),
        ({"rate_per_min": True}, "rate_per_min"),
        ({"rate_per_min": 10**400}, "rate_per_min"),
        ({"rate_burst": 0}, "rate_burst"),
        ({"rate_burst": 1.5}, "rate_burst"),
        ({"rate_burst": True}, "rate_burst"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": 101}, "max_attempts"),
        ({"max_attempts": None}, "max_attempts"),
        ({"retry_backoff_s": -1}, "retry_backoff_s"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"timeout_s": 600.001}, "timeout_s"),
        ({"max_age_s": 0}, "max_age_s"),
        ({"max_age_s": math.nan}, "max_age_s"),
        ({"tenant": ""}, "tenant"),
        ({"templates": {"event": 3}}, "templates.event"),
        ({"templates": "x"}, "templates"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_channel_input_names_the_field(changes: dict[str, Any], field: str) -> None:
    raw: dict[str, Any] = {"name": "c", "kind": "webhook", **changes}
    assert invalid_field(channel_spec, **raw) == field


@pytest.mark.parametrize("missing", ["name", "kind"])
def test_name_and_kind_are_required(missing: str) -> None:
    raw = {"name": "c", "kind": "webhook"}
    del raw[missing]
    assert invalid_field(channel_spec, **raw) == missing


def test_channel_update_applies_and_validates_changes() -> None:
    current = channel_spec(name="c", kind="slack", rate_per_min=30)
    updated = channel_update(current, enabled=False, mode="digest", rate_burst=4)
    assert (updated.enabled, updated.mode, updated.rate_burst) == (False, Mode.DIGEST, 4)
    assert (updated.name, updated.kind, updated.rate_per_min) == ("c", "slack", 30.0)
    assert current.enabled is True  # the original is untouched


def test_channel_update_clears_nullable_fields() -> None:
    current = channel_spec(name="c", kind="slack", max_age_s=60, tenant="acme")
    updated = channel_update(current, max_age_s=None, tenant=None)
    assert (updated.max_age_s, updated.tenant) == (None, None)


def test_channel_update_refuses_bad_and_unknown_changes() -> None:
    current = channel_spec(name="c", kind="slack")
    assert invalid_field(channel_update, current=current, timeout_s=-1) == "timeout_s"
    assert invalid_field(channel_update, current=current, nmae="typo") == "nmae"


# --- the errors validation raises, and their siblings ------------------------------------


@pytest.mark.parametrize(
    ("error", "code", "status", "text"),
    [
        (ValidationError("kind", "must not be empty"), "invalid", 422, "kind: must not be empty"),
        (NotFound("delivery", 42), "not_found", 404, "delivery 42 not found"),
        (Conflict("delivery 7 is sending"), "conflict", 409, "delivery 7 is sending"),
        (ConfigError("lease too short"), "config", 400, "lease too short"),
        (StoreError("database unreachable"), "store", 503, "database unreachable"),
    ],
)
def test_error_codes_statuses_and_messages(
    error: TidingsError, code: str, status: int, text: str
) -> None:
    assert isinstance(error, TidingsError)
    assert (error.code, error.status, str(error)) == (code, status, text)


def test_errors_keep_their_details() -> None:
    assert ValidationError("data.items[2]", "bad").field == "data.items[2]"
    missing = NotFound("channel", "sec-wecom")
    assert (missing.what, missing.ident) == ("channel", "sec-wecom")
