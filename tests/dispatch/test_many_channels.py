"""Many due channels: a dispatcher runs a bounded number of channel jobs and starts the next
from its last look when one ends, rather than looking again each time (with ten thousand due
channels a look per job's end costs as much as the jobs)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import tidings
from tests.dispatch.helpers import running, settled, webhook
from tests.sink import Answer, Sink
from tidings.core.states import State
from tidings.dispatch import dispatcher

CHANNELS = 10


async def test_more_due_channels_than_jobs_are_all_served_with_few_looks(
    hub: tidings.Hub, sink: Sink, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dispatcher, "JOBS_AT_ONCE", 2)
    for i in range(CHANNELS):
        await webhook(hub, sink.url("/hook"), name=f"tenant-{i}", tenant=f"t{i}")
    await hub.publish_many(
        [{"kind": "k", "subject": "s", "tenant": f"t{i}"} for i in range(CHANNELS)]
    )
    looks = 0
    look = hub.store.due_channels

    async def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal looks
        looks += 1
        return await look(*args, **kwargs)

    monkeypatch.setattr(hub.store, "due_channels", counted)
    async with running(hub, poll_interval_s=10):  # a poll never helps here
        rows = await settled(hub, CHANNELS)
    assert [r.state for r in rows] == [State.SENT] * CHANNELS
    assert sink.count("/hook") == CHANNELS
    # One look found them all; the jobs took turns. (A look per job's end: ten or more.)
    assert looks <= CHANNELS // 2, looks


async def test_no_poll_looks_while_a_full_round_of_channels_waits(
    hub: tidings.Hub, sink: Sink, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A channel a look finds would start behind every channel already waiting: while a full
    round of jobs waits its turn, the poll interval brings no look (with ten thousand due
    channels each one found them all again). Once few wait, the looks come back."""
    monkeypatch.setattr(dispatcher, "JOBS_AT_ONCE", 2)
    for i in range(CHANNELS):
        await webhook(hub, sink.url("/hook"), name=f"tenant-{i}", tenant=f"t{i}")
    await hub.publish_many(
        [{"kind": "k", "subject": "s", "tenant": f"t{i}"} for i in range(CHANNELS)]
    )
    sink.default("/hook", Answer(hang=True))
    looks = 0
    look = hub.store.due_channels

    async def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal looks
        looks += 1
        return await look(*args, **kwargs)

    turns = 0
    turned = asyncio.Event()
    start_jobs = dispatcher.Dispatcher._start_jobs

    async def counted_turn(self: dispatcher.Dispatcher, *args: Any) -> None:
        nonlocal turns
        turns += 1
        turned.set()
        await start_jobs(self, *args)

    monkeypatch.setattr(hub.store, "due_channels", counted)
    monkeypatch.setattr(dispatcher.Dispatcher, "_start_jobs", counted_turn)
    async with running(hub, poll_interval_s=0.01):
        await sink.await_for(2, "/hook")  # both jobs' sends are held; eight channels wait
        held_at = turns
        while turns < held_at + 20:  # twenty poll intervals pass with both jobs held
            turned.clear()
            await turned.wait()
        assert looks == 1, looks  # the first look's, and no other
        sink.default("/hook", Answer())
        sink.release()
        rows = await settled(hub, CHANNELS)
    assert [r.state for r in rows] == [State.SENT] * CHANNELS
