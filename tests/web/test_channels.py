"""Channel pages: create and edit per kind (secrets write-only and kept), validation shown on
the form with nothing saved, enable / disable, and send test."""

from __future__ import annotations

import re

import pytest

from tests.sink import Answer, Sink
from tests.web.conftest import Ui
from tidings.web import channels as web_channels

SECRET = "whsec_" + "c2VjcmV0LXNpZ25pbmcta2V5LWZvci10ZXN0cw=="


def webhook_form(url: str, **extra: str) -> dict[str, str]:
    form = {"kind": "webhook", "name": "ops-hook", "mode": "realtime", "url": url}
    form.update(extra)
    return form


async def test_create_then_edit_keeps_the_secret(logged_in: Ui) -> None:
    hub = logged_in.service.hub
    response = await logged_in.post(
        "/ui/channels/new",
        webhook_form(
            "http://127.0.0.1:9/hook",
            secret=SECRET,
            headers="X-Team: ops",
            filter_kinds="monitor.*, finding.created",
            filter_min_severity="high",
            filter_labels="env=prod",
            max_attempts="5",
            enabled="1",
        ),
    )
    assert response.status_code == 303, response.text
    channel = await hub.channels.get_by_name("ops-hook")
    assert channel.config == {
        "url": "http://127.0.0.1:9/hook",
        "secret": SECRET,
        "headers": {"X-Team": "ops"},
    }
    assert channel.filter == {
        "kinds": ["monitor.*", "finding.created"],
        "min_severity": "high",
        "labels": {"env": "prod"},
    }
    assert channel.max_attempts == 5
    assert channel.enabled
    listing = await logged_in.client.get(response.headers["location"])
    assert "Channel &#39;ops-hook&#39; created." in listing.text

    form = await logged_in.client.get(f"/ui/channels/{channel.id}/edit")
    assert SECRET not in form.text
    assert "••••" + SECRET[-4:] in form.text  # shown redacted, as the placeholder
    assert 'value="http://127.0.0.1:9/hook"' in form.text

    saved = await logged_in.post(
        f"/ui/channels/{channel.id}/edit",
        webhook_form("http://127.0.0.1:9/other", secret="", max_attempts="2"),
    )
    assert saved.status_code == 303, saved.text
    channel = await hub.channels.get(channel.id)
    assert channel.config["secret"] == SECRET
    assert channel.config["url"] == "http://127.0.0.1:9/other"
    assert channel.max_attempts == 2
    assert channel.filter == {}

    await logged_in.post(
        f"/ui/channels/{channel.id}/edit",
        webhook_form("http://127.0.0.1:9/other", secret="", clear_secret="1"),
    )
    assert "secret" not in (await hub.channels.get(channel.id)).config


async def test_validation_errors_show_on_the_form_and_save_nothing(logged_in: Ui) -> None:
    hub = logged_in.service.hub
    bad_url = await logged_in.post("/ui/channels/new", webhook_form("ftp://nowhere"))
    assert bad_url.status_code == 422
    assert "config.url" in bad_url.text
    assert 'id="form-error"' in bad_url.text
    assert 'value="ops-hook"' in bad_url.text  # what was typed is kept
    bad_number = await logged_in.post(
        "/ui/channels/new", webhook_form("http://127.0.0.1:9/", max_attempts="many")
    )
    assert bad_number.status_code == 422
    assert "whole number" in bad_number.text
    too_slow = await logged_in.post(
        "/ui/channels/new", webhook_form("http://127.0.0.1:9/", timeout_s="600")
    )
    assert too_slow.status_code == 422
    assert "lease" in too_slow.text
    assert await hub.channels.list() == []

    await logged_in.post("/ui/channels/new", webhook_form("http://127.0.0.1:9/"))
    duplicate = await logged_in.post("/ui/channels/new", webhook_form("http://127.0.0.1:9/"))
    assert duplicate.status_code == 409
    assert len(await hub.channels.list()) == 1


async def test_chat_kinds_keep_their_secret_url(logged_in: Ui) -> None:
    hub = logged_in.service.hub
    url = "http://127.0.0.1:9/cgi-bin/webhook/send?key=abcdef123456"
    created = await logged_in.post(
        "/ui/channels/new", {"kind": "wecom", "name": "wecom-ops", "webhook_url": url}
    )
    assert created.status_code == 303, created.text
    channel = await hub.channels.get_by_name("wecom-ops")
    form = await logged_in.client.get(f"/ui/channels/{channel.id}/edit")
    assert "abcdef123456" not in form.text
    await logged_in.post(
        f"/ui/channels/{channel.id}/edit", {"name": "wecom-ops2", "webhook_url": ""}
    )
    channel = await hub.channels.get(channel.id)
    assert channel.name == "wecom-ops2"
    assert channel.config["webhook_url"] == url


async def test_disable_enable_and_send_test(logged_in: Ui, sink: Sink) -> None:
    hub = logged_in.service.hub
    sink.script("/hook", Answer(410, "gone"))
    channel = await hub.channels.create(name="t", kind="webhook", config={"url": sink.url()})
    await logged_in.service.create_channel({"name": "box", "kind": "inbox"})
    disabled = await logged_in.post(f"/ui/channels/{channel.id}/disable")
    assert disabled.status_code == 303
    channel = await hub.channels.get(channel.id)
    assert not channel.enabled
    assert "admin UI" in (channel.disabled_reason or "")
    listing = (await logged_in.client.get("/ui/channels")).text
    assert "badge-disabled" in listing
    assert f"/ui/channels/{channel.id}/enable" in listing
    await logged_in.post(f"/ui/channels/{channel.id}/enable")
    assert (await hub.channels.get(channel.id)).enabled

    box = await hub.channels.get_by_name("box")
    delivered = await logged_in.post(f"/ui/channels/{box.id}/test")
    assert delivered.status_code == 200
    assert "badge-delivered" in delivered.text
    assert (await logged_in.client.get("/ui/inbox")).text.count("<h2>Test message from") == 1
    # The in-process service allows no private networks: the outcome says so, classified.
    refused = await logged_in.post(f"/ui/channels/{channel.id}/test")
    assert "badge-permanent" in refused.text
    assert sink.count("/hook") == 0


def _listed(html: str) -> list[str]:
    return re.findall(r'<tr data-channel="([^"]+)">', html)


async def test_the_channel_list_goes_a_page_at_a_time_and_searches_by_name(
    logged_in: Ui, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten thousand channels were one page of 8 MB whose health read every delivery; the
    list now shows a page, the health of that page's channels, and finds by name."""
    monkeypatch.setattr(web_channels, "CHANNELS_PER_PAGE", 2)
    service = logged_in.service
    for name in ("alpha-ops", "beta", "gamma-ops", "delta_100%"):
        await service.create_channel({"name": name, "kind": "inbox"})
    await service.hub.publish(kind="a.b", subject="s")  # one pending row on each inbox
    client = logged_in.client
    first = (await client.get("/ui/channels")).text
    assert _listed(first) == ["alpha-ops", "beta"]
    assert 'id="channels-first"' not in first
    (after,) = re.findall(r'href="/ui/channels\?after=(\d+)" id="channels-next"', first)
    second = (await client.get(f"/ui/channels?after={after}")).text
    assert _listed(second) == ["gamma-ops", "delta_100%"]
    assert 'id="channels-first"' in second
    assert 'id="channels-next"' not in second
    # Each channel's pending count is its own, read for the page shown.
    assert second.count('state=pending">1</a>') == 2
    found = (await client.get("/ui/channels?q=OPS")).text
    assert _listed(found) == ["alpha-ops", "gamma-ops"]
    assert _listed((await client.get("/ui/channels?q=_100%25")).text) == ["delta_100%"]
    assert _listed((await client.get("/ui/channels?q=100_")).text) == []
    nothing = (await client.get("/ui/channels?q=zzz")).text
    assert "whose name contains “zzz”" in nothing
    assert "No channels yet" not in nothing
    for junk in ("abc", "-1", str(2**70)):
        assert _listed((await client.get(f"/ui/channels?after={junk}")).text)[:1] == ["alpha-ops"]


async def test_a_notice_names_a_channel_beyond_the_first_page(
    logged_in: Ui, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(web_channels, "CHANNELS_PER_PAGE", 1)
    service = logged_in.service
    await service.create_channel({"name": "first", "kind": "inbox"})
    later = await service.create_channel({"name": "later", "kind": "inbox"})
    page = (await logged_in.client.get(f"/ui/channels?notice=saved:{later.id}")).text
    assert "Channel &#39;later&#39; saved." in page
    assert _listed(page) == ["first"]
    unknown = (await logged_in.client.get("/ui/channels?notice=saved:999999")).text
    assert "saved." not in unknown


async def test_numbers_in_other_digits_are_no_id_and_no_500(logged_in: Ui) -> None:
    """`str.isdigit()` takes "²" (which `int()` refuses) and "١" (which it reads as 1)."""
    await logged_in.service.create_channel({"name": "only", "kind": "inbox"})
    client = logged_in.client
    for value in ("²", "١", "1²"):
        listing = await client.get(
            "/ui/channels", params={"after": value, "notice": f"saved:{value}"}
        )
        assert listing.status_code == 200, value
        assert _listed(listing.text) == ["only"]
        assert "saved." not in listing.text
        for page in ("/ui/deliveries", "/ui/inbox"):
            answer = await client.get(page, params={"page": value, "channel": value})
            assert answer.status_code == 200, (page, value)
