"""E1–E3: publishing stores the event and its deliveries together, once per key."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import create_async_engine

import tidings
from tests.conftest import count
from tests.store.helpers import channel, claim, publish
from tidings.core.states import SkipReason, State
from tidings.store.publishing import insert_rows
from tidings.store.schema import deliveries
from tidings.store.url import parse


async def test_e1_publish_creates_one_pending_delivery_per_matching_enabled_channel(
    hub: tidings.Hub,
) -> None:
    findings = await channel(hub, "findings", filter={"kinds": ["finding.*"]})
    severe = await channel(hub, "severe", filter={"min_severity": "high"})
    prod = await channel(hub, "prod", filter={"labels": {"env": "prod"}})
    await channel(hub, "monitors", filter={"kinds": ["monitor.*"]})
    acme = await channel(hub, "acme-only", tenant="acme")
    await channel(hub, "other-tenant", tenant="globex")

    result = await hub.publish(
        kind="finding.created",
        subject="finding:1",
        severity="critical",
        labels={"env": "prod"},
        tenant="acme",
    )

    assert result.created
    got = {d.channel_id: d for d in result.deliveries}
    assert set(got) == {findings.id, severe.id, prod.id, acme.id}
    assert all(d.state is State.PENDING and d.attempts == 0 for d in got.values())
    assert all(d.event_id == result.event.id for d in got.values())
    assert await count(hub, "deliveries") == 4


async def test_e1_tenant_channel_ignores_events_without_that_tenant(hub: tidings.Hub) -> None:
    await channel(hub, "acme-only", tenant="acme")
    everyone = await channel(hub, "everyone")
    result = await hub.publish(kind="x.y", subject="s")
    assert [d.channel_id for d in result.deliveries] == [everyone.id]


async def test_e1_disabled_matching_channel_gets_a_skipped_delivery(hub: tidings.Hub) -> None:
    off = await channel(hub, "off", enabled=False)
    result = await hub.publish(kind="x.y", subject="s")
    (delivery,) = result.deliveries
    assert delivery.channel_id == off.id
    assert delivery.state is State.SKIPPED
    assert delivery.skip_reason is SkipReason.CHANNEL_DISABLED


@pytest.mark.usefixtures("cleanup_trigger")
async def test_e1_failed_publish_leaves_nothing_behind(hub: tidings.Hub, backend: str) -> None:
    """A fault in the middle of the fan-out (a trigger refusing one delivery row) rolls back
    the event and the deliveries written before it."""
    await channel(hub, "first")
    broken = await channel(hub, "broken")
    async with hub.store.engine.begin() as conn:
        for statement in _refuse_deliveries_for(broken.id, backend):
            await conn.execute(text(statement))

    with pytest.raises(tidings.TidingsError, match="refused by test trigger"):
        await publish(hub, 3)

    assert await count(hub, "events") == 0
    assert await count(hub, "deliveries") == 0


def _refuse_deliveries_for(channel_id: int, backend: str) -> list[str]:
    if backend == "sqlite":
        return [
            f"""CREATE TRIGGER refuse BEFORE INSERT ON deliveries
                WHEN NEW.channel_id = {channel_id}
                BEGIN SELECT RAISE(ABORT, 'refused by test trigger'); END"""
        ]
    return [
        """CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
           BEGIN RAISE EXCEPTION 'refused by test trigger'; END $$""",
        f"""CREATE TRIGGER refuse BEFORE INSERT ON deliveries FOR EACH ROW
            WHEN (NEW.channel_id = {channel_id}) EXECUTE FUNCTION refuse()""",
    ]


@pytest.fixture
async def cleanup_trigger(hub: tidings.Hub, backend: str) -> AsyncIterator[None]:
    yield
    on_table = "" if backend == "sqlite" else " ON deliveries"
    async with hub.store.engine.begin() as conn:
        await conn.execute(text(f"DROP TRIGGER IF EXISTS refuse{on_table}"))
        if backend != "sqlite":
            await conn.execute(text("DROP FUNCTION IF EXISTS refuse()"))


async def test_e1_batch_publish_is_all_or_nothing_on_bad_input(hub: tidings.Hub) -> None:
    await channel(hub)
    with pytest.raises(tidings.ValidationError):
        await hub.publish_many([{"kind": "a.b", "subject": "ok"}, {"kind": "", "subject": "x"}])
    assert await count(hub, "events") == 0


async def test_e2_same_idempotency_key_returns_the_first_event(hub: tidings.Hub) -> None:
    await channel(hub)
    first = await hub.publish(kind="a.b", subject="s", title="first", idempotency_key="k-1")
    again = await hub.publish(kind="a.b", subject="s", title="changed", idempotency_key="k-1")
    assert first.created
    assert not again.created
    assert again.event == first.event
    assert [d.id for d in again.deliveries] == [d.id for d in first.deliveries]
    assert await count(hub, "events") == 1
    assert await count(hub, "deliveries") == 1


async def test_e2_fifty_concurrent_publishes_of_one_key_make_one_event(
    hub: tidings.Hub, db_url: str
) -> None:
    await channel(hub)
    hubs = [tidings.Hub(db_url) for _ in range(5)]
    try:
        results = await asyncio.gather(
            *(
                hubs[i % 5].publish(kind="a.b", subject=f"s{i}", idempotency_key="storm")
                for i in range(50)
            )
        )
    finally:
        await asyncio.gather(*(h.close() for h in hubs))
    assert sum(r.created for r in results) == 1
    assert len({r.event.id for r in results}) == 1
    assert await count(hub, "events") == 1
    assert await count(hub, "deliveries") == 1


async def test_e3_claim_carries_the_full_event_snapshot(hub: tidings.Hub) -> None:
    ch = await channel(hub)
    published = await hub.publish(
        kind="finding.created",
        subject="finding:8812",
        severity="high",
        title="SQL injection",
        body="in /login",
        url="https://scanner.example/f/8812",
        labels={"env": "prod"},
        data={"cvss": 9.8, "paths": ["/login"], "nested": {"ok": True}},
        tenant="acme",
    )
    got = await claim(hub, ch)
    (item,) = got.items
    assert item.event == published.event
    assert item.event.data == {"cvss": 9.8, "paths": ["/login"], "nested": {"ok": True}}
    assert got.channel.id == ch.id


async def test_e1_publish_inside_callers_async_transaction(hub: tidings.Hub, db_url: str) -> None:
    await channel(hub)
    engine = create_async_engine(parse(db_url))
    try:
        async with engine.connect() as conn:
            async with conn.begin() as tx:
                await hub.publish(kind="a.b", subject="rolled-back", conn=conn)
                await tx.rollback()
            assert await count(hub, "events") == 0
            async with conn.begin():
                await hub.publish(kind="a.b", subject="kept", conn=conn)
        assert await count(hub, "events") == 1
        assert await count(hub, "deliveries") == 1
    finally:
        await engine.dispose()


async def test_e2_batch_with_repeated_and_stored_keys_keeps_order(hub: tidings.Hub) -> None:
    await channel(hub)
    stored = await hub.publish(kind="a.b", subject="stored", idempotency_key="old")
    results = await hub.publish_many(
        [
            {"kind": "a.b", "subject": "plain-1"},
            {"kind": "a.b", "subject": "dup-first", "idempotency_key": "dup"},
            {"kind": "a.b", "subject": "again-old", "idempotency_key": "old"},
            {"kind": "a.b", "subject": "dup-second", "idempotency_key": "dup"},
            {"kind": "a.b", "subject": "plain-2"},
        ]
    )
    assert [r.created for r in results] == [True, True, False, False, True]
    assert [r.event.subject for r in results] == [
        "plain-1",
        "dup-first",
        "stored",
        "dup-first",
        "plain-2",
    ]
    assert results[2].event == stored.event
    assert results[3].event == results[1].event
    assert [len(r.deliveries) for r in results] == [1, 1, 1, 1, 1]
    assert await count(hub, "events") == 4
    assert await count(hub, "deliveries") == 4


async def test_e1_a_large_batch_answers_each_event_with_what_was_stored(hub: tidings.Hub) -> None:
    """Only ids come back from the multi-row inserts; every answer must still match its row,
    across the driver's page size and with keyed, repeated and unkeyed events mixed."""
    await channel(hub, "all")
    await channel(hub, "severe", filter={"min_severity": "high"})
    await channel(hub, "off", enabled=False)
    stored = await hub.publish(kind="a.b", subject="stored", idempotency_key="k-0")
    items: list[dict[str, object]] = []
    for i in range(1500):
        item: dict[str, object] = {
            "kind": f"kind.{i % 7}",
            "subject": f"subject-{i}",
            "severity": "high" if i % 3 == 0 else "low",
            "title": f"title {i}",
            "labels": {"n": str(i)},
            "data": {"i": i, "nested": {"list": [i, str(i)]}},
        }
        if i % 5 == 0:
            item["idempotency_key"] = f"k-{i % 50}"  # 10 keys, repeated; k-0 already stored
        items.append(item)

    results = await hub.publish_many(items)

    assert len(results) == len(items)
    for item, result in zip(items, results, strict=True):
        again = await hub.get_event(result.event.id)
        assert result.event == again.event
        assert sorted(result.deliveries, key=lambda d: d.id) == again.deliveries
        if not result.created:
            continue
        assert (result.event.subject, result.event.data) == (item["subject"], item["data"])
        by_state = sorted(d.state.value for d in result.deliveries)
        wanted = ["pending", "skipped"] + (["pending"] if item["severity"] == "high" else [])
        assert by_state == sorted(wanted)
    assert results[0].event == stored.event
    assert sum(r.created for r in results) == 1500 - 300 + 9
    assert await count(hub, "events") == 1 + 1500 - 300 + 9


async def test_e3_a_batch_keeps_integers_beyond_64_bits_exactly(hub: tidings.Hub) -> None:
    # Ten events: enough for the array insert on PostgreSQL, whose JSON writer needs its
    # fallback for these.
    await channel(hub)
    results = await hub.publish_many(
        [{"kind": "scan.done", "subject": f"s:{i}", "data": {"n": 2**70 + i}} for i in range(10)]
    )
    for i, result in enumerate(results):
        stored = await hub.get_event(result.event.id)
        assert stored.event.data == {"n": 2**70 + i}


async def test_e3_a_batch_stores_every_kind_of_value_as_given(hub: tidings.Hub) -> None:
    """Every column a batch writes, read back field by field: on PostgreSQL the keyed and
    unkeyed events and their deliveries are each enough rows for the insert from arrays (one
    per column), whose answers are matched to their rows by the ids' order alone."""
    everyone = await channel(hub, "everyone")
    acme = await channel(hub, "acme", tenant="acme")
    off = await channel(hub, "off", enabled=False)
    stored = await hub.publish(kind="a.b", subject="stored", idempotency_key="key-15")
    items = [_every_kind_of_value(i) for i in range(20)]

    results = await hub.publish_many(items)

    assert [r.created for r in results] == [i != 15 for i in range(20)]
    assert results[15].event == stored.event
    new = [r for r in results if r.created]
    assert len({r.event.created_at for r in new}) == 1  # one stamp for the whole batch
    for item, result in zip(items, results, strict=True):
        again = await hub.get_event(result.event.id)
        assert again.event == result.event
        assert sorted(result.deliveries, key=lambda d: d.id) == again.deliveries
        if not result.created:
            continue
        event = again.event
        assert event.kind == item["kind"]
        assert event.subject == item["subject"]
        assert event.severity.value == item["severity"]
        assert (event.title, event.body, event.url) == (item["title"], item["body"], item["url"])
        assert event.labels == item["labels"]
        assert event.data == item["data"]
        assert (event.tenant, event.idempotency_key) == (item["tenant"], item["idempotency_key"])
        assert event.traceparent == item["traceparent"]
        assert event.created_at == new[0].event.created_at
        wanted = {everyone.id: State.PENDING, off.id: State.SKIPPED}
        if item["tenant"] == "acme":
            wanted[acme.id] = State.PENDING
        assert {d.channel_id: d.state for d in again.deliveries} == wanted
        for delivery in again.deliveries:
            assert delivery.event_id == event.id
            assert delivery.next_attempt_at == delivery.created_at == event.created_at
            assert (delivery.attempts, delivery.batch_id, delivery.sent_at) == (0, None, None)
            assert delivery.skip_reason == (
                SkipReason.CHANNEL_DISABLED if delivery.channel_id == off.id else None
            )
    message_ids = [d.message_id for r in new for d in r.deliveries]
    assert len(set(message_ids)) == len(message_ids)
    assert await count(hub, "events") == 20
    # The stored event's two, two for each new event, and acme's for its six new events.
    assert await count(hub, "deliveries") == 2 + 2 * 19 + 6


def _every_kind_of_value(i: int) -> dict[str, Any]:
    """Event `i` of a batch: unicode, quotes and nested JSON; None in every nullable column of
    every other event; keys from the 10th on."""
    return {
        "kind": f"kind.{i % 3}",
        "subject": f"sujet-{i} ✓ 日本 \"quoted\" 'single' back\\slash",
        "severity": ["info", "low", "medium", "high", "critical"][i % 5],
        "title": f"título {i} 🎉",
        "body": "" if i == 4 else f"line one\nline two\ttabbed {{not json}} [{i}]",
        "url": None if i % 2 else f"https://example.test/e/{i}?q=ä&x=1",
        "labels": {} if i == 7 else {"env": "prod", "ключ": f"значение {i}", "empty": ""},
        "data": {}
        if i == 3
        else {
            "i": i,
            "negative": -i - 0.5,
            "big": 2**63 - 1,
            "text": 'ünïcödé \u2028 "json" \\ 🎉',
            "nested": {"list": [1, "two", None, True, False, 2.5, {"deep": [[]]}], "none": None},
        },
        "tenant": "acme" if i % 3 == 0 else None,
        "idempotency_key": f"key-{i}" if i >= 10 else None,
        "traceparent": None if i % 2 else f"00-{i:032x}-{i + 1:016x}-01",
    }


async def test_e1_a_batch_on_postgresql_binds_times_as_instants_and_refuses_long_text(
    pg_url: str,
) -> None:
    """The array insert's own checks: an aware time in any zone is stored as its instant and
    a NULL stays NULL (UTCDateTime's binding, item by item); a text too long for its column
    is refused as a single row's would be, not cut by a cast to the column's type."""
    async with tidings.Hub(pg_url) as hub:
        event_ids = [r.event.id for r in await publish(hub, 10)]  # no channel: no deliveries
        first, second = await channel(hub, "first"), await channel(hub, "second")
        due = datetime(2030, 1, 2, 8, 30, 0, 123456, tzinfo=timezone(timedelta(hours=5)))
        rows = [_delivery_row(e, first.id, due, i) for i, e in enumerate(event_ids)]
        async with hub.store.engine.begin() as conn:
            ids = await conn.run_sync(lambda c: insert_rows(c, deliveries, rows, [deliveries.c.id]))
            by_id = select(deliveries).where(deliveries.c.id.in_([i for (i,) in ids]))
            stored = (await conn.execute(by_id.order_by(deliveries.c.id))).mappings().all()
        assert [r["message_id"] for r in stored] == [r["message_id"] for r in rows]
        for row, got in zip(rows, stored, strict=True):
            assert got["next_attempt_at"] == due
            assert got["next_attempt_at"].tzinfo is UTC
            assert got["sent_at"] == row["sent_at"]
            assert (got["batch_id"], got["attempts"], got["last_error"]) == (
                row["batch_id"],
                row["attempts"],
                row["last_error"],
            )

        long_one = [_delivery_row(e, second.id, due, i) for i, e in enumerate(event_ids)]
        long_one[-1]["message_id"] = "m" * 1000
        with pytest.raises(DBAPIError, match="too long"):
            async with hub.store.engine.begin() as conn:
                await conn.run_sync(lambda c: insert_rows(c, deliveries, long_one, []))


def _delivery_row(event_id: int, channel_id: int, due: datetime, i: int) -> dict[str, Any]:
    return {
        "message_id": f"msg-{channel_id}-{i}",
        "event_id": event_id,
        "channel_id": channel_id,
        "state": "pending",
        "attempts": i,
        "next_attempt_at": due,
        "created_at": due,
        "sent_at": None if i % 2 else due,
        "batch_id": None if i % 3 else 1,
        "last_error": None if i % 2 else f"erreur {i} ✗",
    }
