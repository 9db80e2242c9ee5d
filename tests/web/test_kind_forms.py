"""The channel form generated from a kind's declaration: one input per declared field, of
the field's type, secrets write-only and kept; a JSON textarea for a kind declaring nothing;
and a bad config refused on the form with nothing saved."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest

import tidings
from tests.api.tiny import TOKEN, tiny_registry
from tests.web.conftest import BASE, Ui
from tidings.server import create_app
from tidings.service import Service


@pytest.fixture
async def tiny_ui(db_url: str) -> AsyncIterator[Ui]:
    async with tidings.Hub(db_url, registry=tiny_registry()) as hub:
        service = Service(hub)
        admin, _ = await service.create_token("ops-admin", ["admin"])
        read, _ = await service.create_token("reader", ["read"])
        transport = httpx.ASGITransport(app=create_app(service))
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
            ui = Ui(client, service, admin, read)
            assert (await ui.login()).status_code == 303
            yield ui


def control(page: str, name: str) -> str:
    """The HTML of the input, select or textarea named `name` (the first one)."""
    found = re.search(rf'<(input|select|textarea)\b[^>]*\bname="{name}"[^>]*>', page)
    assert found, name
    return found.group(0)


async def test_every_declared_field_gets_an_input_of_its_type(tiny_ui: Ui) -> None:
    page = (await tiny_ui.client.get("/ui/channels/new", params={"kind": "tiny"})).text
    assert 'type="url"' in control(page, "url")
    assert "required" in control(page, "url")
    assert 'type="password"' in control(page, "token")
    assert 'type="number"' in control(page, "retries")
    assert control(page, "loud").startswith("<select")
    assert control(page, "tone").startswith("<select")
    assert control(page, "to").startswith("<textarea")
    assert control(page, "headers").startswith("<textarea")
    assert "default (false)" in page
    assert "default (low)" in page
    assert "The receiver&#39;s token" in page  # the declaration's description as help
    assert 'name="config"' not in page


async def test_a_form_post_becomes_typed_config_and_keeps_the_secret(tiny_ui: Ui) -> None:
    form = {
        "kind": "tiny",
        "name": "t",
        "mode": "realtime",
        "url": "https://a.invalid/in",
        "token": TOKEN,
        "retries": "2",
        "loud": "true",
        "tone": "",
        "to": "ops\n\nsec\n",
        "headers": "X-Team: ops",
    }
    created = await tiny_ui.post("/ui/channels/new", form)
    assert created.status_code == 303, created.text
    channel = await tiny_ui.service.channel_by_ref("t")
    assert channel.config == {
        "url": "https://a.invalid/in",
        "token": TOKEN,
        "retries": 2,
        "loud": True,
        "to": ["ops", "sec"],
        "headers": {"X-Team": "ops"},
    }
    assert channel.rate_per_min == 7  # the kind's declared default
    page = (await tiny_ui.client.get(f"/ui/channels/{channel.id}/edit")).text
    assert TOKEN not in page
    assert 'value="2"' in control(page, "retries")
    assert re.search(r'<option value="true" selected>', page)
    saved = await tiny_ui.post(
        f"/ui/channels/{channel.id}/edit", {**form, "token": "", "retries": "3"}
    )
    assert saved.status_code == 303, saved.text
    channel = await tiny_ui.service.channel(channel.id)
    assert (channel.config["token"], channel.config["retries"]) == (TOKEN, 3)


async def test_a_bad_value_shows_on_the_form_and_saves_nothing(tiny_ui: Ui) -> None:
    form = {"kind": "tiny", "name": "t", "url": "https://a.invalid", "retries": "9"}
    refused = await tiny_ui.post("/ui/channels/new", form)
    assert refused.status_code == 422
    assert "config.retries" in refused.text
    assert await tiny_ui.service.channels() == []


async def test_a_kind_declaring_nothing_edits_json(tiny_ui: Ui) -> None:
    page = (await tiny_ui.client.get("/ui/channels/new", params={"kind": "bare"})).text
    assert control(page, "config").startswith("<textarea")
    form = {"kind": "bare", "name": "b", "config": '{"anything": [1, 2]}'}
    created = await tiny_ui.post("/ui/channels/new", form)
    assert created.status_code == 303, created.text
    assert (await tiny_ui.service.channel_by_ref("b")).config == {"anything": [1, 2]}


async def test_a_bad_wecom_config_is_refused_on_the_form(logged_in: Ui) -> None:
    url = "http://127.0.0.1:9/cgi-bin/webhook/send"  # no ?key=…
    refused = await logged_in.post(
        "/ui/channels/new", {"kind": "wecom", "name": "wecom-ops", "webhook_url": url}
    )
    assert refused.status_code == 422
    assert "config.webhook_url" in refused.text
    assert await logged_in.service.channels() == []
    good = await logged_in.post(
        "/ui/channels/new", {"kind": "wecom", "name": "wecom-ops", "webhook_url": url + "?key=k1"}
    )
    assert good.status_code == 303, good.text
    assert (await logged_in.service.channel_by_ref("wecom-ops")).rate_per_min == 18
