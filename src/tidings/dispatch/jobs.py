"""Per-channel jobs: drain a realtime channel claim by claim, or send a due digest.

A job stops when a claim comes back short or empty (it took what was due, the rate budget
ran out, or another worker holds the rows) or the dispatcher is stopping. If it is cancelled
mid-send (W3 after the grace period), the results it has are written and the unsent rows are
given back.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from tidings.channels.base import Adapter, SendContext, Target
from tidings.channels.registry import Registry
from tidings.core.clock import Clock
from tidings.core.model import Channel, Claim, ClaimedDelivery
from tidings.core.outcome import Delivered, Partial, attempt_status
from tidings.dispatch import report, sending
from tidings.dispatch.gate import ClaimGate, Queued
from tidings.dispatch.memory import EventMemory
from tidings.dispatch.report import SendResult
from tidings.metrics import Metrics
from tidings.store import Store

#: Claims of one channel in flight at once (sending, or recording what they sent), so the
#: next claim is taken while earlier ones still send or record: with two, a small claim's
#: sends ran dry while the one before it recorded (claims of 200: 0.68 -> 0.91 x raw).
CLAIMS_IN_FLIGHT = 4
#: How many full claims' rows a dispatcher may hold leased before they go to a send: the
#: claim gate's bound (`ClaimGate.ahead`), across all its channels.
CLAIMS_AHEAD = 2
#: How often a dispatcher sweeps a channel's lost leases and expired rows while claiming
#: (rows the sweep would end are never leased meanwhile; they wait at most this long).
SWEEP_EVERY_S = 5.0
#: Time kept, after a send's timeout, for the claim to record its outcome within the lease.
RECORD_MARGIN_S = 1.0


@dataclass
class JobContext:
    store: Store
    registry: Registry
    send_context: Callable[[], SendContext]
    slots: asyncio.Semaphore
    worker_id: str
    lease_s: float
    claim_size: int
    rand: Callable[[], float]
    clock: Clock
    events: EventMemory
    stopping: asyncio.Event
    #: Sends one realtime claim runs side by side: the dispatcher's concurrency (more lanes
    #: than slots would only wait).
    lanes: int
    #: Keeps this dispatcher's realtime claims from running far ahead of its sends.
    gate: ClaimGate
    metrics: Metrics | None = None
    #: channel id -> monotonic time of its last sweep by this dispatcher (shared by its jobs,
    #: so a trickle of single events does not sweep on every claim either).
    swept_at: dict[int, float] = field(default_factory=dict)


async def run_realtime(ctx: JobContext, channel: Channel) -> bool:
    """Drain the channel; True when at least one claim leased rows.

    After a full claim the next is taken while the previous one is still sending (at most
    `CLAIMS_IN_FLIGHT` at once), so the database round trips of claiming and recording
    overlap the HTTP sends instead of pausing them.
    """
    leased = False
    running: set[asyncio.Task[None]] = set()
    try:
        while not ctx.stopping.is_set():
            async with ctx.gate.claim():
                if ctx.stopping.is_set():
                    break  # stopped while waiting for room
                # Read after the wait for room, so the lease estimate below is not cut short.
                now = ctx.clock.monotonic()
                sweep = _sweep_due(ctx, channel, now)
                claim = await ctx.store.claim_realtime(
                    channel.id,
                    ctx.claim_size,
                    ctx.lease_s,
                    ctx.worker_id,
                    swept=sweep,
                    known_events=ctx.events.known,
                )
                ctx.events.remember(claim)
                if sweep:
                    ctx.swept_at[channel.id] = now
                if claim is None:
                    break
                queued = ctx.gate.leased(len(claim))
            leased = True
            if ctx.metrics:
                ctx.metrics.claimed("realtime", len(claim))
            # `now` was read before the claim asked, so the lease ends after `now + lease_s`.
            task = asyncio.create_task(_send_claim(ctx, claim, now + ctx.lease_s, queued))
            # Released when the task ends however it ends (even cancelled before it ran).
            task.add_done_callback(functools.partial(_release, queued))
            running.add(task)
            if len(claim) < ctx.claim_size:
                # A short claim took what was due (or what the rate allowed): finish it and
                # end the job. Rows that fall due later wake the dispatcher, which asks once
                # for every channel instead of each job claiming again to find nothing.
                await asyncio.gather(*running)
                running.clear()
                break
            if len(running) >= CLAIMS_IN_FLIGHT:
                done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()  # a failure to record ends the job like before
        if running:
            await asyncio.gather(*running)
    finally:
        # Cancelled (W3) or failed: each claim records what it sent and gives the rest back.
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
    return leased


def _sweep_due(ctx: JobContext, channel: Channel, now: float) -> bool:
    last = ctx.swept_at.get(channel.id)
    return last is None or now - last >= SWEEP_EVERY_S


def _release(queued: Queued, _task: asyncio.Task[None]) -> None:
    queued.release()


async def _send_claim(ctx: JobContext, claim: Claim, lease_ends: float, queued: Queued) -> None:
    """Send every row of a realtime claim, at most `ctx.slots` at once across the dispatcher.

    A few lanes each take the next row until none is left, rather than a task per row: a
    task costs ~3 µs to create, schedule and gather, a noticeable share of a send.

    A row still waiting for a slot when its lease could end before its send does (many
    slow receivers ahead of it) is not sent but given back, claimable again at once with
    its attempt revoked: sent that late it could go out twice, once by whoever leased it
    next. The first row of a claim always goes, so a claim always makes progress.
    """
    adapter = ctx.registry.get(claim.channel.kind)
    start_by = _last_start(adapter, claim.channel, lease_ends)
    rows = iter(claim.items)
    results: list[SendResult] = []  # kept outside the lanes: a cancel must not forget a send
    started = 0

    async def lane() -> None:
        nonlocal started
        for item in rows:
            async with ctx.slots:
                queued.one()
                if started and ctx.clock.monotonic() > start_by:
                    continue  # left out of the results: given back by _write
                started += 1
                results.append(await _send_one(ctx, adapter, claim.channel, item))

    lanes = [asyncio.create_task(lane()) for _ in range(min(len(claim.items), ctx.lanes))]
    try:
        await asyncio.gather(*lanes)
    except BaseException:
        # Cancelled (W3) or broken: record what was sent and give the rest back.
        for task in lanes:
            task.cancel()
        await asyncio.gather(*lanes, return_exceptions=True)
        await asyncio.shield(_write(ctx, claim, results))
        raise
    await _write(ctx, claim, results)


def _last_start(adapter: Adapter, channel: Channel, lease_ends: float) -> float:
    """The latest moment (monotonic) a send of this claim may start and still end, and be
    recorded, within the lease: after it, another worker may lease the row and send it too.
    (A send that takes its whole timeout must still leave time to write its outcome.)"""
    longest_send = channel.timeout_s + RECORD_MARGIN_S
    if not adapter.bounded_by_http_timeout:
        longest_send += sending.TIMEOUT_GRACE_S
    return lease_ends - longest_send


async def _send_one(
    ctx: JobContext, adapter: Adapter, channel: Channel, item: ClaimedDelivery
) -> SendResult:
    target = Target((item.delivery.id,))
    try:
        message = sending.render_single(adapter, channel, target, item.event)
    except Exception as error:
        return sending.render_failed(target.delivery_ids, None, error, ctx.clock.now)
    return await sending.send(adapter, ctx.send_context(), channel, message, ctx.clock.now)


async def run_digest(ctx: JobContext, channel: Channel) -> bool:
    """Send due digest messages, one per claim (D4, D5); True when one was sent."""
    sent = False
    while not ctx.stopping.is_set() and await ctx.store.digest_due(channel.id):
        asked = ctx.clock.monotonic()  # before the claim: its lease ends after asked + lease_s
        sweep = _sweep_due(ctx, channel, asked)
        claim = await ctx.store.claim_digest(
            channel.id, ctx.lease_s, ctx.worker_id, swept=sweep, known_events=ctx.events.known
        )
        ctx.events.remember(claim)
        if sweep:
            ctx.swept_at[channel.id] = asked
        if claim is None:
            return sent
        sent = True
        if ctx.metrics:
            ctx.metrics.claimed("digest", len(claim))
        await _send_digest(ctx, claim, asked + ctx.lease_s)
    return sent


async def _send_digest(ctx: JobContext, claim: Claim, lease_ends: float) -> None:
    """Send the claim's messages in order, one token each (D4); stop at the first that is not
    delivered or has no token, or that could not end within the lease, and give the rest
    back (D5: claimable again, attempt revoked)."""
    adapter = ctx.registry.get(claim.channel.kind)
    start_by = _last_start(adapter, claim.channel, lease_ends)
    batch_id = claim.items[0].delivery.batch_id or min(claim.ids)
    events = [item.event for item in claim.items]

    results: list[SendResult] = []  # kept outside the task: a cancel must not forget a send

    async def all_parts() -> None:
        try:
            messages = sending.plan_digest(adapter, claim.channel, batch_id, claim.ids, events)
        except Exception as error:
            results.append(sending.render_failed(claim.ids, batch_id, error, ctx.clock.now))
            return
        for index, message in enumerate(messages):
            async with ctx.slots:
                # Checked again once the token is spent, right before the send: waiting for
                # the slot or the bucket's lock may have taken the time the send needed.
                if index > 0 and (
                    ctx.clock.monotonic() > start_by
                    or not await ctx.store.take_token(claim.channel.id)
                    or ctx.clock.monotonic() > start_by
                ):
                    break  # the rest go back (D5), sent by the next claim
                result = await sending.send(
                    adapter, ctx.send_context(), claim.channel, message, ctx.clock.now
                )
            results.append(result)
            if not isinstance(result.outcome, Delivered | Partial):
                break

    task = asyncio.create_task(all_parts())
    try:
        await task
    except asyncio.CancelledError:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.shield(_write(ctx, claim, results))
        raise
    await _write(ctx, claim, results)


async def _write(ctx: JobContext, claim: Claim, results: list[SendResult]) -> None:
    if ctx.metrics:
        for result in results:
            seconds = (result.finished_at - result.started_at).total_seconds()
            status = attempt_status(result.outcome).value
            ctx.metrics.sent(claim.channel.kind, status, seconds)
    results.sort(key=lambda result: result.ids[0])  # attempt rows in delivery order
    covered = {i for result in results for i in result.ids}
    unsent = [i for i in claim.ids if i not in covered]
    fenced = await report.record(
        ctx.store, claim, results, worker_id=ctx.worker_id, rand=ctx.rand, deferred=unsent
    )
    if fenced and ctx.metrics:
        ctx.metrics.fenced(fenced)
