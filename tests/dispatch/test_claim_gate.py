"""The claim gate: a dispatcher's realtime claims run only a little ahead of its sends."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from sqlalchemy import func, select

import tidings
from tests.dispatch.helpers import running, settled, webhook
from tests.sink import Answer, Sink
from tidings.core.states import State
from tidings.dispatch.gate import CLAIMS_AT_ONCE, RESERVED_FACTOR, ClaimGate
from tidings.dispatch.jobs import CLAIMS_AHEAD
from tidings.store.schema import deliveries


async def _let_run() -> None:
    """Let every task that can run do so until it blocks (no wall time involved)."""
    for _ in range(20):
        await asyncio.sleep(0)


async def _entered(
    gate: ClaimGate, log: list[str], name: str, hold: asyncio.Event, channel_id: int = 0
) -> None:
    async with gate.claim(channel_id):
        log.append(name)
        await hold.wait()


async def test_a_claim_waits_while_the_rows_ahead_are_enough() -> None:
    gate = ClaimGate(ahead=3)
    queued = gate.leased(3)
    log: list[str] = []
    go = asyncio.Event()
    go.set()
    waiter = asyncio.create_task(_entered(gate, log, "next", go))
    await _let_run()
    assert log == []  # three rows wait for a send: no room
    queued.one()  # one went to a send
    await asyncio.wait_for(waiter, 1)
    assert log == ["next"]
    assert gate.waiting == 2


async def test_a_channel_with_nothing_waiting_claims_in_the_room_kept_for_others() -> None:
    # A busy channel filled the gate: its next claim waits, a quiet channel's does not
    # (until twice `ahead` wait), so a backlog's claims never keep a quiet channel out.
    gate = ClaimGate(ahead=4)
    gate.leased(4, channel_id=1)
    log: list[str] = []
    go = asyncio.Event()
    go.set()
    busy = asyncio.create_task(_entered(gate, log, "busy", go, channel_id=1))
    await _let_run()
    quiet = asyncio.create_task(_entered(gate, log, "quiet", go, channel_id=2))
    await asyncio.wait_for(quiet, 1)
    assert log == ["quiet"]
    gate.leased(4, channel_id=2)  # now twice `ahead` wait: no more room for anyone
    late = asyncio.create_task(_entered(gate, log, "late", go, channel_id=3))
    await _let_run()
    assert log == ["quiet"]
    busy.cancel()
    late.cancel()
    await asyncio.gather(busy, late, return_exceptions=True)


async def test_a_quiet_claim_asks_for_its_share_so_every_quiet_place_can_claim() -> None:
    gate = ClaimGate(ahead=1000, fresh_at_once=16)
    gate.leased(1500, channel_id=1, asked=500)  # a backlog filled the gate and one claim more
    sizes: list[int] = []
    hold = asyncio.Event()

    async def quiet(channel_id: int) -> None:
        async with gate.claim(channel_id, 500) as size:
            sizes.append(size)
            await hold.wait()

    tasks = [asyncio.create_task(quiet(100 + i)) for i in range(16)]
    await _let_run()
    # All sixteen quiet places claim at once in the room the backlog left (500 rows).
    assert sizes == [gate.fresh_share] * 16
    assert 16 * gate.fresh_share <= 500
    hold.set()
    await asyncio.wait_for(asyncio.gather(*tasks), 1)


async def test_a_channel_whose_claim_came_back_full_is_busy_until_one_comes_back_short() -> None:
    gate = ClaimGate(ahead=10)
    gate.leased(10, channel_id=1, asked=10).release()  # full, and every row went to a send
    gate.leased(10, channel_id=2)  # another channel's rows fill the gate
    log: list[str] = []
    go = asyncio.Event()
    go.set()
    # Nothing of it waits, yet it is busy: it waits below `ahead` like a backlog, and does
    # not take the room kept for quiet channels.
    busy = asyncio.create_task(_entered(gate, log, "busy", go, channel_id=1))
    await _let_run()
    assert log == []
    busy.cancel()
    await asyncio.gather(busy, return_exceptions=True)
    gate.leased(3, channel_id=1, asked=10).release()  # short: quiet again
    await asyncio.wait_for(_entered(gate, log, "quiet", go, channel_id=1), 1)
    gate.found_nothing(1)
    assert log == ["quiet"]


async def test_at_most_at_once_claims_run_and_the_rest_take_turns_in_order() -> None:
    gate = ClaimGate(ahead=100, at_once=2, fresh_at_once=2)
    log: list[str] = []
    hold = asyncio.Event()
    tasks = [asyncio.create_task(_entered(gate, log, f"c{i}", hold)) for i in range(4)]
    await _let_run()
    assert log == ["c0", "c1"]
    hold.set()
    await asyncio.wait_for(asyncio.gather(*tasks), 1)
    assert log == ["c0", "c1", "c2", "c3"]


async def test_release_gives_back_what_never_went_to_a_send_once() -> None:
    gate = ClaimGate(ahead=10)
    queued = gate.leased(5)
    queued.one()
    queued.release()
    queued.release()
    queued.one()
    assert gate.waiting == 0
    assert gate.leased(2).rows == 2


def test_a_gate_needs_room_for_one_claim() -> None:
    with pytest.raises(ValueError, match="ahead"):
        ClaimGate(ahead=0)
    with pytest.raises(ValueError, match="at_once"):
        ClaimGate(ahead=1, at_once=0)


async def test_many_busy_channels_are_not_all_leased_at_once(hub: tidings.Hub, sink: Sink) -> None:
    # Ten channels of ten rows, two send slots and slow answers: sending takes a while.
    # Without the gate each channel's job would lease its rows at once (all 100 waiting);
    # with it, rows leased and not yet sent out are bounded by what may wait
    # (claim_size × CLAIMS_AHEAD, twice that for channels with nothing waiting), the claims
    # that found room together, and the sends on their way.
    sink.default("/hook", Answer(200, delay_s=0.03))
    for i in range(10):
        await webhook(hub, sink.url("/hook"), name=f"hook-{i}")
    claim_size, concurrency = 5, 2
    bound = claim_size * CLAIMS_AHEAD * RESERVED_FACTOR + CLAIMS_AT_ONCE * claim_size + concurrency
    seen: list[int] = []
    async with running(hub, concurrency=concurrency, claim_size=claim_size):
        await hub.publish_many([{"kind": "k", "subject": f"s{i}"} for i in range(10)])

        async def watch() -> None:
            while True:
                seen.append(await _leased_not_out(hub, sink))
                await asyncio.sleep(0.01)

        watcher = asyncio.create_task(watch())
        try:
            rows = await settled(hub, 100, timeout_s=60)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher  # a watch that failed says why
    assert [r.state for r in rows] == [State.SENT] * 100
    assert sink.count("/hook") == 100
    assert max(seen) > 0  # the watch saw rows leased ahead of their sends
    assert max(seen) <= bound + concurrency  # (+ requests arriving while it looked)


async def _leased_not_out(hub: tidings.Hub, sink: Sink) -> int:
    """Rows leased whose request has not reached the sink yet: `sending` rows less those the
    sink received that are not marked sent yet (the sink is read first, so arrivals while
    the database is read can only make the figure larger)."""
    received = sink.count("/hook")
    async with hub.store.engine.connect() as conn:
        stmt = select(deliveries.c.state, func.count()).group_by(deliveries.c.state)
        counts = {str(row[0]): int(row[1]) for row in await conn.execute(stmt)}
    sending, sent = counts.get(State.SENDING.value, 0), counts.get(State.SENT.value, 0)
    return int(sending - (received - sent))
