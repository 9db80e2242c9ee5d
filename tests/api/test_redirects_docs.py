"""Redirects never echo the Host header; /docs is served by tidings itself under a CSP."""

from __future__ import annotations

import pytest

from tests.api.conftest import Api
from tidings.api.redirects import relative
from tidings.server import create_app


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("http://evil.example/ui/", "/ui/"),
        ("https://evil.example:8443/v1/channels?x=1#f", "/v1/channels?x=1#f"),
        ("/ui/login?next=%2Fui%2F", "/ui/login?next=%2Fui%2F"),
        ("http://evil.example//other.example/x", "/other.example/x"),
        ("//other.example/x", "/x"),
        ("/\\other.example/x", "/other.example/x"),
        ("http://evil.example", "/"),
    ],
)
def test_locations_are_made_relative(location: str, expected: str) -> None:
    assert relative(location) == expected


async def test_slash_redirects_do_not_echo_the_host_header(api: Api) -> None:
    import httpx

    transport = httpx.ASGITransport(app=create_app(api.service))
    async with httpx.AsyncClient(transport=transport, base_url="http://tidings.test") as client:
        evil = {"Host": "evil.example"}
        ui = await client.get("/ui", headers=evil)
        assert ui.status_code in (307, 308)
        assert ui.headers["location"] == "/ui/"
        listed = await client.get("/v1/channels/", headers=evil | api.read)
        assert listed.status_code in (307, 308)
        assert listed.headers["location"] == "/v1/channels"
        home = await client.get("/", headers=evil)
        assert home.headers["location"] == "/ui/"


async def test_docs_come_from_tidings_under_a_csp(api: Api) -> None:
    page = await api.client.get("/docs")
    assert page.status_code == 200
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp
    assert "unsafe-inline" not in csp
    assert "cdn" not in page.text.lower()
    assert "<script>" not in page.text  # no inline script: it would need the CSP loosened
    for src in (
        "/docs/assets/swagger-ui-bundle.js",
        "/docs/assets/swagger-ui.css",
        "/docs/start.js",
    ):
        assert src in page.text
        asset = await api.client.get(src)
        assert asset.status_code == 200, src
        assert len(asset.content) > 50
    assert (await api.client.get("/redoc")).status_code == 404  # no CDN page left behind
