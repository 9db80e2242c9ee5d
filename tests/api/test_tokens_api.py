"""`/v1/tokens` (S5): tokens with names, scopes, last use and expiry; listed without their
value, revoked at once, on both backends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import update

from tests.api.conftest import Api, bearer
from tidings.store.schema import api_tokens


async def _create(api: Api, **body: object) -> dict[str, object]:
    response = await api.client.post(
        "/v1/tokens", json={"name": "ci", "scopes": ["publish"]} | body, headers=api.admin
    )
    assert response.status_code == 201, response.text
    created: dict[str, object] = response.json()
    return created


async def test_a_token_is_shown_once_and_never_listed(api: Api) -> None:
    created = await _create(api, name="ci-publisher")
    value = str(created["token"])
    assert value.startswith("tdg_")
    assert created["state"] == "active"
    assert created["last_used_at"] is None
    listed = await api.client.get("/v1/tokens", headers=api.admin)
    assert listed.status_code == 200
    assert value not in listed.text
    (row,) = [t for t in listed.json()["items"] if t["name"] == "ci-publisher"]
    assert "token" not in row
    assert row["scopes"] == ["publish"]
    ok = await api.client.post(
        "/v1/events", json={"kind": "a.b", "subject": "s"}, headers=bearer(value)
    )
    assert ok.status_code == 201


async def test_revoking_a_token_stops_it_at_once(api: Api) -> None:
    created = await _create(api)
    headers = bearer(str(created["token"]))
    event = {"kind": "a.b", "subject": "s"}
    assert (await api.client.post("/v1/events", json=event, headers=headers)).status_code == 201
    revoked = await api.client.delete(f"/v1/tokens/{created['id']}", headers=api.admin)
    assert revoked.status_code == 204
    refused = await api.client.post("/v1/events", json=event, headers=headers)
    assert refused.status_code == 401
    listed = (await api.client.get("/v1/tokens", headers=api.admin)).json()["items"]
    (row,) = [t for t in listed if t["id"] == created["id"]]
    assert row["state"] == "revoked"
    assert row["revoked_at"] is not None
    again = await api.client.delete(f"/v1/tokens/{created['id']}", headers=api.admin)
    assert again.status_code == 204  # revoking twice keeps the first time
    unknown = await api.client.delete("/v1/tokens/999999", headers=api.admin)
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "not_found"


async def test_an_expired_token_stops_working(api: Api) -> None:
    created = await _create(api, expires_in_s=3600)
    expires = datetime.fromisoformat(str(created["expires_at"]).replace("Z", "+00:00"))
    assert timedelta(minutes=59) < expires - datetime.now(UTC) <= timedelta(hours=1)
    headers = bearer(str(created["token"]))
    event = {"kind": "a.b", "subject": "s"}
    assert (await api.client.post("/v1/events", json=event, headers=headers)).status_code == 201
    async with api.service.hub.store.engine.begin() as conn:
        await conn.execute(
            update(api_tokens)
            .where(api_tokens.c.id == created["id"])
            .values(expires_at=datetime.now(UTC) - timedelta(seconds=1))
        )
    refused = await api.client.post("/v1/events", json=event, headers=headers)
    assert refused.status_code == 401
    assert "expired" in refused.json()["error"]["message"]
    listed = (await api.client.get("/v1/tokens", headers=api.admin)).json()["items"]
    assert [t["state"] for t in listed if t["id"] == created["id"]] == ["expired"]


async def test_last_use_is_recorded_at_most_once_a_minute(api: Api) -> None:
    created = await _create(api, scopes=["read"])
    headers = bearer(str(created["token"]))
    assert (await api.client.get("/v1/channels", headers=headers)).status_code == 200

    async def last_used() -> object:
        listed = (await api.client.get("/v1/tokens", headers=api.admin)).json()["items"]
        (row,) = [t for t in listed if t["id"] == created["id"]]
        return row["last_used_at"]

    first = await last_used()
    assert first is not None
    for _ in range(3):
        assert (await api.client.get("/v1/channels", headers=headers)).status_code == 200
    assert await last_used() == first


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"scopes": ["worker", "admin"]}, "scopes"),
        ({"scopes": ["root"]}, "scopes"),
        ({"scopes": []}, "scopes"),
        ({"scopes": ["read"], "kinds": ["webhook"]}, "kinds"),
        ({"scopes": ["worker"], "kinds": ["pigeon"]}, "kinds"),
        ({"scopes": ["worker"], "tenants": []}, "tenants"),
        ({"name": "bad\u0000name"}, "name"),
        ({"name": ""}, "name"),
        ({"expires_in_s": 0}, "expires_in_s"),
        ({"expires_in_s": 1e300}, "expires_in_s"),
    ],
)
async def test_bad_tokens_are_refused_naming_the_field(
    api: Api, body: dict[str, object], field: str
) -> None:
    response = await api.client.post(
        "/v1/tokens", json={"name": "x", "scopes": ["read"]} | body, headers=api.admin
    )
    assert response.status_code == 422, response.text
    assert response.json()["error"]["message"].startswith(field)


async def test_only_admin_tokens_manage_tokens(api: Api) -> None:
    for headers in (api.read, api.publish, api.worker):
        assert (await api.client.get("/v1/tokens", headers=headers)).status_code == 403
        created = await api.client.post(
            "/v1/tokens", json={"name": "x", "scopes": ["admin"]}, headers=headers
        )
        assert created.status_code == 403
        assert (await api.client.delete("/v1/tokens/1", headers=headers)).status_code == 403
