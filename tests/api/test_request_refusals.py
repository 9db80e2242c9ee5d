"""Requests refused before a route runs: a body that is not JSON, a method the path does not
serve. Each refusal is the JSON error body, says what is wrong, needs a token like the route
itself, and changes nothing."""

from __future__ import annotations

import re

import pytest

import tidings
from tests.api.conftest import Api, bearer
from tests.conftest import count

NOT_JSON = [
    pytest.param(
        b'{"name": 1', "not valid JSON (Expecting ',' delimiter at character 10)", id="cut"
    ),
    pytest.param(b'{"name": "\xff\xfe"}', "not valid JSON (send a UTF-8", id="not-utf8"),
    pytest.param(b"", "is required (a JSON object)", id="empty"),
]
TABLES = ("events", "deliveries", "channels", "api_tokens")


def _operations(api: Api) -> list[tuple[str, str, str]]:
    """(method, concrete path, its body: "required", "optional" or "none") of every
    documented operation."""
    found = []
    for path, operations in api.app.openapi()["paths"].items():
        concrete = re.sub(r"\{[^}]+\}", "1", path)
        for method, spec in operations.items():
            body = spec.get("requestBody")
            takes = "none" if body is None else "required" if body.get("required") else "optional"
            found.append((method.upper(), concrete, takes))
    return sorted(found)


def _with_body(api: Api, *, required: bool = False) -> list[tuple[str, str]]:
    wanted = ("required",) if required else ("required", "optional")
    found = [(method, path) for method, path, body in _operations(api) if body in wanted]
    assert len(found) >= 8
    return found


def _token_for(api: Api, path: str) -> dict[str, str]:
    if path.startswith("/v1/worker/"):
        return api.worker
    if path.startswith("/v1/events"):
        return api.publish
    return api.admin


async def _counts(hub: tidings.Hub) -> dict[str, int]:
    return {table: await count(hub, table) for table in TABLES}


@pytest.mark.parametrize(("body", "says"), NOT_JSON)
async def test_a_body_that_is_not_json_is_422_naming_the_body_on_every_route(
    api: Api, hub: tidings.Hub, body: bytes, says: str
) -> None:
    before = await _counts(hub)
    for method, path in _with_body(api, required=not body):  # an optional body may be empty
        headers = _token_for(api, path) | {"Content-Type": "application/json"}
        response = await api.client.request(method, path, content=body, headers=headers)
        assert response.status_code == 422, (method, path, response.text)
        error = response.json()["error"]
        assert error["code"] == "invalid", (method, path)
        assert error["message"].startswith(f"body: {says}"), (method, path, error)
    assert await _counts(hub) == before


async def test_json_that_is_not_an_object_is_422_naming_the_body(api: Api) -> None:
    for method, path in _with_body(api):
        headers = _token_for(api, path)
        for body in ([1, 2], "text", 3):
            response = await api.client.request(method, path, json=body, headers=headers)
            assert response.status_code == 422, (method, path, body, response.text)
            assert response.json()["error"]["message"] == "body: must be a JSON object"


@pytest.mark.parametrize(("body", "says"), NOT_JSON)
async def test_a_body_that_is_not_json_still_needs_a_token(
    api: Api, body: bytes, says: str
) -> None:
    """FastAPI decodes the body before the route's token check: without the rule, anyone
    learnt what was wrong with their body."""
    del says
    for method, path in _with_body(api):
        for headers in ({}, bearer("tdg_not-a-real-token")):
            headers = headers | {"Content-Type": "application/json"}
            response = await api.client.request(method, path, content=body, headers=headers)
            assert response.status_code == 401, (method, path, response.text)
            assert response.json()["error"]["code"] == "unauthorized"
            assert response.headers["www-authenticate"] == "Bearer"


async def test_405_allows_every_method_the_path_is_served_by(api: Api) -> None:
    """RFC 9110: a 405 names the methods the resource supports. Starlette named those of
    the first route on the path only (`Allow: GET` for GET and POST /v1/tokens)."""
    templates = api.app.openapi()["paths"]
    served: dict[str, set[str]] = {}
    for _method, path, _body in _operations(api):
        served[path] = {
            method.upper()
            for template, operations in templates.items()
            if re.fullmatch(re.sub(r"\{[^}]+\}", "[0-9]+", template), path)
            for method in operations
        }
    assert any(len(methods) > 1 for methods in served.values())
    for path, methods in served.items():
        response = await api.client.put(path, headers=api.admin, json={})
        assert response.status_code == 405, (path, response.text)
        assert response.json()["error"]["code"] == "method_not_allowed"
        assert response.headers["allow"] == ", ".join(sorted(methods)), path


async def test_an_id_that_is_not_a_number_names_no_resource(api: Api) -> None:
    """Ids are whole numbers in the path itself: `/v1/channels/health` is the health route's
    alone (PATCH to it was routed to a channel called "health" and refused as an id), and
    `/v1/channels/abc` is no resource at all."""
    with_ids = [
        (method, path)
        for path, operations in api.app.openapi()["paths"].items()
        if "{" in path
        for method in operations
    ]
    assert len(with_ids) >= 10
    for method, template in with_ids:
        for wrong in ("abc", "-1", "1.5"):
            path = re.sub(r"\{[^}]+\}", wrong, template)
            answer = await api.client.request(method.upper(), path, headers=api.admin)
            assert answer.status_code in (404, 405), (method, path, answer.text)
            assert answer.json()["error"]["code"] in ("not_found", "method_not_allowed")
    health = await api.client.patch("/v1/channels/health", headers=api.admin, json={})
    assert health.status_code == 405
    assert health.headers["allow"] == "GET"
