"""Which channels have due work: a channel unchanged since the last answer is reused, a
changed one is read again (a dispatcher picks the job by the channel's mode)."""

from __future__ import annotations

import tidings
from tests.store.helpers import channel, publish
from tidings.core.states import Mode


async def test_an_unchanged_channel_is_reused_and_a_changed_one_read_again(
    hub: tidings.Hub,
) -> None:
    a = await channel(hub, "a")
    b = await channel(hub, "b")
    await publish(hub, 2)
    first = await hub.store.due_channels()
    assert [(c.id, c.mode) for c in first] == [(a.id, Mode.REALTIME), (b.id, Mode.REALTIME)]

    await hub.channels.update(b.id, mode="digest", digest_period_s=60)
    second = await hub.store.due_channels({c.id: c for c in first})  # what the caller knows
    assert second[0] is first[0]  # unchanged: not read again
    assert second[1].id == b.id
    assert second[1].mode is Mode.DIGEST  # changed: read again
    assert second[1].digest_period_s == 60


async def test_disabled_and_deleted_channels_drop_out(hub: tidings.Hub) -> None:
    a = await channel(hub, "a")
    b = await channel(hub, "b")
    c = await channel(hub, "c")
    await publish(hub, 1)
    assert [x.id for x in await hub.store.due_channels()] == [a.id, b.id, c.id]
    await hub.channels.disable(a.id)
    await hub.channels.disable(b.id)
    await hub.channels.delete(b.id)
    assert [x.id for x in await hub.store.due_channels()] == [c.id]
    await hub.channels.enable(a.id)  # its rows were skipped when it was disabled
    await publish(hub, 1, subject="later")
    due = await hub.store.due_channels()
    assert [x.id for x in due] == [a.id, c.id]
    assert due[0].enabled
