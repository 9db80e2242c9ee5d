"""The realtime job: drain a channel claim by claim, several claims in flight at once.

A job stops when a claim comes back empty (nothing due, no rate budget, or another worker
holds the rows), short on a channel without a rate limit, or the dispatcher is stopping. A
rate-limited channel claims again as its bucket refills, beside the sends in flight. If a
job is cancelled mid-send (W3 after the grace period), the results it has are written and
the unsent rows are given back.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass
from datetime import datetime

from tidings import tracing
from tidings.channels.base import Adapter, Target
from tidings.core.model import Channel, Claim, ClaimedDelivery
from tidings.dispatch import sending
from tidings.dispatch.gate import Queued
from tidings.dispatch.jobs import (
    CLAIMS_IN_FLIGHT,
    JobContext,
    last_start,
    sweep_due,
    write,
)
from tidings.dispatch.report import SendResult


async def run_realtime(ctx: JobContext, channel: Channel, *, alone: bool = False) -> bool:
    """Drain the channel; True when at least one claim leased rows. `alone`: the job was
    started by itself, so its first claim goes without waiting a turn for others' to share
    its statement.

    After a full claim the next is taken while the previous one is still sending (at most
    `CLAIMS_IN_FLIGHT` at once), so the database round trips of claiming and recording
    overlap the HTTP sends instead of pausing them. A claim that fails (its outcomes could
    not be recorded, or the next claim could not be taken) ends the job only once the other
    claims in flight have finished sending and recording: cancelling them would hand back
    rows that already reached the receiver.
    """
    leased = False
    running: set[asyncio.Task[None]] = set()
    failure: BaseException | None = None
    try:
        while failure is None and not ctx.stopping.is_set():
            try:
                claimed = await _claim_next(ctx, channel, alone=alone and not leased)
            except Exception as error:
                failure = error
                break
            if claimed is None:
                break
            leased = True
            if claimed.sweep:
                running.add(asyncio.create_task(_sweep(ctx, channel)))
            if len(claimed.claim) < claimed.asked and channel.rate_per_min <= 0:
                # A short claim took what was due: finish it and end the job. Rows that fall
                # due later wake the dispatcher, which asks once for every channel instead
                # of each job claiming again to find nothing. Sent in this task: nothing
                # else is claimed meanwhile (the one claim of most small channels' jobs).
                try:
                    await send_claim(ctx, claimed)
                except Exception as error:
                    failure = error
                finally:
                    claimed.queued.release()
                break
            task = asyncio.create_task(send_claim(ctx, claimed))
            # Released when the task ends however it ends (even cancelled before it ran).
            task.add_done_callback(functools.partial(_release, claimed.queued))
            running.add(task)
            if len(claimed.claim) < claimed.asked:
                # Rate-limited (C6): short for want of tokens, or of due rows. Claim again
                # once a send ends or the bucket has had time to refill, whichever comes
                # first, beside the sends in flight: waiting for them all would cap the rate
                # at a burst per send time. A claim that finds nothing ends the job.
                full = len(running) >= CLAIMS_IN_FLIGHT
                done, running = await asyncio.wait(
                    running,
                    timeout=None if full else _refill_s(channel),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                failure = _first_failure(done)
                continue
            if len(running) >= CLAIMS_IN_FLIGHT:
                done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                failure = _first_failure(done)
        done_now = await asyncio.gather(*running, return_exceptions=True)
        running.clear()
        failure = failure or next((e for e in done_now if isinstance(e, BaseException)), None)
        if failure is not None:
            raise failure
    finally:
        # Cancelled (W3): each claim records what it sent and gives the rest back.
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
    return leased


#: The longest a rate-limited job waits for its bucket before claiming again (a slow rate's
#: next token may be a minute away: the job then ends, and the dispatcher looks again).
MAX_REFILL_WAIT_S = 1.0


@dataclass(frozen=True)
class Claimed:
    claim: Claim
    #: Monotonic time the lease ends.
    lease_ends: float
    #: Its rows' place in the claim gate.
    queued: Queued
    #: Rows the claim asked for.
    asked: int
    #: An express claim: it saw the channel's breaker closed.
    express: bool
    #: The channel's sweep is due and was left out of the claim: it runs beside the sends.
    sweep: bool = False
    #: Handed over by a publish (`tidings.dispatch.handed`): its lease began before this
    #: dispatcher heard of it, so even its first row goes only within `last_start`.
    handed: bool = False


async def _claim_next(ctx: JobContext, channel: Channel, *, alone: bool) -> Claimed | None:
    """The channel's next realtime claim once the gate has room; None when nothing (more)
    can be leased now."""
    async with ctx.gate.claim(channel.id, ctx.claim_size) as size:
        if ctx.stopping.is_set():
            return None  # stopped while waiting for room
        # Read after the wait for room, so the lease estimate below is not cut short.
        now = ctx.clock.monotonic()
        started_ns = tracing.now_ns()
        sweep = sweep_due(ctx, channel, now)
        claim, express, sweep_after = await _claim(ctx, channel, size, sweep, alone)
        ctx.events.remember(claim)
        if claim is None:
            ctx.gate.found_nothing(channel.id)
            return None
        queued = ctx.gate.leased(len(claim), channel.id, size)
    if ctx.metrics:
        ctx.metrics.claimed("realtime", len(claim))
    if tracing.active():
        tracing.claimed(claim, started_ns)
    # `now` was read before the claim asked, so the lease ends after `now + lease_s`.
    return Claimed(claim, now + ctx.lease_s, queued, size, express, sweep_after)


async def _claim(
    ctx: JobContext, channel: Channel, size: int, sweep: bool, alone: bool
) -> tuple[Claim | None, bool, bool]:
    """The express claim where it serves (one round trip), else the full claim; and whether
    it was express, and whether the channel's due sweep was left out of it.

    A due sweep does not hold up the claim: with an express claim it runs beside the sends
    (the express claim leases no row a sweep would end). On a trickle of single events a
    sweep in the claim, every few seconds, was a full claim's round trips on one event in
    five. Only when the express claim serves nothing does the full claim sweep first (a
    lost lease's rows are the full claim's to take). A dispatcher's first claim of a
    channel goes express too, its sweep coming with a later claim."""
    first = channel.id not in ctx.swept_at
    claim = await ctx.store.claim_express(
        channel, size, ctx.lease_s, ctx.worker_id, known_events=ctx.events.known, alone=alone
    )
    if claim is not None:
        if first or sweep:
            ctx.swept_at[channel.id] = ctx.clock.monotonic()
        return claim, True, sweep and not first
    claim = await ctx.store.claim_realtime(
        channel.id,
        size,
        ctx.lease_s,
        ctx.worker_id,
        swept=sweep,
        known_events=ctx.events.known,
    )
    if sweep:
        ctx.swept_at[channel.id] = ctx.clock.monotonic()
    return claim, False, False


async def _sweep(ctx: JobContext, channel: Channel) -> None:
    """The channel's sweep (C2, O5), beside its sends: lost leases released, spent and
    expired rows ended. Rows it releases fall due at once; the job's end looks again."""
    await ctx.store.sweep(channel.id)


def _refill_s(channel: Channel) -> float:
    """The time the channel's bucket takes to refill a burst, at most `MAX_REFILL_WAIT_S`."""
    return min(channel.rate_burst * 60.0 / channel.rate_per_min, MAX_REFILL_WAIT_S)


def _first_failure(done: set[asyncio.Task[None]]) -> BaseException | None:
    for task in done:
        if task.cancelled():
            continue
        error = task.exception()
        if error is not None:
            return error
    return None


def _release(queued: Queued, _task: asyncio.Task[None]) -> None:
    queued.release()


async def send_claim(ctx: JobContext, claimed: Claimed) -> None:
    """Send every row of a realtime claim, at most `ctx.slots` at once across the dispatcher.

    A few lanes each take the next row until none is left, rather than a task per row: a
    task per row to create, schedule and gather is a noticeable share of a send.

    Once the dispatcher stops (W3) no further row starts; a send still waiting for its
    answer when the grace period ends is recorded as interrupted, never given back unsent.

    A row still waiting for a slot when its lease could end before its send does (many
    slow receivers ahead of it) is not sent but given back, claimable again at once with
    its attempt revoked: sent that late it could go out twice, once by whoever leased it
    next. The first row of a claim always goes, so a claim always makes progress.
    """
    claim, lease_ends, queued = claimed.claim, claimed.lease_ends, claimed.queued
    adapter = ctx.registry.get(claim.channel.kind)
    start_by = last_start(adapter, claim.channel, lease_ends)
    rows = iter(claim.items)
    results: list[SendResult] = []  # kept outside the lanes: a cancel must not forget a send
    waiting: dict[int, datetime] = {}  # delivery id -> start, of sends awaiting their answer
    # A claim's first row always goes (progress); a hand-off's was leased before it came.
    started = 1 if claimed.handed else 0

    channel_id = claim.channel.id

    async def lane() -> None:
        nonlocal started
        for item in rows:
            await ctx.slots.acquire(channel_id)  # the slot's context manager, spelt out
            try:
                queued.one()
                if ctx.stopping.is_set() or (started and ctx.clock.monotonic() > start_by):
                    continue  # left out of the results: given back by _write
                started += 1
                waiting[item.delivery.id] = at = ctx.clock.now()
                results.append(await _send_one(ctx, adapter, claim.channel, item, at))
                del waiting[item.delivery.id]
            finally:
                ctx.slots.release(channel_id)

    # One lane runs in this task: a claim of one row (a quiet channel's) needs no other.
    lanes = [asyncio.create_task(lane()) for _ in range(min(len(claim.items), ctx.lanes) - 1)]
    try:
        await lane()
        if lanes:
            await asyncio.gather(*lanes)
    except BaseException:
        # Cancelled (W3) or broken: record what was sent and give the rest back.
        for task in lanes:
            task.cancel()
        await asyncio.gather(*lanes, return_exceptions=True)
        results.extend(
            sending.interrupted((i,), None, at, ctx.clock.now) for i, at in waiting.items()
        )
        await asyncio.shield(write(ctx, claim, results, lease_ends, claimed.express))
        raise
    await write(ctx, claim, results, lease_ends, claimed.express)


async def _send_one(
    ctx: JobContext, adapter: Adapter, channel: Channel, item: ClaimedDelivery, at: datetime
) -> SendResult:
    if tracing.active():
        return await _send_one_traced(ctx, adapter, channel, item, at)
    target = Target((item.delivery.id,), message_id=item.delivery.message_id)
    try:
        message = sending.render_single(adapter, channel, target, item.event)
    except Exception as error:
        return sending.render_failed(target.delivery_ids, None, error, ctx.clock.now)
    return await sending.send(adapter, ctx.send_context(at=at), channel, message, ctx.clock.now)


async def _send_one_traced(
    ctx: JobContext, adapter: Adapter, channel: Channel, item: ClaimedDelivery, at: datetime
) -> SendResult:
    """The same, as a span in the event's trace (render a span within it)."""
    target = Target((item.delivery.id,), message_id=item.delivery.message_id)
    attributes = tracing.send_attributes(channel, item.delivery.id)
    with tracing.span("tidings.send", parent=item.event.traceparent, attributes=attributes) as tp:
        try:
            with tracing.span("tidings.render"):
                message = sending.render_single(adapter, channel, target, item.event)
        except Exception as error:
            return sending.render_failed(target.delivery_ids, None, error, ctx.clock.now)
        context = ctx.send_context(tp, at)
        result = await sending.send(adapter, context, channel, message, ctx.clock.now)
        tracing.outcome(result.outcome)
        return result
