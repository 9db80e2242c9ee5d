"""Login, logout, the session cookie, and who may hold a session."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import update

from tests.web.conftest import SAME_ORIGIN, Ui
from tidings.auth import token_hash
from tidings.store.schema import api_tokens
from tidings.web.session import Sessions


async def test_login_sets_a_strict_httponly_cookie_that_holds_no_token(ui: Ui) -> None:
    response = await ui.login()
    assert response.status_code == 303
    assert response.headers["location"] == "/ui/"
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
    assert "Path=/ui" in cookie
    assert ui.admin_token not in cookie
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


async def test_pages_need_a_session(ui: Ui) -> None:
    for path in ("/ui/", "/ui/deliveries", "/ui/channels", "/ui/inbox", "/ui/deliveries/1"):
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


async def test_a_forged_cookie_is_refused(ui: Ui) -> None:
    other = Sessions()  # another key: a cookie it signs must not pass here
    ui.client.cookies.set("tidings_session", other.issue(token_hash(ui.admin_token)), path="/ui")
    assert (await ui.client.get("/ui/")).status_code == 303


def test_session_values_expire_and_resist_tampering() -> None:
    now = [1000.0]
    sessions = Sessions(b"k" * 32, lifetime_s=60, clock=lambda: now[0])
    value = sessions.issue("ab" * 32)
    assert sessions.read(value) == "ab" * 32
    assert sessions.read(value.replace("ab", "cd", 1)) is None
    assert sessions.read(value[:-1] + ("0" if value[-1] != "0" else "1")) is None
    assert sessions.read("garbage") is None
    now[0] += 61
    assert sessions.read(value) is None


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
