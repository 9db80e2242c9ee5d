"""`hub.channels.ensure`: create a channel, or update it to match, so a program that declares
its channels can run twice; checked by the same rules as every path, on both backends."""

from __future__ import annotations

import pytest

import tidings
from tidings.core.errors import ValidationError
from tidings.core.redact import mask

URL = "https://hooks.example.com/tidings"
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


async def test_ensure_creates_then_leaves_an_unchanged_channel_alone(hub: tidings.Hub) -> None:
    first = await hub.channels.ensure(name="ops", kind="inbox", filter={"kinds": ["a.*"]})
    again = await hub.channels.ensure(name="ops", kind="inbox", filter={"kinds": ["a.*"]})
    assert again == first  # nothing written: not even updated_at moved
    assert [c.name for c in await hub.channels.list()] == ["ops"]


async def test_ensure_updates_to_match_and_resets_what_is_not_given(hub: tidings.Hub) -> None:
    wecom = "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=0123456789abcdef"
    made = await hub.channels.ensure(
        name="w", kind="wecom", config={"webhook_url": wecom}, rate_per_min=5, max_attempts=7
    )
    assert (made.rate_per_min, made.max_attempts) == (5, 7)
    changed = await hub.channels.ensure(
        name="w", kind="wecom", config={"webhook_url": wecom}, mode="digest"
    )
    assert changed.id == made.id
    assert changed.mode is tidings.Mode.DIGEST
    assert (changed.rate_per_min, changed.max_attempts) == (18, 3)  # the kind's and the default


async def test_ensure_keeps_enabled_unless_told(hub: tidings.Hub) -> None:
    made = await hub.channels.ensure(name="ops", kind="inbox")
    await hub.channels.disable(made.id, "by an operator")
    assert not (await hub.channels.ensure(name="ops", kind="inbox")).enabled
    assert (await hub.channels.ensure(name="ops", kind="inbox", enabled=True)).enabled


async def test_ensure_keeps_a_secret_given_back_masked(hub: tidings.Hub) -> None:
    config = {"url": URL, "secret": SECRET}
    made = await hub.channels.ensure(name="hook", kind="webhook", config=config)
    masked = {"url": URL, "secret": mask(SECRET)}
    again = await hub.channels.ensure(name="hook", kind="webhook", config=masked)
    assert again == made
    assert again.config["secret"] == SECRET


async def test_ensure_refuses_what_every_path_refuses_and_writes_nothing(
    hub: tidings.Hub,
) -> None:
    with pytest.raises(ValidationError, match=r"^config\.secrte: unknown field"):
        await hub.channels.ensure(name="hook", kind="webhook", config={"url": URL, "secrte": "x"})
    with pytest.raises(
        ValidationError, match=r"^config\.secret: is a mask that stands for no stored secret"
    ):
        await hub.channels.ensure(
            name="hook", kind="webhook", config={"url": URL, "secret": mask(SECRET)}
        )
    await hub.channels.ensure(name="ops", kind="inbox")
    with pytest.raises(ValidationError, match=r"^kind: is 'inbox' for the stored channel"):
        await hub.channels.ensure(name="ops", kind="webhook", config={"url": URL})
    with pytest.raises(ValidationError, match=r"^name: is required"):
        await hub.channels.ensure(kind="inbox")
    assert [c.name for c in await hub.channels.list()] == ["ops"]


def test_sync_hub_ensure(db_url: str) -> None:
    with tidings.SyncHub(db_url) as hub:
        first = hub.channels.ensure(name="ops", kind="inbox")
        assert hub.channels.ensure(name="ops", kind="inbox") == first
        assert hub.channels.ensure(name="ops", kind="inbox", rate_per_min=6).rate_per_min == 6
