"""`POST /v1/events` answered on its fast path (tidings.api.fast_publish) is answered as the
FastAPI route answers it; every refusal is the route's own. A body sent as
`application/json; charset=utf-8` takes the route, so both paths are compared here."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from starlette.types import Receive, Scope, Send

from tests.api.conftest import Api, bearer
from tests.faults import POISON, faults
from tidings.api.fast_publish import FastPublish
from tidings.api.schemas import BatchOut, PublishOut

EVENT = {"kind": "monitor.down", "subject": "web-1", "severity": "high", "title": "down"}
FAST = {"Content-Type": "application/json"}
ROUTE = {"Content-Type": "application/json; charset=utf-8"}
PATHS = pytest.mark.parametrize("path", [FAST, ROUTE], ids=["fast", "route"])


async def _post(api: Api, body: object, headers: dict[str, str]) -> Any:
    return await api.client.post("/v1/events", content=json.dumps(body), headers=headers)


@pytest.fixture
async def inbox(api: Api) -> None:
    answer = await api.client.post(
        "/v1/channels", json={"name": "ops", "kind": "inbox"}, headers=api.admin
    )
    assert answer.status_code == 201


@pytest.mark.usefixtures("inbox")
async def test_both_paths_answer_the_same_shape(api: Api) -> None:
    fast = await _post(api, EVENT, api.publish | FAST)
    route = await _post(api, EVENT, api.publish | ROUTE)
    assert (fast.status_code, route.status_code) == (201, 201)
    assert fast.headers["content-type"] == route.headers["content-type"]

    def shape(body: dict[str, Any]) -> dict[str, Any]:
        body["event"] |= {"id": 0, "created_at": ""}
        for d in body["deliveries"]:
            d |= {"id": 0, "event_id": 0, "message_id": "", "created_at": "", "next_attempt_at": ""}
        return body

    assert shape(fast.json()) == shape(route.json())
    assert PublishOut.model_validate(fast.json()).model_dump() == fast.json()


@pytest.mark.usefixtures("inbox")
@PATHS
async def test_a_repeated_key_answers_200_replayed(api: Api, path: dict[str, str]) -> None:
    keyed = EVENT | {"idempotency_key": "k"}
    first = await _post(api, keyed, api.publish | path)
    again = await _post(api, keyed, api.publish | path)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["duplicate"] is True


@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        ({}, 401, "unauthorized"),
        (bearer("tdg_nope"), 401, "unauthorized"),
        ({"Authorization": "Basic abc"}, 401, "unauthorized"),
    ],
)
async def test_refusals_are_the_routes_own(
    api: Api, headers: dict[str, str], status: int, code: str
) -> None:
    answer = await _post(api, EVENT, headers | FAST)
    assert answer.status_code == status
    assert answer.json()["error"]["code"] == code
    assert answer.headers["WWW-Authenticate"] == "Bearer"


async def test_a_token_without_the_publish_scope_is_forbidden(api: Api) -> None:
    answer = await _post(api, EVENT, api.read | FAST)
    assert answer.status_code == 403
    assert "publish" in answer.json()["error"]["message"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"subject": "s"}, "kind"),
        (EVENT | {"severity": "apocalyptic"}, "severity"),
        (EVENT | {"surprise": 1}, "surprise"),
        ([EVENT], "body"),
    ],
)
async def test_a_bad_body_gets_the_routes_422(api: Api, body: object, field: str) -> None:
    fast = await _post(api, body, api.publish | FAST)
    route = await _post(api, body, api.publish | ROUTE)
    assert fast.status_code == route.status_code == 422
    assert fast.json() == route.json()
    assert fast.json()["error"]["message"].startswith(field)


async def test_a_body_that_is_not_json_gets_the_routes_answer(api: Api) -> None:
    fast = await api.client.post("/v1/events", content=b"{nope", headers=api.publish | FAST)
    route = await api.client.post("/v1/events", content=b"{nope", headers=api.publish | ROUTE)
    assert fast.status_code == route.status_code == 422
    assert fast.json() == route.json()


@pytest.mark.usefixtures("inbox")
async def test_a_store_error_is_answered_as_the_error_handler_does(api: Api) -> None:
    async with faults(api.service.hub):
        fast = await _post(api, EVENT | {"title": POISON}, api.publish | FAST)
        route = await _post(api, EVENT | {"title": POISON}, api.publish | ROUTE)
    assert fast.status_code == route.status_code == 409
    assert fast.json() == route.json()
    assert fast.json()["error"]["code"] == "conflict"


async def test_the_token_use_is_recorded(api: Api) -> None:
    token, info = await api.service.create_token("producer", ["publish"])
    assert (await _post(api, EVENT, bearer(token) | FAST)).status_code == 201
    (listed,) = [t for t in await api.service.hub.store.list_tokens() if t.id == info.id]
    assert listed.last_used_at is not None


async def test_the_callers_traceparent_is_kept(api: Api) -> None:
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    answer = await _post(api, EVENT, api.publish | FAST | {"traceparent": parent})
    event = (await api.service.hub.get_event(answer.json()["event"]["id"])).event
    assert event.traceparent == parent


@pytest.mark.usefixtures("inbox")
async def test_the_fast_path_answers_alone_and_hands_on_the_rest(api: Api) -> None:
    """Before an app that answers 599 to all: a well-formed publish is answered without it;
    a bad body, a route's content type, another path or a read token reach it."""
    reached: list[str] = []

    async def behind(scope: Scope, _receive: Receive, send: Send) -> None:
        reached.append(scope["path"])
        await send({"type": "http.response.start", "status": 599, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    transport = httpx.ASGITransport(app=FastPublish(behind, api.service))
    async with httpx.AsyncClient(transport=transport, base_url="http://t.test") as client:

        async def post(body: object, headers: dict[str, str], path: str = "/v1/events") -> int:
            answer = await client.post(path, content=json.dumps(body), headers=headers)
            return answer.status_code

        assert await post(EVENT, api.publish | FAST) == 201
        assert reached == []
        assert await post({"subject": "s"}, api.publish | FAST) == 599
        assert await post(EVENT, api.publish | ROUTE) == 599
        assert await post(EVENT, api.read | FAST) == 599
        assert await post(EVENT, api.publish | FAST, "/v1/events/batch") == 599
    assert len(reached) == 4


@pytest.mark.usefixtures("inbox")
async def test_the_batch_answer_has_the_documented_shape(api: Api) -> None:
    """The batch route serializes its answer without checking it against BatchOut: the
    shapes must stay equal."""
    body = {"events": [EVENT | {"subject": f"s{i}"} for i in range(3)]}
    answer = await api.client.post("/v1/events/batch", json=body, headers=api.publish)
    assert answer.status_code == 201
    assert BatchOut.model_validate(answer.json()).model_dump() == answer.json()


async def test_a_token_lookup_the_database_fails_is_a_clean_503_on_both_paths(api: Api) -> None:
    hub = api.service.hub

    async def rename(old: str, new: str) -> None:
        async with hub.store.engine.begin() as conn:
            await conn.execute(text(f"ALTER TABLE {old} RENAME TO {new}"))

    await rename("api_tokens", "api_tokens_away")
    try:
        fast = await _post(api, EVENT, api.publish | FAST)
        route = await _post(api, EVENT, api.publish | ROUTE)
    finally:
        await rename("api_tokens_away", "api_tokens")
    assert fast.status_code == route.status_code == 503
    assert fast.json() == route.json()
    assert fast.json()["error"]["code"] == "store"
