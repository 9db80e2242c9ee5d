"""The express claim (PostgreSQL): a realtime claim in one statement for the common case,
leasing exactly what the full claim would, and nothing (None) wherever the full claim has
more to check — the caller then makes the full claim."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import text

import tidings
from tests.store.helpers import (
    LEASE_S,
    WORKER,
    at,
    channel,
    claim,
    driver_connection,
    publish,
    statements_sent,
    states,
)
from tidings.core.states import Mode, State
from tidings.store import express


async def _express(hub: tidings.Hub, ch: tidings.Channel, limit: int = 10) -> Any:
    return await hub.store.claim_express(ch, limit, LEASE_S, WORKER)


async def test_c1_an_express_claim_leases_due_rows_in_one_statement(pg_url: str) -> None:
    async with tidings.Hub(pg_url) as hub:
        ch = await channel(hub)
        published = await publish(hub, 3, title="t")
        with statements_sent(hub) as sent:
            got = await _express(hub, ch, limit=2)
        assert got is not None
        assert [i.event for i in got.items] == [p.event for p in published[:2]]
        # The lease with its events: no BEGIN, COMMIT or separate reads.
        assert len(sent) == 1, sent
        rows = await states(hub)
        leased = [r for r in rows.values() if r.state is State.SENDING]
        assert sorted(r.id for r in leased) == sorted(got.ids)
        assert all(r.attempts == 1 and r.lease_token == got.token for r in leased)
        assert got.channel == ch
        # The same rows are not leased twice; the rest is.
        again = await _express(hub, ch)
        assert again is not None
        assert set(again.ids).isdisjoint(got.ids)
        assert await _express(hub, ch) is None  # nothing due


async def test_e3_an_event_the_caller_knows_is_its_own_copy(pg_url: str) -> None:
    async with tidings.Hub(pg_url) as hub:
        a = await channel(hub, "a")
        b = await channel(hub, "b")
        (published,) = await publish(hub, 1, data={"n": 2**70}, labels={"k": "v"})
        first = await _express(hub, a)
        assert first is not None
        assert first.items[0].event == published.event  # decoded from the joined columns
        known = {i.event.id: i.event for i in first.items}
        second = await hub.store.claim_express(b, 10, LEASE_S, WORKER, known_events=known)
        assert second is not None
        assert second.items[0].event is first.items[0].event


@pytest.mark.parametrize(
    "fields",
    [{"rate_per_min": 60}, {"max_age_s": 3600}, {"mode": "digest"}],
    ids=["rate-limited", "deadline", "digest"],
)
async def test_a_channel_that_needs_the_full_claim_gets_none(
    pg_url: str, fields: dict[str, Any]
) -> None:
    async with tidings.Hub(pg_url) as hub:
        ch = await channel(hub, **fields)
        await publish(hub, 1)
        assert await _express(hub, ch) is None
        # Even when the caller's copy is stale: the database's channel decides.
        stale = replace(ch, rate_per_min=0.0, max_age_s=None, mode=Mode.REALTIME)
        assert await hub.store.claim_express(stale, 10, LEASE_S, WORKER) is None
        assert {r.state for r in (await states(hub)).values()} == {State.PENDING}


async def test_c7_h1_o4_disabled_unhealthy_or_paused_channels_get_none(pg_url: str) -> None:
    async with tidings.Hub(pg_url) as hub:
        ch = await channel(hub)
        await publish(hub, 1)
        async with hub.store.engine.begin() as conn:
            await conn.execute(
                text(
                    "INSERT INTO channel_health (channel_id, state, consecutive_failures,"
                    " backoff_s) VALUES (:c, 'open', 5, 1)"
                ),
                {"c": ch.id},
            )
        assert await _express(hub, ch) is None  # the breaker's rules are the full claim's
        async with hub.store.engine.begin() as conn:
            await conn.execute(text("DELETE FROM channel_health"))
            await conn.execute(
                text("UPDATE rate_buckets SET paused_until = now() + interval '1 hour'")
            )
        assert await _express(hub, ch) is None  # a provider's pause (O4)
        async with hub.store.engine.begin() as conn:
            await conn.execute(text("UPDATE rate_buckets SET paused_until = NULL"))
        assert await _express(hub, ch) is not None
        await publish(hub, 1, subject="later")
        await hub.channels.disable(ch.id)
        assert await _express(hub, ch) is None


async def test_c2_a_lost_lease_is_left_to_the_full_claim(pg_url: str) -> None:
    async with tidings.Hub(pg_url) as hub:
        ch = await channel(hub)
        await publish(hub, 1)
        first = await claim(hub, ch, lease_s=0.05, owner="crashed")
        async with hub.store.engine.begin() as conn:
            await conn.execute(text("SELECT pg_sleep(0.1)"))
        assert await _express(hub, ch) is None  # its audit row is the full claim's to write
        second = await claim(hub, ch, owner="rescuer", now=at(1))
        assert second.ids == first.ids


async def test_a_changed_channel_is_read_again(pg_url: str) -> None:
    async with tidings.Hub(pg_url) as hub:
        ch = await channel(hub)
        await publish(hub, 1)
        changed = await hub.channels.update(ch.id, timeout_s=7)
        got = await _express(hub, ch)
        assert got is not None
        assert got.channel.timeout_s == 7
        assert got.channel.updated_at == changed.updated_at


async def test_the_express_claim_commits_without_waiting_for_the_wal_flush(pg_url: str) -> None:
    async with tidings.Hub(pg_url) as hub:
        ch = await channel(hub)
        await publish(hub, 2)
        # On the store's own claim connection the setting is its session's: a commit there
        # never waits, and the statement need not say so.
        with statements_sent(hub) as seen:
            assert await _express(hub, ch, limit=1) is not None
        assert "set_config" not in seen[0][0]
        claims = driver_connection(hub.store._direct_express_small)
        assert await claims.fetchval("SHOW synchronous_commit") == "off"
        # Through the engine (a claim from a second event loop) the statement says so.
        ask = express.Ask(ch, 1, LEASE_S, WORKER)
        with statements_sent(hub) as seen:
            (got,) = await hub.store._run(express.claim_many, [ask], one_statement=True)
        assert got is not None
        assert "set_config" in seen[0][0]
        # A publish still waits for its flush (E1).
        await publish(hub, 1)
        publishes = driver_connection(hub.store._direct_publish)
        assert await publishes.fetchval("SHOW synchronous_commit") == "on"


async def test_c1_one_ask_has_its_own_statement_and_leases_as_the_statement_of_many(
    pg_url: str,
) -> None:
    async with tidings.Hub(pg_url) as hub:
        a = await channel(hub, "a")
        b = await channel(hub, "b")
        published = await publish(hub, 3)
        rows = await states(hub)
        of_a = sorted(i for i, r in rows.items() if r.channel_id == a.id)
        of_b = sorted(i for i, r in rows.items() if r.channel_id == b.id)
        with statements_sent(hub) as alone:
            first = await _express(hub, a, limit=2)
        assert len(alone) == 1
        assert "asked" not in alone[0][0]  # no arrays of asks to pair with their tokens
        assert first is not None
        assert sorted(first.ids) == of_a[:2]  # the oldest due rows
        assert [i.event for i in first.items] == [p.event for p in published[:2]]
        with statements_sent(hub) as together:
            second, third = await asyncio.gather(_express(hub, a, 2), _express(hub, b, 2))
        assert len(together) == 1
        assert "asked" in together[0][0]
        assert second is not None
        assert third is not None
        assert second.ids == of_a[2:]
        assert sorted(third.ids) == of_b[:2]
        leased = {i: r for i, r in (await states(hub)).items() if r.state is State.SENDING}
        assert sorted(leased) == sorted(first.ids + second.ids + third.ids)
        for got in (first, second, third):
            assert {leased[i].lease_token for i in got.ids} == {got.token}
            assert all(leased[i].attempts == 1 for i in got.ids)


async def test_the_claim_and_publish_connections_find_rows_by_index_only(pg_url: str) -> None:
    # A generic plan made while the table was small scanned every delivery on each claim
    # until statistics were taken again; a claim only ever takes a handful of rows by key,
    # and a publish that may hand off reads its few channels by key.
    async with tidings.Hub(pg_url) as hub:
        ch = await channel(hub)
        await publish(hub, 1)
        assert await _express(hub, ch) is not None
        claims = driver_connection(hub.store._direct_express_small)
        assert await claims.fetchval("SHOW enable_seqscan") == "off"
        publishes = driver_connection(hub.store._direct_publish)
        assert await publishes.fetchval("SHOW enable_seqscan") == "off"


async def test_sqlite_has_no_express_claim(tmp_path: Any) -> None:
    async with tidings.Hub(f"sqlite:///{tmp_path / 'x.db'}") as hub:
        await hub.migrate()
        ch = await channel(hub)
        await publish(hub, 1)
        assert await _express(hub, ch) is None
        assert (await claim(hub, ch)).ids
