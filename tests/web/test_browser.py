"""The admin UI in a real browser (Chromium via Playwright) against a real `tidings serve`:
log in, find a failed delivery, open its attempts, resend it and watch it turn sent; create
and disable a channel; a cross-site POST is refused; a <script> title shows as text."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Dialog, Page, expect, sync_playwright

from tests.api.server import Served, serve
from tests.sink import Answer, Sink
from tests.web.browser import LAUNCH_ARGS, require_chromium

XSS = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    require_chromium()
    server = serve(tmp_path_factory.mktemp("serve"))
    try:
        yield server
    finally:
        assert server.stop() == 0, server.output()


@pytest.fixture(scope="module")
def browser(served: Served) -> Iterator[Browser]:
    with sync_playwright() as p:
        chromium = p.chromium.launch(
            executable_path="/usr/bin/chromium", headless=True, args=LAUNCH_ARGS
        )
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Browser, served: Served) -> Iterator[Page]:
    context = browser.new_context(base_url=served.base_url)
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        page.goto("/ui/")
        page.fill("#token", served.token)
        page.click("button[type=submit]")
        expect(page.locator("h1")).to_have_text("Dashboard")
        yield page
    finally:
        context.close()


def api(served: Served, method: str, path: str, **kwargs: Any) -> Any:
    headers = {"Authorization": f"Bearer {served.token}"}
    response = httpx.request(method, served.base_url + path, headers=headers, timeout=10, **kwargs)
    assert response.status_code < 300, response.text
    return response.json() if response.content else None


def wait_until(check: Callable[[], Any], timeout_s: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError("timed out waiting")


def test_log_in_find_a_failed_delivery_and_resend_it(
    page: Page, served: Served, sink: Sink
) -> None:
    sink.default("/hook", Answer(500, "upstream down for maintenance"))
    channel = api(
        served,
        "POST",
        "/v1/channels",
        json={
            "name": "pager-hook",
            "kind": "webhook",
            "config": {"url": sink.url("/hook")},
            "max_attempts": 1,
            "filter": {"kinds": ["monitor.*"]},
        },
    )
    api(
        served,
        "POST",
        "/v1/events",
        json={
            "kind": "monitor.down",
            "subject": "monitor:api",
            "severity": "critical",
            "title": "api.example.com is down",
        },
    )
    query = {"channel_id": channel["id"], "state": "failed"}
    (failed,) = wait_until(lambda: api(served, "GET", "/v1/deliveries", params=query)["items"])

    page.click("nav >> text=Deliveries")
    page.select_option("select[name=state]", "failed")
    page.click("button:has-text('Filter')")
    row = page.locator(f"tr[data-id='{failed['id']}']")
    expect(row.locator(".badge")).to_contain_text("failed")
    row.locator("td.title a").click()

    expect(page.locator("h1")).to_have_text("api.example.com is down")
    attempts = page.locator("#attempts")
    expect(attempts.locator(".attempt")).to_have_count(1)
    expect(attempts).to_contain_text("retryable")
    expect(attempts).to_contain_text("upstream down for maintenance")
    expect(page.locator("pre.message")).to_contain_text('"kind": "monitor.down"')

    sink.default("/hook", Answer(200, "thanks"))
    page.click("#resend")
    expect(page.locator(".alert-ok")).to_contain_text("pending again")
    # Live refresh swaps the state in without a reload.
    expect(page.locator("#delivery-state .badge").first).to_have_text("sent", timeout=20_000)
    expect(page.locator("#attempts .attempt")).to_have_count(2)
    assert sink.count("/hook") == 2


def test_create_a_channel_and_disable_it(page: Page, served: Served) -> None:
    page.click("nav >> text=Channels")
    page.click("#new-channel")
    page.select_option("#kind-select", "slack")  # the form follows the kind (auto-submit)
    expect(page.locator("input[name=webhook_url]")).to_be_visible()
    # Inputs follow the kind's declaration: a choice is a select, a list a textarea, a
    # secret a write-only password input.
    page.select_option("#kind-select", "email")
    expect(page.locator("select[name=security]")).to_be_visible()
    expect(page.locator("textarea[name=recipients]")).to_be_visible()
    expect(page.locator("input[name=password]")).to_have_attribute("type", "password")
    expect(page.locator("input[name=port]")).to_have_attribute("type", "number")
    page.select_option("#kind-select", "webhook")
    expect(page.locator("input[name=url]")).to_be_visible()
    page.fill("input[name=name]", "ui-made-hook")
    page.fill("input[name=url]", "http://127.0.0.1:9/ui-made")
    page.fill("input[name=secret]", "whsec_c2VjcmV0LXNpZ25pbmcta2V5LWZvci10ZXN0cw==")
    page.fill("input[name=filter_kinds]", "deploy.*")
    page.click("#save-channel")

    expect(page.locator(".alert-ok")).to_contain_text("'ui-made-hook' created")
    row = page.locator("tr[data-channel='ui-made-hook']")
    expect(row.locator(".badge")).to_have_text("enabled")
    row.locator("button:has-text('Disable')").click()
    expect(page.locator(".alert-ok")).to_contain_text("disabled")
    expect(row.locator(".badge")).to_have_text("disabled")

    channels = api(served, "GET", "/v1/channels")["items"]
    (made,) = [c for c in channels if c["name"] == "ui-made-hook"]
    assert made["enabled"] is False
    assert made["filter"] == {"kinds": ["deploy.*"]}
    assert made["config"]["secret"].startswith("••••")


def test_a_cross_site_post_is_refused(page: Page, served: Served, sink: Sink) -> None:
    channel = api(served, "POST", "/v1/channels", json={"name": "target", "kind": "inbox"})
    path = f"/ui/channels/{channel['id']}/disable"
    forged = page.request.post(
        served.base_url + path, headers={"Origin": "https://evil.example"}, max_redirects=0
    )
    assert forged.status == 403

    # A page on another origin that auto-submits a form to the UI, in the logged-in browser.
    attack = (
        "<!doctype html><html><body>"
        f'<form id="f" method="post" action="{served.base_url}{path}"></form>'
        "<script>document.getElementById('f').submit()</script></body></html>"
    )
    sink.default("/attack", Answer(200, attack, headers={"Content-Type": "text/html"}))
    page.goto(sink.url("/attack"))
    expect(page.locator("h1")).to_have_text("Cross-site request refused")
    assert api(served, "GET", f"/v1/channels/{channel['id']}")["enabled"] is True


def test_a_script_title_shows_as_text(page: Page, served: Served) -> None:
    dialogs: list[str] = []

    def record(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", record)
    result = api(
        served,
        "POST",
        "/v1/events",
        json={"kind": "finding.created", "subject": "finding:<b>1</b>", "title": XSS, "body": XSS},
    )
    # The first-start inbox channel (id 1) receives every event.
    delivery = min(result["deliveries"], key=lambda d: d["channel_id"])
    wait_until(lambda: api(served, "GET", f"/v1/deliveries/{delivery['id']}")["state"] == "sent")

    page.goto("/ui/deliveries")
    expect(page.locator(f"tr[data-id='{delivery['id']}'] td.title")).to_have_text(XSS)
    page.goto(f"/ui/deliveries/{delivery['id']}")
    expect(page.locator("h1")).to_have_text(XSS)
    expect(page.locator("dd.event-title")).to_have_text(XSS)
    page.goto("/ui/inbox")
    expect(page.locator(".message-card h2").first).to_have_text(XSS)
    page.wait_for_timeout(300)
    assert dialogs == []


def test_api_docs_render_offline_under_the_csp(browser: Browser, served: Served) -> None:
    context = browser.new_context(base_url=served.base_url)
    elsewhere: list[str] = []

    def only_tidings(route: Any) -> None:
        if route.request.url.startswith(served.base_url):
            route.continue_()
        else:  # offline: nothing but tidings itself answers
            elsewhere.append(route.request.url)
            route.abort()

    context.route("**/*", only_tidings)
    page = context.new_page()
    console: list[str] = []
    page.on("console", lambda message: console.append(message.text))
    try:
        response = page.goto("/docs")
        assert response is not None
        assert "script-src 'self'" in response.headers["content-security-policy"]
        expect(page.locator(".information-container .title")).to_contain_text("tidings")
        expect(page.locator(".opblock-summary-path").first).to_be_visible()
        assert elsewhere == []
        violations = [m for m in console if "Content Security Policy" in m]
        assert violations == []
    finally:
        context.close()
