"""Sending what a publish handed to this dispatcher (`tidings.store.handoff`): rows leased to
it by the publish itself, announced with their event in the notification, sent without a
claim, and recorded like any claim's (fenced by their token, C3).

A hand-off is a claim the dispatcher did not ask for, so it is sent in its own task beside
the jobs, through the same send slots; its rows count in the claim gate while they wait. A
stopping dispatcher gives what it is handed back at once (W3), as does one that cannot
read its channel.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import MutableMapping

from tidings.core.model import Channel, Claim
from tidings.dispatch.jobs import JobContext, write
from tidings.dispatch.realtime import Claimed, send_claim
from tidings.store.handoff import HandOff

log = logging.getLogger("tidings.dispatch")

#: Taken off a hand-off's lease as it is heard: the clocks' difference is measured only to a
#: round trip, and may drift since.
LEASE_SLACK_S = 2.0


async def send(
    ctx: JobContext,
    found: HandOff,
    heard_at: float,
    late_s: float,
    channels: MutableMapping[int, Channel],
) -> None:
    """Send the rows `found` hands over, heard at `heard_at` (monotonic) `late_s` after its
    publish ran; `channels`: the caller's copies, by id (one missing, or changed since the
    publish saw it, is read and kept there)."""
    lease_ends = heard_at + found.lease_s - max(late_s, 0.0) - LEASE_SLACK_S
    stale = [
        row.channel_id
        for row in found.rows
        if (copy := channels.get(row.channel_id)) is None
        or copy.updated_at != row.channel_updated_at
    ]
    if stale:
        loaded = await ctx.store.load_channels(stale)
        for channel_id in stale:
            channels.pop(channel_id, None)
            if (channel := loaded.get(channel_id)) is not None:
                channels[channel_id] = channel
    claims = found.claims(channels)
    ctx.events.remember(claims[0] if claims else None)
    if ctx.metrics:
        ctx.metrics.claimed("realtime", len(claims))
        ctx.metrics.handed.inc(len(claims))
    if len(claims) == 1:  # one channel (most events): no task to create and wait a turn for
        await _send(ctx, claims[0], lease_ends)
    else:
        await asyncio.gather(*(_send(ctx, claim, lease_ends) for claim in claims))


async def _send(ctx: JobContext, claim: Claim, lease_ends: float) -> None:
    if ctx.stopping.is_set():
        await give_back(ctx, claim, lease_ends)
        return
    queued = ctx.gate.leased(len(claim), claim.channel.id, len(claim) + 1)
    try:
        await send_claim(ctx, Claimed(claim, lease_ends, queued, len(claim), True, handed=True))
    finally:
        queued.release()


async def give_back(ctx: JobContext, claim: Claim, lease_ends: float) -> None:
    """The claim's rows back to `pending`, their attempt revoked, fenced by its token."""
    await write(ctx, claim, [], lease_ends)
