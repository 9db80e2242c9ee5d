"""The bounds the OpenAPI document gives an event's and a channel's fields are the ones
tidings enforces: a value at each bound is taken, one past it is refused naming the field.
A client generated from the document then refuses what tidings would, and no more."""

from __future__ import annotations

import itertools
from typing import Any

from tests.api.conftest import Api

EVENT = {"kind": "a.b", "subject": "s"}
#: Bounds whose edge value is refused for another documented reason: a channel that must
#: exist, a timeout the running lease must cover four times (120 s here: 30 s at most).
EDGE_REFUSED_OTHERWISE = {
    ("fallback_channel_id", "minimum"),
    ("fallback_channel_id", "maximum"),
    ("timeout_s", "maximum"),
}
names = (f"bounded-{n}" for n in itertools.count())


def _properties(api: Api, model: str) -> dict[str, dict[str, Any]]:
    schema = api.app.openapi()["components"]["schemas"][model]
    return dict(schema["properties"])


def _edges(field: str, spec: dict[str, Any]) -> list[tuple[str, object, bool]]:
    """(bound, value, taken?) at and past each documented bound of `field`."""
    integer = spec.get("type") == "integer" or any(
        branch.get("type") == "integer" for branch in spec.get("anyOf", [])
    )
    step = 1 if integer else 0.5
    edges: list[tuple[str, object, bool]] = []
    if "minLength" in spec:
        least = int(spec["minLength"])
        edges += [("minLength", "x" * least, True), ("minLength", "x" * (least - 1), False)]
    if "maxLength" in spec:
        most = int(spec["maxLength"])
        edges += [("maxLength", "x" * most, True), ("maxLength", "x" * (most + 1), False)]
    if "maxProperties" in spec:
        most = int(spec["maxProperties"])
        entries = {f"k{i}": "v" for i in range(most + 1)}
        edges += [("maxProperties", dict(list(entries.items())[:most]), True)]
        edges += [("maxProperties", entries, False)]
    if "minimum" in spec:
        edges += [("minimum", spec["minimum"], True), ("minimum", spec["minimum"] - step, False)]
    if "exclusiveMinimum" in spec:
        low = spec["exclusiveMinimum"]
        edges += [("exclusiveMinimum", low + step, True), ("exclusiveMinimum", low, False)]
    if "maximum" in spec:
        high = spec["maximum"]
        edges += [("maximum", high, True), ("maximum", high + max(step, high / 1000), False)]
    return [edge for edge in edges if (field, edge[0]) not in EDGE_REFUSED_OTHERWISE or not edge[2]]


async def _check(api: Api, path: str, base: dict[str, Any], model: str, token: str) -> int:
    checked = 0
    headers = {"publish": api.publish, "admin": api.admin}[token]
    for field, spec in _properties(api, model).items():
        for bound, value, taken in _edges(field, spec):
            body = base | {"name": next(names)} if "name" in base else dict(base)
            body[field] = value
            answer = await api.client.post(path, json=body, headers=headers)
            where = (field, bound, taken, answer.text[:200])
            if taken:
                assert answer.status_code in (200, 201), where
            else:
                assert answer.status_code == 422, where
                assert answer.json()["error"]["message"].startswith(f"{field}:"), where
            checked += 1
    return checked


async def test_an_events_documented_bounds_are_enforced(api: Api) -> None:
    assert await _check(api, "/v1/events", EVENT, "EventIn", "publish") >= 14


async def test_a_channels_documented_bounds_are_enforced(api: Api) -> None:
    base = {"name": "", "kind": "inbox"}
    assert await _check(api, "/v1/channels", base, "ChannelIn", "admin") >= 20


def test_a_channel_patch_documents_the_same_bounds(api: Api) -> None:
    keywords = ("minLength", "maxLength", "minimum", "exclusiveMinimum", "maximum")

    def bounds(model: str) -> dict[str, dict[str, Any]]:
        return {
            field: {k: spec[k] for k in keywords if k in spec}
            for field, spec in _properties(api, model).items()
        }

    created, patched = bounds("ChannelIn"), bounds("ChannelPatch")
    assert {f: b for f, b in created.items() if f in patched} == patched
    assert sum(1 for b in patched.values() if b) >= 10
