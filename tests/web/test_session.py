"""Login, logout, server-side sessions (S5), who may hold a session, and login throttling."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
from sqlalchemy import update

from tests.web.conftest import BASE, SAME_ORIGIN, Ui
from tidings.auth import token_hash
from tidings.server import create_app
from tidings.store.schema import api_tokens, ui_sessions
from tidings.web.session import COOKIE


async def test_login_sets_a_strict_httponly_cookie_that_holds_no_token(ui: Ui) -> None:
    response = await ui.login()
    assert response.status_code == 303
    assert response.headers["location"] == "/ui/"
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
    assert "Path=/ui" in cookie
    assert ui.admin_token not in cookie
    assert token_hash(ui.admin_token) not in cookie
    page = await ui.client.get("/ui/")
    assert page.status_code == 200
    assert "ops-admin" in page.text


async def test_logout_is_a_post_and_ends_the_session(ui: Ui) -> None:
    await ui.login()
    assert (await ui.client.get("/ui/logout")).status_code == 405
    response = await ui.post("/ui/logout")
    assert response.status_code == 303
    assert response.headers["location"] == "/ui/login"
    page = await ui.client.get("/ui/deliveries")
    assert page.status_code == 303
    assert page.headers["location"].startswith("/ui/login?next=")


async def test_logout_ends_the_session_on_the_server_not_only_in_the_browser(ui: Ui) -> None:
    await ui.login()
    stolen = ui.client.cookies[COOKIE]
    assert (await ui.post("/ui/logout")).status_code == 303
    ui.client.cookies.set(COOKIE, stolen, path="/ui")  # the old cookie, replayed
    response = await ui.client.get("/ui/")
    assert response.status_code == 303
    assert response.headers["location"].startswith("/ui/login")


async def test_pages_need_a_session(ui: Ui) -> None:
    for path in ("/ui/", "/ui/deliveries", "/ui/channels", "/ui/inbox", "/ui/tokens"):
        response = await ui.client.get(path)
        assert response.status_code == 303, path
        assert response.headers["location"].startswith("/ui/login")


async def test_a_non_admin_or_unknown_token_cannot_log_in(ui: Ui) -> None:
    response = await ui.login(ui.read_token)
    assert response.status_code == 403
    assert "admin scope" in response.text
    assert "set-cookie" not in response.headers
    response = await ui.login("tdg_not-a-token")
    assert response.status_code == 401
    assert "set-cookie" not in response.headers
    assert (await ui.client.get("/ui/")).status_code == 303


async def test_a_revoked_token_ends_its_sessions(ui: Ui) -> None:
    await ui.login()
    assert (await ui.client.get("/ui/")).status_code == 200
    async with ui.service.hub.store.engine.begin() as conn:
        await conn.execute(
            update(api_tokens)
            .where(api_tokens.c.token_hash == token_hash(ui.admin_token))
            .values(revoked_at=datetime.now(UTC))
        )
    assert (await ui.client.get("/ui/")).status_code == 303


async def test_revoking_through_the_service_ends_the_sessions_opened_with_it(ui: Ui) -> None:
    await ui.login()
    (admin,) = [t for t in await ui.service.access.tokens() if t.name == "ops-admin"]
    await ui.service.access.revoke_token(admin.id)
    assert (await ui.client.get("/ui/")).status_code == 303
    assert await _sessions(ui) == 0  # the rows went with it


async def test_an_idle_session_ends(ui: Ui) -> None:
    await ui.login()
    assert (await ui.client.get("/ui/")).status_code == 200
    idle = ui.service.access.policy.idle_s
    await _age_sessions(ui, last_seen_at=datetime.now(UTC) - timedelta(seconds=idle + 5))
    assert (await ui.client.get("/ui/")).status_code == 303


async def test_a_busy_session_still_ends_at_its_absolute_lifetime(ui: Ui) -> None:
    await ui.login()
    await _age_sessions(ui, expires_at=datetime.now(UTC) - timedelta(seconds=1))
    assert (await ui.client.get("/ui/")).status_code == 303


async def test_a_visit_keeps_the_session_alive(ui: Ui) -> None:
    await ui.login()
    idle = ui.service.access.policy.idle_s
    await _age_sessions(ui, last_seen_at=datetime.now(UTC) - timedelta(seconds=idle - 30))
    assert (await ui.client.get("/ui/")).status_code == 200  # seen again: the clock restarts
    await _age_sessions(ui, expires_at=datetime.now(UTC) + timedelta(hours=1))
    assert (await ui.client.get("/ui/")).status_code == 200


async def test_a_forged_or_garbled_cookie_is_refused(ui: Ui) -> None:
    for value in ("x" * 43, token_hash(ui.admin_token), "%C3%A9" * 10, "a" * 5000):
        ui.client.cookies.set(COOKIE, value, path="/ui")
        assert (await ui.client.get("/ui/")).status_code == 303, value


async def test_login_keeps_only_local_next_targets(ui: Ui) -> None:
    response = await ui.client.post(
        "/ui/login",
        data={"token": ui.admin_token, "next": "https://evil.example/"},
        headers=SAME_ORIGIN,
    )
    assert response.headers["location"] == "/ui/"
    response = await ui.client.post(
        "/ui/login",
        data={"token": ui.admin_token, "next": "/ui/channels"},
        headers=SAME_ORIGIN,
    )
    assert response.headers["location"] == "/ui/channels"


async def test_failed_logins_are_throttled_per_address_without_locking_the_admin_out(
    ui: Ui,
) -> None:
    app = create_app(ui.service)

    def client_from(address: str) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=app, client=(address, 40000))
        return httpx.AsyncClient(transport=transport, base_url=BASE, headers=SAME_ORIGIN)

    async with client_from("203.0.113.9") as attacker, client_from("198.51.100.7") as admin:
        codes = [
            (await attacker.post("/ui/login", data={"token": f"tdg_guess-{i}"})).status_code
            for i in range(8)
        ]
        assert codes[:5] == [401] * 5
        assert 429 in codes[5:]
        refused = await attacker.post("/ui/login", data={"token": ui.admin_token})
        assert refused.status_code == 429  # the right token is not even looked at
        assert int(refused.headers["retry-after"]) >= 1
        assert "set-cookie" not in refused.headers
        assert "Too many failed logins" in refused.text
        welcome = await admin.post("/ui/login", data={"token": ui.admin_token})
        assert welcome.status_code == 303  # another address is not slowed down
        assert "set-cookie" in welcome.headers


async def _age_sessions(ui: Ui, **values: datetime) -> None:
    async with ui.service.hub.store.engine.begin() as conn:
        await conn.execute(update(ui_sessions).values(**values))


async def _sessions(ui: Ui) -> int:
    from tests.conftest import count

    return await count(ui.service.hub, "ui_sessions")
