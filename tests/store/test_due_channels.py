"""Which channels have due work: a channel unchanged since the last answer is reused, a
changed one is read again (a dispatcher picks the job by the channel's mode)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import String, bindparam, cast, insert, literal, select

import tidings
from tests.store.helpers import channel, publish
from tidings.core.states import Mode, State
from tidings.store import scheduling
from tidings.store.schema import channels, deliveries


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


#: More channels than one statement may carry parameters for (asyncpg's 32,767, SQLite's
#: 32,766): a first look reads them all.
MANY = 40_000


async def test_a_first_look_reads_more_channels_than_a_statement_has_parameters(
    hub: tidings.Hub,
) -> None:
    """A dispatcher's first look reads every due channel: one array parameter on PostgreSQL,
    reads of at most CHANNELS_PER_READ on SQLite. An IN list of one parameter a channel
    failed past the driver's limit, and the dispatcher could never start."""
    template = await channel(hub, "template")
    (published,) = await publish(hub, 1)
    now = datetime.now(UTC)
    copied = [c.name for c in channels.c if c.name not in ("id", "name")]
    n = select(literal(1).label("i")).cte("n", recursive=True)
    n = n.union_all(select(n.c.i + 1).where(n.c.i < MANY - 1))
    named = literal("many-").concat(cast(n.c.i, String))
    copies = select(named, *(channels.c[c] for c in copied)).select_from(
        n.join(channels, channels.c.id == template.id)
    )
    rows = select(
        literal(published.event.id),
        channels.c.id,
        literal(State.PENDING.value),
        literal(0),
        bindparam("now", now, type_=deliveries.c.next_attempt_at.type),
        bindparam("created", now, type_=deliveries.c.created_at.type),
        literal("m-").concat(cast(channels.c.id, String)),
    ).where(channels.c.name.like("many-%"))
    async with hub.store.engine.begin() as conn:
        await conn.execute(insert(channels).from_select(["name", *copied], copies))
        cols = ["event_id", "channel_id", "state", "attempts", "next_attempt_at"]
        await conn.execute(
            insert(deliveries).from_select([*cols, "created_at", "message_id"], rows)
        )
    due = await hub.store.due_channels()
    assert len(due) == MANY
    assert len({c.id for c in due}) == MANY
    assert due[-1].name.startswith("many-")
    assert due[-1].config == template.config


async def test_channels_are_read_in_parts_in_their_order(
    hub: tidings.Hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scheduling, "CHANNELS_PER_READ", 3)
    made = [await channel(hub, f"c{i}") for i in range(7)]
    await publish(hub, 1)
    due = await hub.store.due_channels()
    assert [c.id for c in due] == [c.id for c in made]
    known = {c.id: c for c in due}
    await hub.channels.update(made[4].id, mode="digest", digest_period_s=60)
    again = await hub.store.due_channels(known)
    assert [c.id for c in again] == [c.id for c in made]
    assert again[4].mode is Mode.DIGEST
    assert again[3] is due[3]
