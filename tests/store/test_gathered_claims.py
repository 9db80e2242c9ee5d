"""Express claims and delivered outcomes asked at once share one statement (PostgreSQL): a
dispatcher with thousands of small channels claims and records dozens of them per round
trip. Each claim still leases only its own channel's rows under its own token (C1, C3), and
each outcome is fenced by its own claim's token (O1)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import text

import tidings
from tests.conftest import count
from tests.store.helpers import (
    LEASE_S,
    WORKER,
    attempt,
    channel,
    publish,
    statements_sent,
    states,
)
from tidings.core.states import AttemptStatus, State
from tidings.store import express


@contextmanager
def statements(hub: tidings.Hub) -> Iterator[list[str]]:
    """The SQL of every statement the store sends meanwhile."""
    with statements_sent(hub) as seen:
        sql: list[str] = []
        yield sql
        sql.extend(s for s, _ in seen)


async def test_c1_express_claims_asked_at_once_share_one_statement(pg_url: str) -> None:
    async with tidings.Hub(pg_url) as hub:
        chs = [await channel(hub, f"c{i}") for i in range(5)]
        await publish(hub, 3)  # three events, each fanned out to the five channels
        with statements(hub) as sent:
            got = await asyncio.gather(
                *(hub.store.claim_express(ch, 2, LEASE_S, WORKER) for ch in chs)
            )
        assert len(sent) == 1, sent
        rows = await states(hub)
        for ch, claim in zip(chs, got, strict=True):
            assert claim is not None
            assert claim.channel == ch
            assert len(claim.ids) == 2  # each ask's own limit
            assert {rows[i].channel_id for i in claim.ids} == {ch.id}
            assert all(rows[i].lease_token == claim.token for i in claim.ids)
        assert len({c.token for c in got if c is not None}) == 5  # a token per claim


async def test_small_claims_gather_apart_from_a_large_one(pg_url: str) -> None:
    # A backlog's claim of hundreds of rows takes far longer than a quiet channel's of a
    # few: asked in the same turn, the small ones share a statement of their own.
    async with tidings.Hub(pg_url) as hub:
        chs = [await channel(hub, f"c{i}") for i in range(4)]
        await publish(hub, 3)
        limits = [express.SMALL_ASK + 1, 2, 2, 2]
        with statements(hub) as sent:
            got = await asyncio.gather(
                *(
                    hub.store.claim_express(ch, n, LEASE_S, WORKER)
                    for ch, n in zip(chs, limits, strict=True)
                )
            )
        assert len(sent) == 2, sent
        assert [len(c.ids) if c else 0 for c in got] == [3, 2, 2, 2]


async def test_c1_a_channel_asked_twice_at_once_leases_disjoint_rows(pg_url: str) -> None:
    async with tidings.Hub(pg_url) as hub:
        ch = await channel(hub)
        await publish(hub, 3)
        with statements(hub) as sent:
            first, second, third = await asyncio.gather(
                *(hub.store.claim_express(ch, 2, LEASE_S, WORKER) for _ in range(3))
            )
        assert len(sent) == 3  # one statement may not lease a channel twice
        assert first is not None
        assert second is not None
        assert len(first.ids) == 2
        assert len(second.ids) == 1
        assert set(first.ids).isdisjoint(second.ids)
        assert third is None  # nothing left


async def test_a_channel_that_needs_the_full_claim_gets_none_beside_the_others(
    pg_url: str,
) -> None:
    async with tidings.Hub(pg_url) as hub:
        plain = await channel(hub, "plain")
        paused = await channel(hub, "paused")
        await publish(hub, 1)
        async with hub.store.engine.begin() as conn:
            await conn.execute(
                text(
                    "UPDATE rate_buckets SET paused_until = now() + interval '1 hour'"
                    " WHERE channel_id = :c"
                ),
                {"c": paused.id},
            )
        a, b = await asyncio.gather(
            hub.store.claim_express(plain, 10, LEASE_S, WORKER),
            hub.store.claim_express(paused, 10, LEASE_S, WORKER),
        )
        assert a is not None
        assert len(a.ids) == 1
        assert b is None
        by_channel = {r.channel_id: r.state for r in (await states(hub)).values()}
        assert by_channel == {plain.id: State.SENDING, paused.id: State.PENDING}


async def test_o1_c3_delivered_rows_of_claims_at_once_are_fenced_each_by_its_token(
    pg_url: str,
) -> None:
    async with tidings.Hub(pg_url) as hub:
        chs = [await channel(hub, f"c{i}") for i in range(3)]
        await publish(hub, 2)
        claims = await asyncio.gather(
            *(hub.store.claim_express(ch, 10, LEASE_S, WORKER) for ch in chs)
        )
        assert all(c is not None for c in claims)
        lost, kept_a, kept_b = (c for c in claims if c is not None)
        # Another worker took over the first claim's rows (its lease ran out meanwhile).
        async with hub.store.engine.begin() as conn:
            await conn.execute(
                text("UPDATE deliveries SET lease_token = 'other' WHERE channel_id = :c"),
                {"c": lost.channel.id},
            )
        with statements(hub) as sent:
            changed = await asyncio.gather(
                *(
                    hub.store.mark_sent(
                        c.token, c.ids, [attempt(i, AttemptStatus.DELIVERED) for i in c.ids]
                    )
                    for c in (lost, kept_a, kept_b)
                )
            )
        assert len(sent) == 1, sent
        assert changed == [0, 2, 2]
        rows = await states(hub)
        assert {rows[i].state for i in lost.ids} == {State.SENDING}
        assert {rows[i].state for i in kept_a.ids + kept_b.ids} == {State.SENT}
        # The stale worker did send: its attempt rows are kept beside the others (O7).
        assert await count(hub, "attempts") == 6


async def test_o1_claims_recorded_at_once_on_either_backend(hub: tidings.Hub) -> None:
    """The same outcome, asked at once for claims of several channels, on either backend."""
    chs = [await channel(hub, f"c{i}") for i in range(4)]
    await publish(hub, 2)
    claims = [await hub.store.claim_realtime(ch.id, 10, LEASE_S, WORKER) for ch in chs]
    changed = await asyncio.gather(
        *(hub.store.mark_sent(c.token, c.ids) for c in claims if c is not None)
    )
    assert changed == [2, 2, 2, 2]
    assert {r.state for r in (await states(hub)).values()} == {State.SENT}
