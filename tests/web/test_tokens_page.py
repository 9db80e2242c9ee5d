"""The tokens page (S5): list, create (the value shown once), revoke (its sessions end)."""

from __future__ import annotations

import re

from tests.web.conftest import SAME_ORIGIN, Ui
from tidings.web import channels, deliveries, events, tokens


async def test_tokens_are_listed_without_their_values(logged_in: Ui) -> None:
    page = await logged_in.client.get("/ui/tokens")
    assert page.status_code == 200
    assert "ops-admin" in page.text
    assert "reader" in page.text
    assert logged_in.admin_token not in page.text
    assert logged_in.read_token not in page.text


async def test_a_new_token_is_shown_once(logged_in: Ui) -> None:
    created = await logged_in.post(
        "/ui/tokens",
        {
            "name": "edge-worker",
            "scope_worker": "on",
            "kinds": "webhook, slack",
            "expires_in": "30d",
        },
    )
    assert created.status_code == 201, created.text
    assert created.headers["cache-control"] == "no-store"
    (value,) = re.findall(r'<code id="new-token">(tdg_[^<]+)</code>', created.text)
    assert (await logged_in.service.access.authenticate(value)) is not None
    (info,) = [t for t in await logged_in.service.access.tokens() if t.name == "edge-worker"]
    assert info.scopes == ("worker",)
    assert info.kinds == ("slack", "webhook")
    assert info.expires_at is not None
    again = await logged_in.client.get("/ui/tokens")
    assert value not in again.text


async def test_bad_input_is_a_message_on_the_page(logged_in: Ui) -> None:
    for form in (
        {"name": "x"},
        {"name": "x", "scope_worker": "on", "scope_admin": "on"},
        {"name": "x", "scope_read": "on", "expires_in": "soon"},
    ):
        page = await logged_in.post("/ui/tokens", form)
        assert page.status_code == 422, form
        assert "alert-error" in page.text


async def test_revoking_the_sessions_own_token_logs_it_out(logged_in: Ui) -> None:
    (reader,) = [t for t in await logged_in.service.access.tokens() if t.name == "reader"]
    revoked = await logged_in.post(f"/ui/tokens/{reader.id}/revoke")
    assert revoked.status_code == 303
    assert revoked.headers["location"] == f"/ui/tokens?revoked={reader.id}"
    page = await logged_in.client.get(revoked.headers["location"])
    assert "revoked; its sessions ended" in page.text
    assert await logged_in.service.access.authenticate(logged_in.read_token) is None
    huge = await logged_in.post(f"/ui/tokens/{2**70}/revoke")
    assert huge.headers["location"] == "/ui/tokens"
    (admin,) = [t for t in await logged_in.service.access.tokens() if t.name == "ops-admin"]
    await logged_in.post(f"/ui/tokens/{admin.id}/revoke")
    assert (await logged_in.client.get("/ui/tokens")).status_code == 303


async def test_every_page_with_an_id_is_404_for_one_that_is_not_a_number(logged_in: Ui) -> None:
    """As in the API, an id is a whole number in each route itself: other text names no page,
    on every page with an id (never a 422 or a 500)."""
    routers = [channels.router, deliveries.router, events.router, tokens.router]
    ui_paths = [
        (method, route.path)
        for router in routers
        for route in router.routes
        if "{" in getattr(route, "path", "")
        for method in getattr(route, "methods", ())
    ]
    assert len(ui_paths) >= 8
    for method, path in ui_paths:
        wrong = "/ui" + re.sub(r"\{[^}]+\}", "abc", path)
        answer = await logged_in.client.request(method, wrong, headers=SAME_ORIGIN)
        assert answer.status_code == 404, (method, wrong, answer.status_code)
