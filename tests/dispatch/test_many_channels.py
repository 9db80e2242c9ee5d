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


async def _due_channels(hub: tidings.Hub, sink: Sink) -> None:
    """CHANNELS channels (`tenant-0`, …), each with one event due."""
    for i in range(CHANNELS):
        await webhook(hub, sink.url("/hook"), name=f"tenant-{i}", tenant=f"t{i}")
    await hub.publish_many(
        [{"kind": "k", "subject": "s", "tenant": f"t{i}"} for i in range(CHANNELS)]
    )


class Looks:
    """Counts the store's looks for due channels from here on."""

    def __init__(self, hub: tidings.Hub, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        look = hub.store.due_channels

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return await look(*args, **kwargs)

        monkeypatch.setattr(hub.store, "due_channels", counted)


async def test_more_due_channels_than_jobs_are_all_served_with_few_looks(
    hub: tidings.Hub, sink: Sink, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dispatcher, "JOBS_AT_ONCE", 2)
    await _due_channels(hub, sink)
    looks = Looks(hub, monkeypatch)
    async with running(hub, poll_interval_s=10):  # a poll never helps here
        rows = await settled(hub, CHANNELS)
    assert [r.state for r in rows] == [State.SENT] * CHANNELS
    assert sink.count("/hook") == CHANNELS
    # One look found them all; the jobs took turns. (A look per job's end: ten or more.)
    assert looks.count <= CHANNELS // 2, looks.count


async def test_no_poll_looks_while_a_full_round_of_channels_waits(
    hub: tidings.Hub, sink: Sink, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A channel a look finds would start behind every channel already waiting: while a full
    round of jobs waits its turn, the poll interval brings no look (with ten thousand due
    channels each one found them all again). Once few wait, the looks come back."""
    monkeypatch.setattr(dispatcher, "JOBS_AT_ONCE", 2)
    await _due_channels(hub, sink)
    sink.default("/hook", Answer(hang=True))
    looks = Looks(hub, monkeypatch)
    turns = 0
    turned = asyncio.Event()
    start_jobs = dispatcher.Dispatcher._start_jobs

    async def counted_turn(self: dispatcher.Dispatcher, *args: Any) -> None:
        nonlocal turns
        turns += 1
        turned.set()
        await start_jobs(self, *args)

    monkeypatch.setattr(dispatcher.Dispatcher, "_start_jobs", counted_turn)
    async with running(hub, poll_interval_s=0.01):
        await sink.await_for(2, "/hook")  # both jobs' sends are held; eight channels wait
        held_at = turns
        while turns < held_at + 20:  # twenty poll intervals pass with both jobs held
            turned.clear()
            await turned.wait()
        assert looks.count == 1, looks.count  # the first look's, and no other
        sink.default("/hook", Answer())
        sink.release()
        rows = await settled(hub, CHANNELS)
    assert [r.state for r in rows] == [State.SENT] * CHANNELS


async def _four_channels(hub: tidings.Hub, sink: Sink) -> list[int]:
    """Four channels, each with one event; the first one's send is held (`/slow`)."""
    ids = []
    for i in range(4):
        path = "/slow" if i == 0 else "/hook"
        channel = await webhook(hub, sink.url(path), name=f"tenant-{i}", tenant=f"t{i}")
        ids.append(channel.id)
    sink.default("/slow", Answer(hang=True))
    await hub.publish_many([{"kind": "k", "subject": "s", "tenant": f"t{i}"} for i in range(4)])
    return ids


async def test_waiting_channels_start_together_once_enough_places_are_free(
    hub: tidings.Hub, sink: Sink, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Channels waiting their turn start together (their claims go in one statement): one
    job place freed while two channels wait is not filled until a second one is."""
    monkeypatch.setattr(dispatcher, "JOBS_AT_ONCE", 2)
    monkeypatch.setattr(dispatcher, "START_TOGETHER", 2)
    monkeypatch.setattr(dispatcher, "START_TOGETHER_WAIT_S", 60.0)
    slow, fast, *waiting = await _four_channels(hub, sink)
    seen: list[tuple[str, int]] = []
    fast_ended = asyncio.Event()
    start, job_done = dispatcher.Dispatcher._start, dispatcher.Dispatcher._job_done

    def started(self: dispatcher.Dispatcher, ctx: Any, channel: Any) -> Any:
        seen.append(("start", channel.id))
        return start(self, ctx, channel)

    def ended(self: dispatcher.Dispatcher, channel: Any, task: Any) -> None:
        seen.append(("end", channel.id))
        if channel.id == fast:
            fast_ended.set()
        job_done(self, channel, task)

    monkeypatch.setattr(dispatcher.Dispatcher, "_start", started)
    monkeypatch.setattr(dispatcher.Dispatcher, "_job_done", ended)
    async with running(hub, poll_interval_s=60):
        await fast_ended.wait()  # one place is free; two channels wait
        await sink.await_for(1, "/slow")
        sink.default("/slow", Answer())
        sink.release()
        rows = await settled(hub, 4)
    assert [r.state for r in rows] == [State.SENT] * 4
    between = seen[seen.index(("end", fast)) : seen.index(("end", slow))]
    assert not [e for e in between if e[0] == "start"], seen  # no one started alone
    assert seen[seen.index(("end", slow)) + 1 :][:2] == [("start", i) for i in waiting], seen


async def test_a_free_place_waits_for_others_only_so_long(
    hub: tidings.Hub, sink: Sink, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long job (a held send here) holds its place: the channels waiting their turn still
    start in the one place freed, once START_TOGETHER_WAIT_S has passed (not at the next
    poll, nor when the long job ends)."""
    monkeypatch.setattr(dispatcher, "JOBS_AT_ONCE", 2)
    monkeypatch.setattr(dispatcher, "START_TOGETHER", 2)
    monkeypatch.setattr(dispatcher, "START_TOGETHER_WAIT_S", 0.05)
    await _four_channels(hub, sink)
    async with running(hub, poll_interval_s=60):
        await sink.await_for(3, "/hook", timeout_s=5)  # all three while /slow is held
        assert sink.held == 1
        sink.default("/slow", Answer())
        sink.release()
        rows = await settled(hub, 4)
    assert [r.state for r in rows] == [State.SENT] * 4
