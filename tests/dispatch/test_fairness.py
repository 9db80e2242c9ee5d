"""Fairness: a channel draining a backlog does not keep a quiet channel waiting. Its one
message is claimed beside the backlog's claims and takes the next free send slot, rather
than queueing behind every send the backlog already has waiting."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import tidings
from tests.conftest import count
from tests.dispatch.helpers import running, webhook
from tests.sink import Answer, Sink
from tidings.dispatch.slots import SendSlots

BACKLOG = 60
CONCURRENCY = 4


async def test_a_quiet_channel_is_served_while_a_busy_backlog_drains(
    hub: tidings.Hub, sink: Sink
) -> None:
    sink.default("/busy", Answer(200, delay_s=0.3))  # the backlog takes a few seconds
    await webhook(hub, sink.url("/busy"), name="busy", filter={"kinds": ["busy.*"]})
    await webhook(hub, sink.url("/quiet"), name="quiet", filter={"kinds": ["quiet.*"]})
    await hub.publish_many([{"kind": "busy.alert", "subject": f"b{i}"} for i in range(BACKLOG)])
    async with running(hub, concurrency=CONCURRENCY, claim_size=10):
        await sink.await_for(1, "/busy", timeout_s=10)  # the backlog is draining
        busy_before = sink.count("/busy")
        await hub.publish(kind="quiet.alert", subject="one message")
        (quiet,) = await sink.await_for(1, "/quiet", timeout_s=10)
        busy_by_then = sum(1 for r in sink.requests("/busy") if r.at <= quiet.at)
    assert busy_by_then < BACKLOG  # served while the backlog still drained
    # Behind every send the backlog had waiting for a slot, the quiet message would have
    # waited for several rounds of CONCURRENCY sends; it waits for the slots in use.
    assert busy_by_then - busy_before <= CONCURRENCY + 2


async def test_send_slots_go_to_the_channels_in_turns() -> None:
    slots = SendSlots(1)
    order: list[str] = []
    release = asyncio.Event()

    async def send(channel_id: int, name: str) -> None:
        async with slots.slot(channel_id):
            order.append(name)
            await release.wait()
            release.clear()

    holder = asyncio.create_task(send(1, "busy-0"))
    await asyncio.sleep(0)
    busy = [asyncio.create_task(send(1, f"busy-{i}")) for i in range(1, 4)]
    await asyncio.sleep(0)
    quiet = asyncio.create_task(send(2, "quiet"))
    for _ in range(5):
        await asyncio.sleep(0)
        release.set()
        await asyncio.sleep(0)
    await asyncio.wait_for(asyncio.gather(holder, *busy, quiet), 1)
    # busy-1 was waiting before the quiet channel came; then they take turns.
    assert order[:4] == ["busy-0", "busy-1", "quiet", "busy-2"]


async def test_a_cancelled_waiter_passes_its_slot_on() -> None:
    slots = SendSlots(1)
    held = asyncio.Event()
    done = asyncio.Event()

    async def hold() -> None:
        async with slots.slot(1):
            held.set()
            await done.wait()

    holder = asyncio.create_task(hold())
    await held.wait()
    waiter = asyncio.create_task(hold())
    await asyncio.sleep(0)
    waiter.cancel()
    done.set()
    await asyncio.gather(holder, waiter, return_exceptions=True)
    assert slots.free == 1


async def test_a_channel_with_nothing_in_flight_takes_a_kept_slot_at_once() -> None:
    slots = SendSlots(4, reserved=1)
    started: list[str] = []
    release = asyncio.Event()

    async def send(channel_id: int, name: str) -> None:
        async with slots.slot(channel_id):
            started.append(name)
            await release.wait()

    busy = [asyncio.create_task(send(1, f"busy-{i}")) for i in range(6)]
    for _ in range(3):
        await asyncio.sleep(0)
    # The backlog leaves the kept slot free, and waits for its own sends to end.
    assert started == ["busy-0", "busy-1", "busy-2"]
    assert slots.free == 1
    quiet = asyncio.create_task(send(2, "quiet"))
    await asyncio.sleep(0)
    assert started[-1] == "quiet"  # at once, not after the next send of the backlog
    assert slots.free == 0
    release.set()
    await asyncio.wait_for(asyncio.gather(*busy, quiet), 1)
    assert sorted(started) == sorted([*(f"busy-{i}" for i in range(6)), "quiet"])
    assert slots.free == 4


# A saturated loop: every turn spends this long in one callback (the stand-in for a core
# serving dozens of sends), so a callback scheduled at any moment waits about as long.
BUSY_TURN_S = 0.005


def _block_the_loop() -> None:
    """One turn's work on a full core: the loop can do nothing else meanwhile."""
    time.sleep(BUSY_TURN_S)


async def _turns_until(check: Callable[[], bool], busy: bool, timeout_s: float = 5.0) -> None:
    """Run turns of the loop, each `BUSY_TURN_S` long when `busy`, until `check()` holds."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "the slots never got there"
        if busy:
            _block_the_loop()
            await asyncio.sleep(0)
        else:
            await asyncio.sleep(0.001)


async def test_on_a_saturated_loop_a_channel_holds_its_share_while_others_send() -> None:
    slots = SendSlots(12, reserved=0)
    assert slots.share == 4
    done = asyncio.Event()

    async def send(channel_id: int) -> None:
        async with slots.slot(channel_id):
            await done.wait()

    quiet = asyncio.create_task(send(2))  # another channel sends too
    await asyncio.sleep(0)
    await _turns_until(lambda: slots.saturated, busy=True)
    backlog = [asyncio.create_task(send(1)) for _ in range(12)]
    await _turns_until(lambda: slots.free == 12 - 1 - slots.share, busy=True)
    for _ in range(5):  # and no more than its share, turn after turn
        _block_the_loop()
        await asyncio.sleep(0)
    assert slots.free == 12 - 1 - slots.share
    # Calm again, the backlog takes the slots the share held back.
    await _turns_until(lambda: not slots.saturated, busy=False)
    await _turns_until(lambda: slots.free == 0, busy=False)
    done.set()
    await asyncio.wait_for(asyncio.gather(quiet, *backlog), 1)
    assert slots.free == 12


async def test_on_a_saturated_loop_a_channel_sending_alone_keeps_every_slot() -> None:
    slots = SendSlots(12, reserved=0)
    done = asyncio.Event()

    async def send(channel_id: int) -> None:
        async with slots.slot(channel_id):
            await done.wait()

    first = asyncio.create_task(send(1))
    await asyncio.sleep(0)
    await _turns_until(lambda: slots.saturated, busy=True)
    rest = [asyncio.create_task(send(1)) for _ in range(11)]
    await _turns_until(lambda: slots.free == 0, busy=True)
    assert slots.saturated
    done.set()
    await asyncio.wait_for(asyncio.gather(first, *rest), 1)
    assert slots.free == 12


async def test_on_a_saturated_loop_a_backlog_sends_within_its_share_and_every_row_once(
    hub: tidings.Hub, sink: Sink
) -> None:
    answer_s = 0.2
    sink.default("/busy", Answer(200, delay_s=answer_s))
    await webhook(hub, sink.url("/busy"), name="busy", filter={"kinds": ["busy.*"]})
    await webhook(hub, sink.url("/quiet"), name="quiet", filter={"kinds": ["quiet.*"]})
    await hub.publish_many([{"kind": "busy.alert", "subject": f"b{i}"} for i in range(48)])
    stop = asyncio.Event()

    async def saturate() -> None:
        while not stop.is_set():
            _block_the_loop()
            await asyncio.sleep(0)

    async def trickle() -> None:  # the quiet channel sends now and then: channels take turns
        while not stop.is_set():
            await hub.publish(kind="quiet.alert", subject="now and then")
            await asyncio.sleep(0.1)

    async with running(hub, concurrency=12, claim_size=24):
        share = 12 // 3
        helpers = [asyncio.create_task(saturate()), asyncio.create_task(trickle())]
        try:
            await sink.await_for(48, "/busy", timeout_s=60)
        finally:
            stop.set()
            await asyncio.gather(*helpers)
    arrivals = sorted(r.at for r in sink.requests("/busy"))
    assert len(arrivals) == 48  # each row once
    assert await count(hub, "attempts") >= 48
    # Every send arriving within one answer's time is still out at the window's end, so no
    # window holds more arrivals than the busy channel had slots. Its first claim took all
    # twelve before the loop was found saturated; after that, its share.
    settled = arrivals[0] + 2 * answer_s
    most = max(
        sum(1 for t in arrivals if start <= t < start + answer_s * 0.75)
        for start in arrivals
        if start >= settled
    )
    assert most <= share
