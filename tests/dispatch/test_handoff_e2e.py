"""Hand-offs end to end (PostgreSQL): an idle dispatcher holds a seat, another process's
single publish leases its row to it, and it sends without a claim; what it cannot send
within the lease goes back to the claims, and a dispatcher that stops or loses its
connection is handed nothing."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import psycopg
import pytest

import tidings
from tests.dispatch.helpers import eventually, kill_wakeup_connections, running, settled, webhook
from tests.sink import Answer, Sink
from tidings.core.states import State
from tidings.dispatch.sending import INTERRUPTED_ERROR
from tidings.metrics import Metrics
from tidings.store import Store
from tidings.store.handoff import SEAT_LOCK_CLASS


class CountedClaims(Store):
    """A store that counts the dispatcher's realtime claims (it passes them on)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.claims = 0

    async def claim_express(self, *args: Any, **kw: Any) -> Any:
        self.claims += 1
        return await super().claim_express(*args, **kw)

    async def claim_realtime(self, *args: Any, **kw: Any) -> Any:
        self.claims += 1
        return await super().claim_realtime(*args, **kw)


async def _first_event_through(producer: tidings.Hub, sink: Sink) -> None:
    """The producer's first publish reads the channels (it goes through a transaction of
    its own, and is claimed); the next ones may hand off."""
    await producer.publish(kind="warm.up", subject="first")
    await sink.await_for(1, "/hook")


async def _delivery(hub: tidings.Hub, delivery_id: int) -> tidings.Delivery:
    page = await hub.deliveries(page_size=200)
    (found,) = [v.delivery for v in page.items if v.delivery.id == delivery_id]
    return found


async def test_an_idle_dispatcher_sends_a_handed_row_without_a_claim(
    pg_url: str, sink: Sink
) -> None:
    store = CountedClaims(pg_url)
    metrics = Metrics(store)
    async with tidings.Hub(pg_url) as hub, tidings.Hub(pg_url) as producer:
        await webhook(hub, sink.url("/hook"))
        async with running(hub, store=store, worker_id="seated", metrics=metrics) as dispatcher:
            await asyncio.wait_for(dispatcher.idle.wait(), 5)
            await _first_event_through(producer, sink)
            await asyncio.wait_for(dispatcher.idle.wait(), 5)
            claims = store.claims
            published = await producer.publish(kind="a.b", subject="handed", title="t")
            (delivery,) = published.deliveries
            assert delivery.state is State.SENDING  # leased by the publish itself (C1)
            (_, got) = await sink.await_for(2, "/hook")
            assert got.json()["event"]["subject"] == "handed"
            await eventually(
                lambda: _is_sent(hub, delivery.id), what="the handed row recorded as sent"
            )
            assert store.claims == claims  # no claim on its path
        sent = await _delivery(hub, delivery.id)
        assert (sent.state, sent.attempts) == (State.SENT, 1)  # O1
        (attempt,) = (await hub.store.get_delivery(delivery.id)).attempts_log
        assert attempt.worker_id == "seated"  # O7
        scrape = (await metrics.render()).decode()
        assert "tidings_handed_deliveries_total 1.0" in scrape
        assert 'tidings_claimed_deliveries_total{mode="realtime"} 2.0' in scrape
    await store.close()


async def _is_sent(hub: tidings.Hub, delivery_id: int) -> bool:
    return (await _delivery(hub, delivery_id)).state is State.SENT


async def test_a_stopped_dispatcher_is_handed_nothing(pg_url: str, sink: Sink) -> None:
    async with tidings.Hub(pg_url) as hub, tidings.Hub(pg_url) as producer:
        await webhook(hub, sink.url("/hook"))
        async with running(hub) as dispatcher:
            await asyncio.wait_for(dispatcher.idle.wait(), 5)
            await _first_event_through(producer, sink)
        published = await producer.publish(kind="a.b", subject="nobody waits")
        assert [d.state for d in published.deliveries] == [State.PENDING]
        async with running(hub):  # the next dispatcher claims it
            await settled(hub, 2)
    assert sink.count("/hook") == 2


async def test_a_handoff_whose_lease_ends_too_soon_goes_back_to_the_claims(
    pg_url: str, sink: Sink
) -> None:
    """The seat says leases of one second, less than a send may take (C5): the dispatcher
    does not send the row late but gives it back, its attempt revoked, and a claim sends it
    once."""
    store = CountedClaims(pg_url)
    async with tidings.Hub(pg_url) as hub, tidings.Hub(pg_url) as producer:
        await webhook(hub, sink.url("/hook"))
        async with running(hub, store=store) as dispatcher:
            await asyncio.wait_for(dispatcher.idle.wait(), 5)
            await _first_event_through(producer, sink)
            with psycopg.connect(pg_url, autocommit=True) as admin:
                admin.execute("UPDATE express_seats SET lease_s = 1")
            claims = store.claims
            published = await producer.publish(kind="a.b", subject="short lease")
            (delivery,) = published.deliveries
            assert delivery.state is State.SENDING
            (_, got) = await sink.await_for(2, "/hook")
            assert got.json()["event"]["subject"] == "short lease"
            await eventually(lambda: _is_sent(hub, delivery.id), what="sent by a claim")
            assert store.claims > claims
        sent = await _delivery(hub, delivery.id)
        assert sent.attempts == 1  # the handed attempt was revoked (C1, W3)
        assert len((await hub.store.get_delivery(delivery.id)).attempts_log) == 1
    assert sink.count("/hook") == 2
    await store.close()


async def test_a_handoff_to_a_changed_channel_is_sent_as_the_channel_is_now(
    pg_url: str, sink: Sink
) -> None:
    async with tidings.Hub(pg_url) as hub, tidings.Hub(pg_url) as producer:
        ch = await webhook(hub, sink.url("/hook"))
        async with running(hub) as dispatcher:
            await asyncio.wait_for(dispatcher.idle.wait(), 5)
            await _first_event_through(producer, sink)
            await hub.channels.update(ch.id, config={"url": sink.url("/moved")})
            # The producer reads the channels again (an update may change what it fans out
            # by); the dispatcher's copy is the one it had.
            await producer.publish(kind="a.b", subject="read again")
            await sink.await_for(1, "/moved")
            published = await producer.publish(kind="a.b", subject="moved")
            assert [d.state for d in published.deliveries] == [State.SENDING]
            (_, got) = await sink.await_for(2, "/moved")
            assert got.json()["event"]["subject"] == "moved"
    assert sink.count("/hook") == 1


async def test_a_dispatcher_that_listens_again_takes_a_seat_again(
    pg_url: str, sink: Sink, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tidings.dispatch.wakeup")
    store = CountedClaims(pg_url)
    async with tidings.Hub(pg_url) as hub, tidings.Hub(pg_url) as producer:
        await webhook(hub, sink.url("/hook"))
        async with running(hub, store=store, poll_interval_s=10.0) as dispatcher:
            await asyncio.wait_for(dispatcher.idle.wait(), 5)
            await _first_event_through(producer, sink)
            assert kill_wakeup_connections(pg_url) == 1
            # Its seat went with its connection: this one is claimed, not handed.
            published = await producer.publish(kind="a.b", subject="while deaf")
            assert [d.state for d in published.deliveries] == [State.PENDING]
            await sink.await_for(2, "/hook")
            await eventually(
                lambda: _true("wake-up connection restored" in caplog.text),
                what="listening again",
            )
            await asyncio.wait_for(dispatcher.idle.wait(), 5)
            claims = store.claims
            published = await producer.publish(kind="a.b", subject="seated again")
            assert [d.state for d in published.deliveries] == [State.SENDING]
            await sink.await_for(3, "/hook")
            assert store.claims == claims
    await store.close()


async def _true(value: bool) -> bool:
    return value


async def test_w3_a_handoff_in_flight_at_a_stop_is_recorded_not_left_leased(
    pg_url: str, sink: Sink
) -> None:
    sink.script("/hook", Answer(), Answer(hang=True))
    async with tidings.Hub(pg_url) as hub, tidings.Hub(pg_url) as producer:
        await webhook(hub, sink.url("/hook"))
        try:
            async with running(hub, grace_s=0.2) as dispatcher:
                await asyncio.wait_for(dispatcher.idle.wait(), 5)
                await _first_event_through(producer, sink)
                published = await producer.publish(kind="a.b", subject="hangs")
                (delivery,) = published.deliveries
                assert delivery.state is State.SENDING
                await eventually(lambda: _true(sink.held == 1), what="the send held")
        finally:
            sink.release()
        # Interrupted mid-send: it may have arrived, so it keeps its attempt and is retried.
        left = await _delivery(hub, delivery.id)
        assert left.state is State.PENDING
        assert left.attempts == 1
        (attempt,) = (await hub.store.get_delivery(delivery.id)).attempts_log
        assert attempt.status.value == "retryable"
        assert attempt.error == INTERRUPTED_ERROR


async def test_a_busy_dispatcher_leaves_its_seat_to_one_that_waits(pg_url: str, sink: Sink) -> None:
    """W1: hand-offs go to whichever dispatcher waits. One whose handed rows are many (here
    half its concurrency of two: one hanging send) leaves its seat until they are few."""
    sink.default("/slow", Answer(hang=True))
    async with tidings.Hub(pg_url) as hub, tidings.Hub(pg_url) as producer:
        await webhook(hub, sink.url("/slow"), name="slow", filter={"kinds": ["slow.*"]})
        await webhook(hub, sink.url("/fast"), name="fast", filter={"kinds": ["fast.*"]})
        try:
            async with (
                running(hub, worker_id="a", concurrency=2) as a,
                running(hub, worker_id="b", concurrency=2) as b,
            ):
                await asyncio.wait_for(a.idle.wait(), 5)
                await asyncio.wait_for(b.idle.wait(), 5)
                await producer.publish(kind="fast.warm", subject="reads the channels")
                await sink.await_for(1, "/fast")
                slow = (await producer.publish(kind="slow.one", subject="hangs")).deliveries
                await eventually(lambda: _true(sink.held == 1), what="the slow send held")
                busy = (await _delivery(hub, slow[0].id)).lease_owner
                assert busy in ("a", "b")
                await eventually(lambda: _seats_taken(pg_url, 1), what="the busy one left its seat")
                fast = (await producer.publish(kind="fast.two", subject="to the other")).deliveries
                assert [d.state for d in fast] == [State.SENDING]
                await sink.await_for(2, "/fast")
                other = (await _delivery(hub, fast[0].id)).lease_owner
                assert other in ("a", "b")
                assert other != busy
                sink.release()
                await eventually(lambda: _seats_taken(pg_url, 2), what="seated again")
        finally:
            sink.release()


async def _seats_taken(pg_url: str, count: int) -> bool:
    with psycopg.connect(pg_url, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            [SEAT_LOCK_CLASS],
        ).fetchone()
    return row == (count,)


async def test_a_dispatcher_without_handoffs_takes_no_seat(pg_url: str, sink: Sink) -> None:
    async with tidings.Hub(pg_url) as hub, tidings.Hub(pg_url) as producer:
        await webhook(hub, sink.url("/hook"))
        async with running(hub, handoffs=False) as dispatcher:
            await asyncio.wait_for(dispatcher.idle.wait(), 5)
            await _first_event_through(producer, sink)
            assert await _seats_taken(pg_url, 0)
            published = await producer.publish(kind="a.b", subject="claimed")
            assert [d.state for d in published.deliveries] == [State.PENDING]
            await settled(hub, 2)


async def test_e1_a_publish_answers_what_it_stored_on_either_backend(
    hub: tidings.Hub, backend: str, sink: Sink
) -> None:
    """With a dispatcher waiting, PostgreSQL hands the row off (`sending`, its attempt
    counted); SQLite has no hand-offs and stores it `pending`. Either way the answer is what
    was stored, and the row is sent once."""
    await webhook(hub, sink.url("/hook"))
    async with running(hub) as dispatcher:
        await asyncio.wait_for(dispatcher.idle.wait(), 5)
        await hub.publish(kind="warm.up", subject="reads the channels")
        await sink.await_for(1, "/hook")
        await asyncio.wait_for(dispatcher.idle.wait(), 5)
        published = await hub.publish(kind="a.b", subject="second")
        (delivery,) = published.deliveries
        expected = (State.SENDING, 1) if backend == "postgresql" else (State.PENDING, 0)
        assert (delivery.state, delivery.attempts) == expected
        await settled(hub, 2)
    assert sink.count("/hook") == 2
