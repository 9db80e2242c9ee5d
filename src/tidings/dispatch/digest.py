"""The digest job: send a due digest as messages within the channel's limit, one rate token
each (D4, D5); what could not go now goes back to pending for the next claim.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from tidings import tracing
from tidings.channels.base import Adapter, Message
from tidings.core.model import Channel, Claim
from tidings.core.outcome import Delivered, Partial
from tidings.dispatch import sending
from tidings.dispatch.jobs import JobContext, last_start, sweep_due, write
from tidings.dispatch.report import SendResult


async def run_digest(ctx: JobContext, channel: Channel) -> bool:
    """Send due digest messages, one per claim (D4, D5); True when one was sent."""
    sent = False
    while not ctx.stopping.is_set() and await ctx.store.digest_due(channel.id):
        asked = ctx.clock.monotonic()  # before the claim: its lease ends after asked + lease_s
        sweep = sweep_due(ctx, channel, asked)
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
    start_by = last_start(adapter, claim.channel, lease_ends)
    batch_id = claim.items[0].delivery.batch_id or min(claim.ids)
    events = [item.event for item in claim.items]

    results: list[SendResult] = []  # kept outside the task: a cancel must not forget a send
    waiting: list[tuple[Message, datetime]] = []  # the part awaiting its answer, and its start

    async def all_parts() -> None:
        try:
            messages = sending.plan_digest(adapter, claim.channel, batch_id, claim.entries, events)
        except Exception as error:
            results.append(sending.render_failed(claim.ids, batch_id, error, ctx.clock.now))
            return
        for index, message in enumerate(messages):
            async with ctx.slots.slot(claim.channel.id):
                # Checked again once the token is spent, right before the send: waiting for
                # the slot or the bucket's lock may have taken the time the send needed.
                if ctx.stopping.is_set() or (
                    index > 0
                    and (
                        ctx.clock.monotonic() > start_by
                        or not await ctx.store.take_token(claim.channel.id)
                        or ctx.clock.monotonic() > start_by
                    )
                ):
                    break  # the rest go back (D5), sent by the next claim
                waiting.append((message, ctx.clock.now()))
                result = await _send_part(ctx, adapter, claim, message)
                waiting.clear()
            results.append(result)
            if not isinstance(result.outcome, Delivered | Partial):
                break

    task = asyncio.create_task(all_parts())
    try:
        await task
    except asyncio.CancelledError:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        # W3: a part still waiting for its answer may have arrived: an attempt, not unsent.
        results.extend(
            sending.interrupted(m.target.delivery_ids, m.target.batch_id, at, ctx.clock.now)
            for m, at in waiting
        )
        await asyncio.shield(write(ctx, claim, results, lease_ends))
        raise
    await write(ctx, claim, results, lease_ends)


async def _send_part(
    ctx: JobContext, adapter: Adapter, claim: Claim, message: Message
) -> SendResult:
    """One message of a digest; traced, a span linked to the trace of every event in it."""
    if not tracing.active():
        return await sending.send(
            adapter, ctx.send_context(), claim.channel, message, ctx.clock.now
        )
    ids = set(message.target.delivery_ids)
    links = [item.event.traceparent for item in claim.items if item.delivery.id in ids]
    attributes = tracing.send_attributes(claim.channel, message.target.delivery_ids[0])
    with tracing.span("tidings.send", links=links, attributes=attributes) as tp:
        result = await sending.send(
            adapter, ctx.send_context(tp), claim.channel, message, ctx.clock.now
        )
        tracing.outcome(result.outcome)
        return result
