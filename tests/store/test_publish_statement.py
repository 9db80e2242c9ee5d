"""A publish in one statement (PostgreSQL: `tidings.store.publish_statement`): the same
results as the portable path on both backends, and on PostgreSQL one write without BEGIN
and COMMIT (and a read of the channels before it, after they changed)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event, text

import tidings
from tests.store.helpers import channel, publish
from tidings.core.states import SkipReason, State
from tidings.store import publish_statement


async def test_e1_e2_a_batch_of_keyed_unkeyed_and_repeated_keys(hub: tidings.Hub) -> None:
    ops = await channel(hub, "ops", filter={"kinds": ["a.*"]})
    off = await channel(hub, "off")
    await hub.channels.disable(off.id)
    (stored,) = await hub.publish_many([{"kind": "a.old", "subject": "s", "idempotency_key": "k0"}])
    results = await hub.publish_many(
        [
            {"kind": "a.one", "subject": "s1", "idempotency_key": "k1"},
            {"kind": "b.two", "subject": "s2"},
            {"kind": "a.one", "subject": "again", "idempotency_key": "k1"},  # E2: the first
            {"kind": "a.old", "subject": "s0", "idempotency_key": "k0"},  # stored before
            {"kind": "a.three", "subject": "s3"},
        ]
    )
    assert [r.created for r in results] == [True, True, False, False, True]
    first, second, repeated, old, third = results
    assert repeated.event.id == first.event.id
    assert repeated.event.subject == "s1"
    assert old.event.id == stored.event.id
    assert [d.id for d in repeated.deliveries] == [d.id for d in first.deliveries]
    # Unkeyed ids in the order given; each new event fanned out to the channels it matches.
    assert second.event.id < third.event.id
    assert [(d.channel_id, d.state) for d in first.deliveries] == [
        (ops.id, State.PENDING),
        (off.id, State.SKIPPED),
    ]
    assert first.deliveries[1].skip_reason is SkipReason.CHANNEL_DISABLED
    assert [d.channel_id for d in second.deliveries] == [off.id]
    assert all(d.event_id == r.event.id for r in results for d in r.deliveries)
    assert len({d.message_id for r in results for d in r.deliveries}) == 7  # one per delivery
    shown = await hub.deliveries()
    assert {v.delivery.id for v in shown.items} == {
        d.id for r in (stored, first, second, third) for d in r.deliveries
    }
    for result in (first, second, third):
        assert result.event.created_at == first.event.created_at  # one statement's time
        assert {d.created_at for d in result.deliveries} <= {first.event.created_at}


async def test_w2_a_publish_is_one_write_without_begin_or_commit(pg_url: str) -> None:
    async with tidings.Hub(pg_url) as setup:
        await channel(setup)
    async with tidings.Hub(pg_url) as hub, tidings.Hub(pg_url) as other:
        sent: list[tuple[str, Any]] = []

        def watch(conn: Any, _cursor: Any, sql: str, *_rest: Any) -> None:
            sent.append((sql, conn.get_execution_options().get("isolation_level")))

        event.listen(hub.store.sync_engine, "before_cursor_execute", watch)
        try:
            await publish(hub, 3)  # the channels were read as the hub opened
            ((only, level),) = sent  # one statement, no BEGIN or COMMIT
            assert "INSERT INTO events" in only
            assert "pg_notify" in only
            assert level == "AUTOCOMMIT"

            await channel(hub, "mine")  # changed here: the hub reads them before it plans
            sent.clear()
            await publish(hub, 3)
            read, write = (sql for sql, _ in sent)
            assert read.lstrip().startswith("SELECT")
            assert "FROM channels" in read
            assert "INSERT INTO events" in write

            await channel(other, "theirs")  # changed elsewhere: the plan is found stale
            sent.clear()
            await publish(hub, 3)
        finally:
            event.remove(hub.store.sync_engine, "before_cursor_execute", watch)
        stale, read, write = (sql for sql, _ in sent)
        assert "INSERT INTO events" in stale  # planned from the channels known before
        assert "FROM channels" in read
        assert "INSERT INTO events" in write
        assert {level for _, level in sent} == {"AUTOCOMMIT"}
        assert len((await hub.deliveries()).items) == 3 + 3 * 2 + 3 * 3


async def test_e1_text_columns_arrive_intact_in_every_form_they_travel_in(hub: tidings.Hub) -> None:
    """PostgreSQL sends a text column joined by a separator, as an array where a value holds
    the separator or NULLs sit beside values, and as NULL when all are: each event is stored
    as given, whichever form its columns took."""
    await channel(hub)
    given: list[dict[str, Any]] = [
        {"kind": "k", "subject": "s1", "title": "", "body": "", "tenant": None},
        {"kind": "k", "subject": "s2", "title": "a\x1fb", "body": "\x1f", "tenant": "acme"},
        {"kind": "k", "subject": "s3", "title": "\x1f\x1e", "body": "x\ny", "tenant": None},
        {"kind": "k", "subject": "s4", "title": "ünï ☃", "body": "\\x1f", "url": "https://u/"},
    ]
    singles = [[item] for item in given]  # one event's columns take a path of their own
    for batch in (given, *singles, [given[0] | {"url": ""}]):
        results = await hub.publish_many(batch)
        if len(batch) == 1:
            results.append(await hub.publish(**batch[0]))  # gathered, as a producer's
            batch = batch * 2
        for item, result in zip(batch, results, strict=True):
            stored = (await hub.get_event(result.event.id)).event
            assert (stored.subject, stored.title, stored.body) == (
                item["subject"],
                item["title"],
                item["body"],
            )
            assert (stored.tenant, stored.url) == (item.get("tenant"), item.get("url"))
            assert [d.event_id for d in result.deliveries] == [stored.id]
            assert result.deliveries[0].state is State.PENDING


async def test_e1_the_statement_draws_ids_from_the_events_own_sequence(pg_url: str) -> None:
    """The statement names the sequence as a constant: it must be the one the migrations
    gave the events' ids, or publishes would draw ids the table's default never skips."""
    async with tidings.Hub(pg_url) as hub:
        async with hub.store.engine.connect() as conn:
            found = await conn.scalar(text("SELECT pg_get_serial_sequence('events', 'id')"))
        assert str(found).rsplit(".", 1)[-1] == publish_statement.EVENTS_ID_SEQUENCE
        await channel(hub)
        first = await hub.publish(kind="k", subject="s")
        async with hub.store.engine.connect() as conn:
            drawn = await conn.scalar(text("SELECT last_value FROM events_id_seq"))
        assert drawn == first.event.id
