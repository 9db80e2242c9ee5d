"""Security headers on every UI response, cross-site writes refused, HTML errors in the UI."""

from __future__ import annotations

import pytest

from tests.web import data
from tests.web.conftest import BASE, Ui
from tidings.core.states import State
from tidings.web.guard import CSP


@pytest.mark.parametrize(
    "path", ["/ui/login", "/ui/static/app.css", "/ui/static/app.js", "/ui/nope", "/ui/"]
)
async def test_every_ui_response_carries_the_security_headers(ui: Ui, path: str) -> None:
    response = await ui.client.get(path)
    assert response.headers["content-security-policy"] == CSP
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "same-origin"


async def test_ui_errors_are_html_while_the_api_stays_json(logged_in: Ui) -> None:
    client = logged_in.client
    for path in ("/ui/nope", "/ui/deliveries/999999", "/ui/channels/424242/edit"):
        page = await client.get(path)
        assert page.status_code == 404, path
        assert page.headers["content-type"].startswith("text/html")
        assert "Not found" in page.text
    api = await client.get("/v1/nope")
    assert api.status_code == 404
    assert api.json()["error"]["code"] == "not_found"
    assert (await client.get("/")).headers["location"] == "/ui/"


CROSS_SITE = [
    {"Origin": "https://evil.example"},
    {"Sec-Fetch-Site": "cross-site"},
    {"Sec-Fetch-Site": "same-site", "Origin": "https://sub.tidings.test"},
    {"Origin": "https://evil.example", "Sec-Fetch-Site": "same-origin"},
    {},  # a client that says nothing about where it comes from
]


@pytest.mark.parametrize("headers", CROSS_SITE)
async def test_a_cross_site_post_is_refused_and_changes_nothing(
    logged_in: Ui, headers: dict[str, str]
) -> None:
    hub = logged_in.service.hub
    channel = await data.webhook(hub, "ops-hook")
    await data.publish(hub, "disk full")
    await data.settle(hub, channel, fail=True)
    (row,) = (await hub.deliveries()).items
    client = logged_in.client
    for path in (
        f"/ui/deliveries/{row.delivery.id}/resend",
        f"/ui/channels/{channel.id}/disable",
        "/ui/deliveries/resend-failed",
        "/ui/logout",
    ):
        response = await client.post(path, data={"request_id": "x"}, headers=headers)
        assert response.status_code == 403, path
        assert "Cross-site request refused" in response.text
        assert response.headers["content-security-policy"] == CSP
    assert (await hub.delivery(row.delivery.id)).view.delivery.state == State.FAILED
    assert (await hub.channels.get(channel.id)).enabled
    assert (await client.get("/ui/")).status_code == 200  # logout was refused too


async def test_same_origin_posts_pass(logged_in: Ui) -> None:
    hub = logged_in.service.hub
    channel = await data.webhook(hub, "ops-hook")
    for headers in ({"Sec-Fetch-Site": "same-origin"}, {"Origin": BASE}):
        response = await logged_in.client.post(
            f"/ui/channels/{channel.id}/disable", headers=headers
        )
        assert response.status_code == 303
    assert not (await hub.channels.get(channel.id)).enabled


async def test_login_itself_is_guarded(ui: Ui) -> None:
    response = await ui.client.post(
        "/ui/login", data={"token": ui.admin_token}, headers={"Origin": "https://evil.example"}
    )
    assert response.status_code == 403
    assert "set-cookie" not in response.headers
