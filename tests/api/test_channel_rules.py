"""One validation path: the library (Hub here, SyncHub in tests/store) and the API check a
channel the same way — kind known, config as its adapter checks it, the kind's default rate,
templates, C5 — and keep a stored secret that comes back masked."""

from __future__ import annotations

import pytest

import tidings
from tests.api.conftest import Api
from tests.api.tiny import TOKEN, tiny_registry
from tests.conftest import count
from tidings.core.errors import ConfigError, ValidationError

WECOM_URL = "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=0123456789abcdef"
KEYLESS_WECOM_URL = "https://qyapi.weixin.qq.com/cgi-bin/webhook/send"


async def test_a_library_channel_gets_its_kinds_rate_and_a_checked_config(
    hub: tidings.Hub,
) -> None:
    wecom = await hub.channels.create(name="sec", kind="wecom", config={"webhook_url": WECOM_URL})
    assert wecom.rate_per_min == 18
    explicit = await hub.channels.create(
        name="fast", kind="wecom", config={"webhook_url": WECOM_URL}, rate_per_min=0
    )
    assert explicit.rate_per_min == 0  # given, even 0 (unlimited), wins over the default
    with pytest.raises(ValidationError) as refused:
        await hub.channels.create(
            name="bad", kind="wecom", config={"webhook_url": KEYLESS_WECOM_URL}
        )
    assert refused.value.field == "config.webhook_url"
    with pytest.raises(ValidationError, match="unknown channel kind"):
        await hub.channels.create(name="bird", kind="pigeon")
    with pytest.raises(ValidationError, match=r"templates\.event"):
        await hub.channels.create(name="t", kind="inbox", templates={"event": "{% if %}"})
    assert [c.name for c in await hub.channels.list()] == ["sec", "fast"]


async def test_a_library_update_is_checked_and_keeps_a_masked_secret(hub: tidings.Hub) -> None:
    wecom = await hub.channels.create(name="sec", kind="wecom", config={"webhook_url": WECOM_URL})
    renamed = await hub.channels.update(wecom.id, name="sec-2", config={"webhook_url": "••••cdef"})
    assert renamed.config["webhook_url"] == WECOM_URL
    assert renamed.rate_per_min == 18
    with pytest.raises(ValidationError) as refused:
        await hub.channels.update(wecom.id, config={"webhook_url": KEYLESS_WECOM_URL})
    assert refused.value.field == "config.webhook_url"
    with pytest.raises(ValidationError, match="kind"):
        await hub.channels.update(wecom.id, kind="slack")
    assert (await hub.channels.get(wecom.id)).config["webhook_url"] == WECOM_URL


async def test_c5_holds_for_the_hubs_own_lease(db_url: str) -> None:
    async with tidings.Hub(db_url, lease_s=40) as hub:
        with pytest.raises(ValidationError, match="lease of 40 s"):
            await hub.channels.create(name="slow", kind="inbox")  # timeout_s 15 × 4 > 40
        fast = await hub.channels.create(name="fast", kind="inbox", timeout_s=10)
        with pytest.raises(ValidationError, match="timeout_s"):
            await hub.channels.update(fast.id, timeout_s=11)
    with pytest.raises(ConfigError):
        tidings.Hub(db_url, lease_s=0)


async def test_a_declared_kind_is_checked_from_its_declaration(db_url: str) -> None:
    async with tidings.Hub(db_url, registry=tiny_registry()) as hub:
        made = await hub.channels.create(
            name="t", kind="tiny", config={"url": "https://a.invalid", "token": TOKEN}
        )
        assert made.rate_per_min == 7
        for config, field in [
            ({}, "config.url"),
            ({"url": "https://a.invalid", "colour": "red"}, "config.colour"),
            ({"url": "https://a.invalid", "retries": 9}, "config.retries"),
            ({"url": "https://a.invalid", "tone": "shrill"}, "config.tone"),
        ]:
            with pytest.raises(ValidationError) as refused:
                await hub.channels.create(name="x", kind="tiny", config=config)
            assert refused.value.field == field
        kept = await hub.channels.update(
            made.id, config={"url": "https://b.invalid", "token": "••••cdef"}
        )
        assert kept.config == {"url": "https://b.invalid", "token": TOKEN}
        with pytest.raises(ValidationError, match="unknown channel kind"):
            await hub.channels.create(name="w", kind="webhook", config={"url": "https://a.invalid"})


async def test_the_api_refuses_a_bad_wecom_config_and_applies_the_rate(api: Api) -> None:
    bad = {"name": "bad", "kind": "wecom", "config": {"webhook_url": KEYLESS_WECOM_URL}}
    refused = await api.client.post("/v1/channels", json=bad, headers=api.admin)
    assert refused.status_code == 422
    assert refused.json()["error"]["message"].startswith("config.webhook_url")
    assert await count(api.service.hub, "channels") == 0
    good = {"name": "sec", "kind": "wecom", "config": {"webhook_url": WECOM_URL}}
    created = await api.client.post("/v1/channels", json=good, headers=api.admin)
    assert created.status_code == 201, created.text
    assert created.json()["rate_per_min"] == 18
    assert "0123456789abcdef" not in created.text
    patched = await api.client.patch(
        f"/v1/channels/{created.json()['id']}",
        json={"config": {"webhook_url": KEYLESS_WECOM_URL}},
        headers=api.admin,
    )
    assert patched.status_code == 422
    assert "config.webhook_url" in patched.json()["error"]["message"]
