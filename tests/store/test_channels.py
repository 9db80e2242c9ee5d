"""Channel CRUD through the Hub: validation, uniqueness, updates and deletes."""

from __future__ import annotations

import pytest

import tidings
from tests.conftest import count
from tests.store.helpers import channel, claim, publish
from tidings.core.states import Mode


async def test_create_applies_defaults_and_reads_back(hub: tidings.Hub) -> None:
    created = await hub.channels.create(name="ops", kind="inbox")
    assert created.mode is Mode.REALTIME
    assert (created.max_attempts, created.retry_backoff_s, created.timeout_s) == (3, 30.0, 15.0)
    assert (created.rate_per_min, created.rate_burst, created.digest_period_s) == (0.0, 1, 3600.0)
    assert created.enabled
    assert created.max_age_s is None
    assert created.tenant is None
    assert await hub.channels.get(created.id) == created
    assert await hub.channels.get_by_name("ops") == created
    assert [c.id for c in await hub.channels.list()] == [created.id]


async def test_duplicate_name_is_a_conflict(hub: tidings.Hub) -> None:
    await channel(hub, "ops")
    with pytest.raises(tidings.Conflict, match="already exists"):
        await channel(hub, "ops")
    assert await count(hub, "channels") == 1


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"name": "", "kind": "inbox"}, "name"),
        ({"name": "x", "kind": "Not A Kind"}, "kind"),
        ({"name": "x", "kind": "inbox", "mode": "weekly"}, "mode"),
        ({"name": "x", "kind": "inbox", "max_attempts": 0}, "max_attempts"),
        ({"name": "x", "kind": "inbox", "filter": {"colour": "red"}}, "filter"),
        ({"name": "x", "kind": "inbox", "rate_per_min": -1}, "rate_per_min"),
        ({"name": "x", "kind": "inbox", "bogus": 1}, "bogus"),
    ],
)
async def test_bad_channel_input_is_refused_and_stores_nothing(
    hub: tidings.Hub, fields: dict[str, object], field: str
) -> None:
    with pytest.raises(tidings.ValidationError) as caught:
        await hub.channels.create(**fields)
    assert field in str(caught.value)
    assert await count(hub, "channels") == 0


async def test_update_changes_only_the_given_fields(hub: tidings.Hub) -> None:
    ch = await channel(hub, "ops", rate_per_min=30)
    updated = await hub.channels.update(ch.id, max_attempts=5, filter={"min_severity": "high"})
    assert updated.max_attempts == 5
    assert updated.filter == {"min_severity": "high"}
    assert updated.rate_per_min == 30
    assert updated.updated_at >= ch.updated_at
    with pytest.raises(tidings.ValidationError):
        await hub.channels.update(ch.id, timeout_s=-1)
    assert (await hub.channels.get(ch.id)).max_attempts == 5


async def test_update_to_disabled_skips_pending_rows(hub: tidings.Hub) -> None:
    ch = await channel(hub)
    await publish(hub, 2)
    await hub.channels.update(ch.id, enabled=False)
    page = await hub.deliveries(tidings.DeliveryQuery(state=tidings.State.SKIPPED))
    assert page.total == 2


async def test_unknown_channel_is_not_found(hub: tidings.Hub) -> None:
    with pytest.raises(tidings.NotFound):
        await hub.channels.get(42)
    with pytest.raises(tidings.NotFound):
        await hub.channels.update(42, max_attempts=2)
    with pytest.raises(tidings.NotFound):
        await hub.channels.disable(42)
    with pytest.raises(tidings.NotFound):
        await hub.channels.get_by_name("nope")


async def test_delete_refuses_while_deliveries_are_on_their_way(hub: tidings.Hub) -> None:
    ch = await channel(hub)
    await publish(hub, 1)
    with pytest.raises(tidings.Conflict, match="disable it first"):
        await hub.channels.delete(ch.id)
    await hub.channels.disable(ch.id)
    await hub.channels.delete(ch.id)
    assert await count(hub, "channels") == 0
    assert await count(hub, "deliveries") == 0
    assert await count(hub, "rate_buckets") == 0


async def test_delete_of_a_channel_with_history_only(hub: tidings.Hub) -> None:
    ch = await channel(hub)
    await publish(hub, 1)
    got = await claim(hub, ch)
    await hub.store.mark_sent(got.token, got.ids)
    await hub.channels.delete(ch.id)
    with pytest.raises(tidings.NotFound):
        await hub.channels.get(ch.id)
