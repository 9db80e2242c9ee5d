"""Hand-offs (PostgreSQL): a single publish leases its rows to a taken seat and its
notification carries them, wherever the express claim would have leased them; everywhere
else the rows stay pending for the claims."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest
from sqlalchemy import make_url, text

import tidings
from tests.store.helpers import channel, states
from tidings.core.states import State
from tidings.store import handoff
from tidings.store.notify import NOTIFY_CHANNEL, PostgresListener

OWNER = "seated-worker"


class Seat:
    """A dispatcher's LISTEN connection holding a seat, as `PostgresListener` takes one."""

    def __init__(self, conn: Any, number: int) -> None:
        self.conn = conn
        self.number = number
        self.heard: asyncio.Queue[str] = asyncio.Queue()

    def hear(self, *args: Any) -> None:
        self.heard.put_nowait(args[-1])

    async def next_handoff(self) -> handoff.HandOff | None:
        _hint, handed = handoff.split(await asyncio.wait_for(self.heard.get(), 10))
        return handoff.decode(handed) if handed else None


def _dsn(pg_url: str) -> str:
    return pg_url.replace("postgresql+asyncpg", "postgresql").replace("+psycopg", "")


@asynccontextmanager
async def seated(pg_url: str, lease_s: float = 120.0) -> AsyncIterator[Seat]:
    conn = await asyncpg.connect(_dsn(pg_url))
    try:
        taken = await handoff.take_seat(conn, OWNER, lease_s)
        assert taken is not None
        seat = Seat(conn, taken.number)
        await conn.add_listener(NOTIFY_CHANNEL, seat.hear)
        yield seat
    finally:
        await conn.close()


async def _publish(hub: tidings.Hub, **fields: Any) -> tidings.PublishResult:
    fields.setdefault("kind", "finding.created")
    fields.setdefault("subject", "finding:1")
    return await hub.publish(**fields)


async def _warmed(hub: tidings.Hub) -> None:
    """A first publish reads the channels; the next ones go on the store's own connection."""
    await _publish(hub, kind="warming.up")


async def test_a_publish_leases_its_row_to_the_taken_seat(pg_url: str) -> None:
    async with tidings.Hub(pg_url) as hub, seated(pg_url, lease_s=90.0) as seat:
        ch = await channel(hub)
        await _warmed(hub)
        await seat.next_handoff()
        published = await _publish(hub, title="t", data={"n": 2**70}, labels={"k": "v"})
        got = await seat.next_handoff()
        assert got is not None
        (delivery,) = published.deliveries
        assert delivery.state is State.SENDING
        assert delivery.attempts == 1
        assert delivery.lease_token is None  # the answer never carries a lease's token
        stored = (await states(hub))[delivery.id]
        assert stored.state is State.SENDING
        assert stored.attempts == 1
        assert stored.lease_owner == OWNER
        assert (got.seat, got.owner, got.lease_s) == (seat.number, OWNER, 90.0)
        assert got.event == published.event  # E3: the whole event, big integers too
        (row,) = got.rows
        assert (row.delivery_id, row.channel_id) == (delivery.id, ch.id)
        assert row.message_id == stored.message_id
        assert row.token == stored.lease_token
        assert row.channel_updated_at == ch.updated_at
        (claim,) = got.claims({ch.id: ch})
        assert claim.token == stored.lease_token
        assert claim.ids == [delivery.id]
        lease = (stored.next_attempt_at - stored.created_at).total_seconds()
        assert lease == pytest.approx(90.0)
        assert claim.lease_expires_at == stored.next_attempt_at


async def test_no_seat_taken_no_handoff(pg_url: str) -> None:
    """A seat whose holder is gone (its row stays, its lock went with the connection)."""
    async with tidings.Hub(pg_url) as hub:
        await channel(hub)
        async with seated(pg_url):
            pass
        await _warmed(hub)
        published = await _publish(hub)
        (delivery,) = published.deliveries
        assert delivery.state is State.PENDING
        stored = (await states(hub))[delivery.id]
        assert (stored.state, stored.attempts, stored.lease_owner) == (State.PENDING, 0, None)


@pytest.mark.parametrize(
    "fields",
    [{"rate_per_min": 60}, {"max_age_s": 3600}, {"mode": "digest"}, {"enabled": False}],
    ids=["rate-limited", "deadline", "digest", "disabled"],
)
async def test_a_channel_that_needs_a_claim_is_not_handed(
    pg_url: str, fields: dict[str, Any]
) -> None:
    async with tidings.Hub(pg_url) as hub, seated(pg_url) as seat:
        plain = await channel(hub, "plain")
        await channel(hub, "other", **fields)
        await _warmed(hub)
        await seat.next_handoff()
        published = await _publish(hub)
        got = await seat.next_handoff()
        assert got is not None
        assert [r.channel_id for r in got.rows] == [plain.id]
        by_channel = {d.channel_id: d.state for d in published.deliveries}
        assert by_channel[plain.id] is State.SENDING
        assert State.SENDING not in {s for c, s in by_channel.items() if c != plain.id}


async def test_a_paused_or_unhealthy_channel_is_not_handed(pg_url: str) -> None:
    async with tidings.Hub(pg_url) as hub, seated(pg_url) as seat:
        paused = await channel(hub, "paused")
        broken = await channel(hub, "broken")
        await _warmed(hub)
        await seat.next_handoff()
        async with hub.store.engine.begin() as conn:
            await conn.execute(
                text(
                    "UPDATE rate_buckets SET paused_until = now() + interval '1 hour'"
                    " WHERE channel_id = :c"
                ),
                {"c": paused.id},
            )
            await conn.execute(
                text(
                    "INSERT INTO channel_health (channel_id, state, consecutive_failures,"
                    " backoff_s) VALUES (:c, 'open', 5, 1)"
                ),
                {"c": broken.id},
            )
        published = await _publish(hub)
        assert await seat.next_handoff() is None
        assert {d.state for d in published.deliveries} == {State.PENDING}


async def test_an_event_too_big_for_the_notification_is_not_handed(pg_url: str) -> None:
    async with tidings.Hub(pg_url) as hub, seated(pg_url) as seat:
        await channel(hub)
        await _warmed(hub)
        await seat.next_handoff()
        published = await _publish(hub, body="é" * handoff.MAX_EVENT_BYTES)
        assert await seat.next_handoff() is None
        assert [d.state for d in published.deliveries] == [State.PENDING]


async def test_a_batch_is_not_handed(pg_url: str) -> None:
    async with tidings.Hub(pg_url) as hub, seated(pg_url) as seat:
        await channel(hub)
        await _warmed(hub)
        await seat.next_handoff()
        results = await hub.publish_many([{"kind": "k", "subject": str(i)} for i in range(2)])
        assert {d.state for r in results for d in r.deliveries} == {State.PENDING}
        assert await seat.next_handoff() is None


def test_an_unreadable_handoff_is_none() -> None:
    assert handoff.decode('{"s": 1}') is None
    assert handoff.decode("not json") is None
    assert handoff.split("1,2") == ("1,2", "")


async def test_e2_a_key_stored_before_hands_off_nothing(pg_url: str) -> None:
    async with tidings.Hub(pg_url) as hub, seated(pg_url) as seat:
        await channel(hub)
        await _warmed(hub)
        await seat.next_handoff()
        first = await _publish(hub, idempotency_key="k-1")
        got = await seat.next_handoff()
        assert got is not None
        assert got.event == first.event
        again = await _publish(hub, idempotency_key="k-1")
        assert again.event == first.event  # E2: the first event, nothing new
        assert [r.delivery_id for r in got.rows] == [d.id for d in first.deliveries]
        # The warming event's row (claimed by no one here) and the first's, handed.
        stored = await states(hub)
        assert sorted(d.state.value for d in stored.values()) == ["pending", "sending"]


async def test_other_listeners_are_not_woken_for_handed_rows(pg_url: str) -> None:
    """A dispatcher without the seat hears the notification too: the rows it names were
    handed, so it has nothing to claim and is not woken for them."""
    heard: asyncio.Queue[frozenset[int] | None] = asyncio.Queue()
    listener = PostgresListener(make_url(pg_url), heard.put_nowait)
    await listener.start()
    try:
        async with tidings.Hub(pg_url) as hub, seated(pg_url) as seat:
            plain = await channel(hub, "plain", filter={"kinds": ["plain.*"]})
            limited = await channel(hub, "limited", rate_per_min=60, filter={"kinds": ["rl.*"]})
            await _publish(hub, kind="plain.warm")  # read through the engine: not handed
            assert await asyncio.wait_for(heard.get(), 10) == frozenset({plain.id})
            assert await seat.next_handoff() is None  # the same wake-up, heard by the seat
            await _publish(hub, kind="plain.handed")
            assert await seat.next_handoff() is not None
            await _publish(hub, kind="rl.claimed")
            # The next wake-up this listener has is the rate-limited channel's.
            assert await asyncio.wait_for(heard.get(), 10) == frozenset({limited.id})
    finally:
        await listener.close()


async def test_a_seat_left_still_takes_what_was_handed_to_it_and_no_one_else_does(
    pg_url: str,
) -> None:
    """A publish that tested the seat just before it was left hands off to it still: the
    notification names the seat's generation, and only the connection that took it takes
    it — not whoever takes the seat next, under a generation of its own."""
    taken: asyncio.Queue[handoff.HandOff] = asyncio.Queue()
    next_taken: asyncio.Queue[handoff.HandOff] = asyncio.Queue()
    listener = PostgresListener(make_url(pg_url), lambda _hint: None)
    after = PostgresListener(make_url(pg_url), lambda _hint: None)
    await listener.start()
    await after.start()
    raw = await asyncpg.connect(_dsn(pg_url))
    payloads: asyncio.Queue[str] = asyncio.Queue()
    await raw.add_listener(NOTIFY_CHANNEL, lambda *args: payloads.put_nowait(args[-1]))
    try:
        async with tidings.Hub(pg_url) as hub:
            await channel(hub)
            await _warmed(hub)
            await asyncio.wait_for(payloads.get(), 10)
            number = await listener.take_seat(OWNER, 120.0, lambda h, _late: taken.put_nowait(h))
            assert number is not None
            published = await _publish(hub)
            payload = await asyncio.wait_for(payloads.get(), 10)
            first = await asyncio.wait_for(taken.get(), 10)
            assert [r.delivery_id for r in first.rows] == [d.id for d in published.deliveries]
            await listener.leave_seat()
            again = await after.take_seat(OWNER, 120.0, lambda h, _late: next_taken.put_nowait(h))
            assert again == number  # the same seat, taken again
            # As if published just before the seat was left: the first taker takes it again,
            # the next one does not.
            await raw.execute("SELECT pg_notify($1, $2)", NOTIFY_CHANNEL, payload)
            assert (await asyncio.wait_for(taken.get(), 10)).generation == first.generation
            second = await _publish(hub, subject="finding:2")
            mine = await asyncio.wait_for(next_taken.get(), 10)
            assert [r.delivery_id for r in mine.rows] == [d.id for d in second.deliveries]
            assert next_taken.empty()  # it took the second publish's alone
            assert taken.empty()
    finally:
        await raw.close()
        await listener.close()
        await after.close()
