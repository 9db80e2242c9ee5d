"""Every route needs the right token (except /healthz and /readyz)."""

from __future__ import annotations

import re

from tests.api.conftest import Api, bearer

OPEN = {"/healthz", "/readyz"}


def _routes(api: Api) -> list[tuple[str, str]]:
    """Every registered route, as the OpenAPI document lists them."""
    found = []
    for path, operations in api.app.openapi()["paths"].items():
        concrete = re.sub(r"\{[^}]+\}", "1", path)
        found.extend((method.upper(), concrete) for method in operations)
    return sorted(found)


async def test_every_route_but_health_needs_a_token(api: Api) -> None:
    routes = _routes(api)
    assert len(routes) >= 15
    for method, path in routes:
        response = await api.client.request(method, path)
        if path in OPEN:
            assert response.status_code in (200, 503), (method, path)
            continue
        assert response.status_code == 401, (method, path, response.status_code)
        assert response.json()["error"]["code"] == "unauthorized"
        assert response.headers["www-authenticate"] == "Bearer"


async def test_a_wrong_token_is_401(api: Api) -> None:
    response = await api.client.get("/v1/channels", headers=bearer("tdg_not-a-real-token"))
    assert response.status_code == 401


async def test_a_read_token_cannot_write(api: Api) -> None:
    for method, path in _routes(api):
        if method == "GET" or path in OPEN:
            continue
        response = await api.client.request(method, path, headers=api.read, json={})
        assert response.status_code == 403, (method, path, response.status_code)
        assert response.json()["error"]["code"] == "forbidden"


async def test_a_publish_token_cannot_read_channels_or_history(api: Api) -> None:
    for path in ("/v1/channels", "/v1/deliveries", "/v1/events/1", "/metrics"):
        response = await api.client.get(path, headers=api.publish)
        assert response.status_code == 403, path
    ok = await api.client.post(
        "/v1/events", json={"kind": "a.b", "subject": "s"}, headers=api.publish
    )
    assert ok.status_code == 201


async def test_metrics_with_a_read_token(api: Api) -> None:
    await api.client.post("/v1/channels", json={"name": "ops", "kind": "inbox"}, headers=api.admin)
    await api.client.post("/v1/events", json={"kind": "a.b", "subject": "s"}, headers=api.publish)
    response = await api.client.get("/metrics", headers=api.read)
    assert response.status_code == 200
    assert 'tidings_deliveries{channel="ops",state="pending"} 1.0' in response.text
    assert "tidings_oldest_pending_age_seconds" in response.text
    ready = await api.client.get("/readyz")
    assert ready.json() == {"status": "ready"}
