"""E1 with the channels a process keeps (`publishing.KnownChannels`, migration 0018): a
publish fans out to the channels as they are when it is stored, however and by whom they
were changed since this process last read them — and on PostgreSQL it reads them only
after such a change."""

from __future__ import annotations

import re
from typing import Any

import pytest
from sqlalchemy import event, text

import tidings
from tests.conftest import count
from tests.store.helpers import channel, publish
from tidings.core.fanout import Route
from tidings.core.states import SkipReason, State
from tidings.store import publishing


def _what(sql: str) -> tuple[bool, bool]:
    """(reads the channels, writes events)"""
    return re.search(r"\bchannels\b", sql) is not None, "INSERT INTO events" in sql


def _fan_out(result: tidings.PublishResult) -> dict[str, State]:
    return {str(d.channel_id): d.state for d in result.deliveries}


async def test_e1_channels_changed_by_another_process_are_seen_at_once(db_url: str) -> None:
    async with tidings.Hub(db_url) as mine, tidings.Hub(db_url) as other:
        ops = await channel(mine, "ops")
        (first,) = await publish(mine)  # this process has read the channels now
        assert _fan_out(first) == {str(ops.id): State.PENDING}

        added = await channel(other, "added", filter={"kinds": ["finding.*"]})
        (result,) = await publish(mine)
        assert _fan_out(result) == {str(ops.id): State.PENDING, str(added.id): State.PENDING}

        await other.channels.update(added.id, filter={"kinds": ["other.*"]})
        (result,) = await publish(mine)
        assert _fan_out(result) == {str(ops.id): State.PENDING}

        await other.channels.update(added.id, filter={})
        await other.channels.disable(added.id)
        (result,) = await publish(mine)
        assert _fan_out(result) == {str(ops.id): State.PENDING, str(added.id): State.SKIPPED}
        assert result.deliveries[1].skip_reason is SkipReason.CHANNEL_DISABLED

        await other.channels.delete(added.id)
        (result,) = await publish(mine)
        assert _fan_out(result) == {str(ops.id): State.PENDING}


async def test_e1_an_operators_own_sql_on_channels_is_seen(db_url: str) -> None:
    """The count is kept by a trigger, so a change made outside tidings counts too."""
    async with tidings.Hub(db_url) as hub:
        ops = await channel(hub, "ops")
        await publish(hub)
        async with hub.store.engine.begin() as conn:
            await conn.execute(text("UPDATE channels SET enabled = false"))
        (result,) = await publish(hub)
        assert _fan_out(result) == {str(ops.id): State.SKIPPED}

        async with hub.store.engine.begin() as conn:
            await conn.execute(
                text("""UPDATE channels SET enabled = true, filter = '{"kinds": ["x.*"]}'""")
            )
        (result,) = await publish(hub)
        assert result.deliveries == []


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
async def test_w2_known_channels_spare_the_read_and_a_stale_plan_stores_nothing(
    pg_url: str, keyed: bool
) -> None:
    """After the first publish a publish is one statement. When the channels changed since,
    that statement stores nothing, the channels are read again and the publish goes in once:
    had the stale statement stored its rows, the events would be there twice. Events with
    and without a key take different statements; both are checked."""
    keys = iter(range(100))

    async def publish_one(hub: tidings.Hub, **fields: Any) -> list[tidings.PublishResult]:
        if keyed:
            fields["idempotency_key"] = f"key-{next(keys)}"
        return await publish(hub, **fields)

    async with tidings.Hub(pg_url) as hub:
        ops = await channel(hub, "ops")
        sent: list[str] = []

        def watch(_conn: Any, _cursor: Any, sql: str, *_rest: Any) -> None:
            sent.append(sql)

        event.listen(hub.store.sync_engine, "before_cursor_execute", watch)
        try:
            await publish_one(hub)
            await publish_one(hub)
            assert [_what(s) for s in sent] == [
                (True, False),
                (False, True),
                (False, True),  # the second publish: the write alone
            ]
            sent.clear()
            async with hub.store.engine.begin() as conn:  # moves the count, changes nothing
                await conn.execute(text("UPDATE channels SET enabled = enabled"))
            sent.clear()
            (result,) = await publish_one(hub, subject="after")
        finally:
            event.remove(hub.store.sync_engine, "before_cursor_execute", watch)
        assert [_what(s) for s in sent] == [
            (False, True),  # planned from the channels known: stores nothing
            (True, False),
            (False, True),
        ]
        assert _fan_out(result) == {str(ops.id): State.PENDING}
        assert await count(hub, "events") == 3
        assert await count(hub, "deliveries") == 3


async def test_e1_without_the_count_row_a_publish_reads_the_channels_itself(
    pg_url: str,
) -> None:
    async with tidings.Hub(pg_url) as hub:
        ops = await channel(hub, "ops")
        async with hub.store.engine.begin() as conn:
            await conn.execute(text("DELETE FROM channels_version"))
        try:
            (first,) = await publish(hub)
            (second,) = await publish(hub)
        finally:
            async with hub.store.engine.begin() as conn:
                await conn.execute(text("INSERT INTO channels_version (id, version) VALUES (1, 0)"))
        assert _fan_out(first) == _fan_out(second) == {str(ops.id): State.PENDING}
        assert await count(hub, "events") == 2


async def test_w2_a_publish_reads_the_channels_only_after_they_changed(db_url: str) -> None:
    """Both backends: once read, the channels are used while their version stays the same
    (SQLite reads that one row in the publish's transaction; PostgreSQL's statement checks it)."""
    async with tidings.Hub(db_url) as hub, tidings.Hub(db_url) as other:
        await channel(hub, "ops")
        await publish(hub)
        sent: list[str] = []

        def watch(_conn: Any, _cursor: Any, sql: str, *_rest: Any) -> None:
            sent.append(sql)

        event.listen(hub.store.sync_engine, "before_cursor_execute", watch)
        try:
            await publish(hub, 3)
            unchanged = [_what(s)[0] for s in sent]
            sent.clear()
            await channel(other, "added")
            (result, *_) = await publish(hub, 2)
            changed = [_what(s)[0] for s in sent]
        finally:
            event.remove(hub.store.sync_engine, "before_cursor_execute", watch)
        assert not any(unchanged), unchanged
        assert changed.count(True) == 1, changed
        assert len(result.deliveries) == 2


async def test_e1_the_fan_out_index_follows_tenant_and_pattern_changes(db_url: str) -> None:
    """The index a process builds from the channels it knows (by tenant, by the fixed
    beginning of kind patterns) is built again once they change."""
    async with tidings.Hub(db_url) as mine, tidings.Hub(db_url) as other:
        acme = await channel(mine, "acme", tenant="acme", filter={"kinds": ["deploy.*"]})
        shared = await channel(mine, "shared", filter={"kinds": ["deploy.*"]})
        (first,) = await publish(mine, kind="deploy.done", tenant="acme")
        assert _fan_out(first) == {str(acme.id): State.PENDING, str(shared.id): State.PENDING}

        await other.channels.update(acme.id, tenant="globex")
        await other.channels.update(shared.id, filter={"kinds": ["scan.*"]})
        (moved,) = await publish(mine, kind="deploy.done", tenant="acme")
        assert _fan_out(moved) == {}
        (scan,) = await publish(mine, kind="scan.done", tenant="globex")
        assert _fan_out(scan) == {str(shared.id): State.PENDING}
        (deploy,) = await publish(mine, kind="deploy.x", tenant="globex")
        assert _fan_out(deploy) == {str(acme.id): State.PENDING}


async def test_a_publisher_keeps_what_routes_each_channel(db_url: str) -> None:
    """Only a channel's id, enabled, tenant and filter are read for the fan-out: its config
    and templates (two thirds of a re-read of ten thousand channels) are not."""
    async with tidings.Hub(db_url) as hub:
        await channel(hub, "plain")
        await channel(hub, "picky", filter={"kinds": ["a.*"], "min_severity": "high"})
        await channel(hub, "theirs", tenant="acme", filter={"labels": {"env": "prod"}})
        off = await channel(hub, "off")
        await hub.channels.disable(off.id)
        known = publishing.KnownChannels()
        async with hub.store.engine.connect() as conn:
            seen = await conn.run_sync(known.read)
        assert seen is not None
        _version, routes = seen
        assert sorted(routes, key=lambda r: r.id) == [
            Route(c.id, c.enabled, c.tenant, c.filter)
            for c in sorted(await hub.channels.list(), key=lambda c: c.id)
        ]
        assert [r.enabled for r in sorted(routes, key=lambda r: r.id)] == [True, True, True, False]
