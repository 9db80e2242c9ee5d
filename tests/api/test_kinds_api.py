"""`GET /v1/channel-kinds`: the kinds as their adapters declare them, documented in OpenAPI,
and the channel schema pointing at it."""

from __future__ import annotations

import httpx

import tidings
from tests.api.conftest import Api
from tests.api.tiny import TinyAdapter, tiny_registry
from tidings.api import create_app
from tidings.service import Service


async def test_the_kinds_route_lists_every_declaration(api: Api) -> None:
    response = await api.client.get("/v1/channel-kinds", headers=api.read)
    assert response.status_code == 200, response.text
    kinds = response.json()
    assert kinds == [spec.as_json() for spec in api.service.kind_specs()]
    by_kind = {k["kind"]: k for k in kinds}
    assert set(by_kind) == set(api.service.kinds())
    wecom = by_kind["wecom"]
    assert wecom["default_rate_per_min"] == 18
    assert wecom["limit"]["name"].startswith("max_")
    (url,) = wecom["fields"]
    assert (url["name"], url["required"], url["secret"]) == ("webhook_url", True, True)


async def test_the_kinds_route_needs_a_read_token(api: Api) -> None:
    assert (await api.client.get("/v1/channel-kinds")).status_code == 401
    publish_only = await api.client.get("/v1/channel-kinds", headers=api.publish)
    assert publish_only.status_code == 403


async def test_a_declaration_comes_through_whole(db_url: str) -> None:
    async with tidings.Hub(db_url, registry=tiny_registry()) as tiny_hub:
        service = Service(tiny_hub)
        token, _ = await service.create_token("reader", ["read"])
        app = create_app(service)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t.test") as client:
            response = await client.get(
                "/v1/channel-kinds", headers={"Authorization": f"Bearer {token}"}
            )
    tiny = next(k for k in response.json() if k["kind"] == "tiny")
    assert tiny == TinyAdapter.spec.as_json()
    fields = {f["name"]: f for f in tiny["fields"]}
    assert fields["tone"]["choices"] == ["low", "high"]
    assert fields["retries"]["maximum"] == 5
    assert "default" not in fields["url"]  # left out as in the declaration, not null


async def test_openapi_documents_the_kinds_and_points_config_at_them(api: Api) -> None:
    schema = (await api.client.get("/openapi.json")).json()
    route = schema["paths"]["/v1/channel-kinds"]["get"]
    ok = route["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok["items"]["$ref"].endswith("/KindOut")
    components = schema["components"]["schemas"]
    assert {"KindOut", "ConfigFieldOut", "SizeLimitOut"} <= set(components)
    for model in ("ChannelIn", "ChannelPatch", "ChannelOut"):
        config = components[model]["properties"]["config"]
        assert "/v1/channel-kinds" in config["description"], model
