"""W2 wake-ups that name their channels: an idle dispatcher claims for them at once, and
nothing else it should send waits longer for it."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from typing import Any

import psycopg
import pytest

import tidings
from tests.dispatch.helpers import eventually, kill_wakeup_connections, running, webhook
from tests.sink import Answer, Sink
from tidings.dispatch.wakeup import DEAF_POLL_S, Wakeup
from tidings.store import Store
from tidings.store.notify import (
    MAX_HINT_CHARS,
    NOTIFY_CHANNEL,
    Hint,
    PostgresListener,
    decode_hint,
    encode_hint,
)


def test_a_hint_names_channels_and_falls_back_to_all() -> None:
    assert decode_hint(encode_hint([3, 1, 3])) == frozenset({1, 3})
    assert encode_hint([3, 1, 3]) == "1,3"
    assert decode_hint("") is None  # an old publisher, or too many channels: look at all
    assert decode_hint("1,x") is None
    many = range(10**6, 10**6 + MAX_HINT_CHARS)
    assert encode_hint(many) == ""


async def test_hints_add_up_until_taken_and_none_means_every_channel(
    hub: tidings.Hub,
) -> None:
    wakeup = Wakeup(hub.store)
    assert not await wakeup.wait(0.01)
    wakeup.notify(frozenset({1}))
    wakeup.notify(frozenset({2}))
    assert await wakeup.wait(1)
    assert wakeup.take_hint() == frozenset({1, 2})
    assert not await wakeup.wait(0.01)  # taken: nothing left to wake for

    wakeup.notify(frozenset({1}))
    wakeup.notify(None)
    wakeup.notify(frozenset({2}))
    await asyncio.sleep(0)
    assert wakeup.take_hint() is None


async def test_a_ring_answers_at_once_without_news_and_news_wins_over_it(
    hub: tidings.Hub,
) -> None:
    wakeup = Wakeup(hub.store)
    waiter = asyncio.create_task(wakeup.wait(30))
    await asyncio.sleep(0.01)
    wakeup.ring()  # a job ended: the sleeper looks, it was not told of new work
    assert await asyncio.wait_for(waiter, 1) is False
    wakeup.ring()  # rung while nobody waited: the next wait answers at once
    assert await asyncio.wait_for(wakeup.wait(30), 1) is False
    wakeup.ring()
    wakeup.notify(frozenset({3}))
    assert await asyncio.wait_for(wakeup.wait(30), 1) is True
    assert wakeup.take_hint() == frozenset({3})
    assert not await wakeup.wait(0.01)  # both answered


async def test_a_wake_up_from_the_loop_s_own_thread_is_in_before_the_next_turn(
    hub: tidings.Hub,
) -> None:
    wakeup = Wakeup(hub.store)
    waiter = asyncio.create_task(wakeup.wait(30))
    await asyncio.sleep(0.01)
    wakeup.notify(frozenset({5}))
    assert wakeup.take_hint() == frozenset({5})  # not queued behind a turn of the loop
    assert await asyncio.wait_for(waiter, 1) is True


async def test_news_goes_first_to_whoever_starts_jobs_and_only_what_is_left_wakes(
    hub: tidings.Hub,
) -> None:
    wakeup = Wakeup(hub.store)
    given: list[frozenset[int]] = []

    def start_known(hint: frozenset[int]) -> frozenset[int]:
        given.append(hint)
        return hint - {1, 2}  # 1 and 2 are known: their jobs start here

    wakeup.on_news = start_known
    waiter = asyncio.create_task(wakeup.wait(30))
    await asyncio.sleep(0.01)
    wakeup.notify(frozenset({1, 2}))
    assert given == [frozenset({1, 2})]  # at once, within the call
    await asyncio.sleep(0.01)
    assert not waiter.done()  # all taken: nothing left for the loop
    wakeup.notify(frozenset({2, 3}))
    assert await asyncio.wait_for(waiter, 1) is True
    assert wakeup.take_hint() == frozenset({3})
    wakeup.notify(None)  # "look at every channel" is the loop's alone
    assert given == [frozenset({1, 2}), frozenset({2, 3})]
    assert await wakeup.wait(1)
    assert wakeup.take_hint() is None


async def test_a_wake_up_whose_waiter_was_cancelled_is_not_lost(hub: tidings.Hub) -> None:
    wakeup = Wakeup(hub.store)
    waiter = asyncio.create_task(wakeup.wait(5))
    await asyncio.sleep(0.01)
    wakeup.notify(frozenset({7}))
    await asyncio.sleep(0)  # the hint is in; the waiter has not run yet
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    assert await wakeup.wait(0.5)
    assert wakeup.take_hint() == frozenset({7})


async def test_w2_a_wake_up_for_a_known_channel_starts_its_job_as_it_is_heard(
    hub: tidings.Hub, sink: Sink
) -> None:
    """An idle dispatcher starts a known realtime channel's job within the wake-up's own
    call, not once its loop has woken a turn later; a channel it does not know yet is left
    to the loop, which looks for it."""
    channel = await webhook(hub, sink.url("/hook"))
    async with running(hub, poll_interval_s=10) as dispatcher:
        await hub.publish(kind="a.b", subject="makes the channel known")
        await sink.await_for(1, "/hook", timeout_s=5)
        await asyncio.wait_for(dispatcher.idle.wait(), 5)
        wakeup = dispatcher._wakeup
        assert wakeup is not None
        wakeup.notify(frozenset({channel.id + 1000}))
        assert dispatcher.idle.is_set()  # not known: the loop's to look for
        await asyncio.wait_for(dispatcher.idle.wait(), 5)
        wakeup.notify(frozenset({channel.id}))
        assert not dispatcher.idle.is_set()  # its job is running already
        await asyncio.wait_for(dispatcher.idle.wait(), 5)  # found nothing, and ended
        await hub.publish(kind="a.b", subject="sent as before")
        await sink.await_for(2, "/hook", timeout_s=5)


async def test_a_notification_reaches_the_listener_as_the_connection_reads_it(
    pg_url: str,
) -> None:
    """PostgreSQL only. The driver would queue each notification's callback for a later turn
    of the loop; the wake-up's is called as the notification is read."""
    heard: asyncio.Queue[tuple[Hint, list[str]]] = asyncio.Queue()

    def on_notify(hint: Hint) -> None:
        callers, frame = [], sys._getframe(1)
        while frame is not None:
            callers.append(frame.f_code.co_name)
            frame = frame.f_back
        heard.put_nowait((hint, callers))

    async with tidings.Hub(pg_url) as hub:
        listener = hub.store.listener(on_notify, lambda: None)
        assert isinstance(listener, PostgresListener)
        await listener.start()
        try:
            with psycopg.connect(pg_url, autocommit=True) as other:
                other.execute("SELECT pg_notify(%s, '7,9')", [NOTIFY_CHANNEL])
                other.execute("SELECT pg_notify('another_channel', '8')")
                other.execute("SELECT pg_notify(%s, '')", [NOTIFY_CHANNEL])
            hint, callers = await asyncio.wait_for(heard.get(), 5)
            assert hint == frozenset({7, 9})
            assert "_process_notification" in callers  # the driver's reading, not the loop
            hint, _ = await asyncio.wait_for(heard.get(), 5)
            assert hint is None  # another channel's is not ours; an empty one names all
        finally:
            await listener.close()


async def test_w2_a_retry_due_elsewhere_is_sent_on_time_while_wake_ups_name_another_channel(
    hub: tidings.Hub, sink: Sink
) -> None:
    """Woken for a known channel, the dispatcher skips asking which channels are due; the
    others must still be looked at (when the job ends, or the next row falls due) rather than
    at the 10 s poll."""
    await webhook(hub, sink.url("/busy"), name="busy", filter={"kinds": ["busy.*"]})
    await webhook(
        hub, sink.url("/retry"), name="retry", filter={"kinds": ["retry.*"]}, retry_backoff_s=1.0
    )
    sink.script("/retry", Answer(status=500))
    async with running(hub, poll_interval_s=10):
        await hub.publish(kind="busy.first", subject="known channel")
        await sink.await_for(1, "/busy", timeout_s=5)
        await hub.publish(kind="retry.once", subject="fails once")
        (failed,) = await sink.await_for(1, "/retry", timeout_s=5)
        # Keep the dispatcher busy with wake-ups that name only `busy`.
        for i in range(15):
            await hub.publish(kind="busy.more", subject=f"busy {i}")
            await asyncio.sleep(0.2)
            if sink.count("/retry") >= 2:
                break
        retried = await sink.await_for(2, "/retry", timeout_s=5)
    assert retried[1].at - failed.at < 3.0  # the 1 s backoff, not the 10 s poll
    assert sink.count("/busy") >= 2


async def test_a_lost_listen_connection_is_noticed_at_once_and_replaced(
    pg_url: str, sink: Sink, caplog: pytest.LogCaptureFixture
) -> None:
    """PostgreSQL only. The LISTEN connection is killed: the dispatcher notices at once (not
    at the next health check), polls every DEAF_POLL_S meanwhile, and listens again."""
    caplog.set_level(logging.INFO, logger="tidings.dispatch.wakeup")
    async with tidings.Hub(pg_url) as hub, tidings.Hub(pg_url) as producer:
        await webhook(hub, sink.url("/hook"))
        async with running(hub, poll_interval_s=10.0) as dispatcher:
            await asyncio.wait_for(dispatcher.idle.wait(), 5)
            assert kill_wakeup_connections(pg_url) == 1
            # Another process's publish: only NOTIFY or a poll can tell this dispatcher.
            sent_at = time.monotonic()
            await producer.publish(kind="a.b", subject="while deaf")
            (got,) = await sink.await_for(1, "/hook", timeout_s=5)
            assert got.at - sent_at < DEAF_POLL_S + 1.5  # not the 10 s poll
            await eventually(
                lambda: _async_true("wake-up connection restored" in caplog.text),
                timeout_s=10,
                what="listening again",
            )
            sent_at = time.monotonic()
            await producer.publish(kind="a.b", subject="heard again")
            (_, again) = await sink.await_for(2, "/hook", timeout_s=5)
            assert again.at - sent_at < 1.0
    assert "wake-up connection lost" in caplog.text


async def _async_true(value: bool) -> bool:
    return value


class HeldLooks(Store):
    """A store whose looks for due channels can be held unanswered (a busy database)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.hold = False
        self.asked = asyncio.Event()
        self.let_go = asyncio.Event()

    async def due_channels(self, *args: Any, **kw: Any) -> Any:
        if self.hold:
            self.asked.set()
            await self.let_go.wait()
        return await super().due_channels(*args, **kw)


async def test_w2_a_look_for_due_channels_does_not_hold_up_a_wake_up_while_jobs_run(
    hub: tidings.Hub, sink: Sink, db_url: str
) -> None:
    """While jobs run, the dispatcher asks which channels are due beside them: a wake-up
    for a known channel starts its job even while that question waits for its answer (it
    took tens of milliseconds on a busy server, and every wake-up waited for it)."""
    await webhook(hub, sink.url("/slow"), name="slow", filter={"kinds": ["slow.*"]})
    await webhook(hub, sink.url("/fast"), name="fast", filter={"kinds": ["fast.*"]})
    sink.script("/slow", Answer(hang=True))
    store = HeldLooks(db_url)
    try:
        async with running(hub, store=store, worker_id="w"):
            await hub.publish(kind="fast.first", subject="makes the channel known")
            await sink.await_for(1, "/fast", timeout_s=5)
            await hub.publish(kind="slow.one", subject="a job that stays running")
            await sink.await_for(1, "/slow", timeout_s=5)
            store.hold = True  # the next look (at the poll interval) waits
            await asyncio.wait_for(store.asked.wait(), 5)
            await hub.publish(kind="fast.second", subject="woken while the look waits")
            await sink.await_for(2, "/fast", timeout_s=5)
            assert not store.let_go.is_set()
            store.let_go.set()
            sink.release()
    finally:
        store.let_go.set()
        sink.release()
        await store.close()
