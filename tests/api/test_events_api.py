"""POST/GET /v1/events: E1–E3 over HTTP, and bad input refused with a JSON error."""

from __future__ import annotations

from tests.api.conftest import Api
from tests.conftest import count

EVENT = {"kind": "monitor.down", "subject": "web-1", "severity": "high", "title": "web-1 down"}


def _error(body: dict[str, object]) -> dict[str, str]:
    assert set(body) == {"error"}, body
    error = body["error"]
    assert isinstance(error, dict)
    assert set(error) == {"code", "message"}
    return error


async def _channel(api: Api, **fields: object) -> dict[str, object]:
    body = {"name": "ops", "kind": "inbox"} | fields
    response = await api.client.post("/v1/channels", json=body, headers=api.admin)
    assert response.status_code == 201, response.text
    result: dict[str, object] = response.json()
    return result


async def test_publish_answers_201_with_the_deliveries(api: Api) -> None:
    await _channel(api)
    response = await api.client.post("/v1/events", json=EVENT, headers=api.publish)
    assert response.status_code == 201
    body = response.json()
    assert body["duplicate"] is False
    assert body["event"]["title"] == "web-1 down"
    assert body["event"]["created_at"].endswith("Z")
    assert [d["state"] for d in body["deliveries"]] == ["pending"]


async def test_same_idempotency_key_answers_200_with_the_first_event(api: Api) -> None:
    await _channel(api)
    first = await api.client.post(
        "/v1/events", json=EVENT | {"idempotency_key": "k1"}, headers=api.publish
    )
    again = await api.client.post(
        "/v1/events",
        json=EVENT | {"idempotency_key": "k1", "title": "other words"},
        headers=api.publish,
    )
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["duplicate"] is True
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["event"] == first.json()["event"]
    assert await count(api.service.hub, "events") == 1


async def test_batch_publish_is_one_transaction(api: Api) -> None:
    await _channel(api)
    events = [EVENT | {"subject": f"s{i}"} for i in range(3)]
    response = await api.client.post(
        "/v1/events/batch", json={"events": events}, headers=api.publish
    )
    assert response.status_code == 201
    assert len(response.json()["results"]) == 3
    bad = [*events, EVENT | {"kind": "has space"}]
    refused = await api.client.post("/v1/events/batch", json={"events": bad}, headers=api.publish)
    assert refused.status_code == 422
    assert "events[3].kind" in _error(refused.json())["message"]
    assert await count(api.service.hub, "events") == 3


async def test_get_event_and_unknown_event(api: Api) -> None:
    await _channel(api)
    created = (await api.client.post("/v1/events", json=EVENT, headers=api.publish)).json()
    got = await api.client.get(f"/v1/events/{created['event']['id']}", headers=api.read)
    assert got.status_code == 200
    assert got.json()["event"] == created["event"]
    missing = await api.client.get("/v1/events/999", headers=api.read)
    assert missing.status_code == 404
    assert _error(missing.json())["code"] == "not_found"


async def test_event_over_256_kib_is_413_and_stores_nothing(api: Api) -> None:
    big = EVENT | {"body": "x" * (256 * 1024)}
    response = await api.client.post("/v1/events", json=big, headers=api.publish)
    assert response.status_code == 413
    assert _error(response.json())["code"] == "too_large"
    assert await count(api.service.hub, "events") == 0


async def test_nul_bytes_and_lone_surrogates_are_422_naming_the_field(api: Api) -> None:
    for raw, field in (
        ('{"kind": "a.b", "subject": "s", "title": "bad\\u0000title"}', "title"),
        ('{"kind": "a.b", "subject": "s", "data": {"x": "\\ud800"}}', "data.x"),
        ('{"kind": "a.b", "subject": "s", "labels": {"env": "a\\u0000"}}', "labels"),
    ):
        response = await api.client.post(
            "/v1/events",
            content=raw.encode(),
            headers=api.publish | {"content-type": "application/json"},
        )
        assert response.status_code == 422, (raw, response.text)
        assert field in _error(response.json())["message"], response.text
    assert await count(api.service.hub, "events") == 0


async def test_malformed_and_unknown_fields_are_422(api: Api) -> None:
    for body in (b"{not json", b"[]", b'{"kind": "a.b"}', b'{"kind":"a.b","subject":"s","x":1}'):
        response = await api.client.post(
            "/v1/events", content=body, headers=api.publish | {"content-type": "application/json"}
        )
        assert response.status_code == 422, (body, response.text)
        _error(response.json())
